"""Surge-first (issue 33): a single-replica Deployment behind minAvailable 1 drains with surge,
its budget never broken, and stays blocked without it; a Recreate Deployment and a
StatefulSet stay blocked, each with why surge cannot help. One node, one pre-flight, two drains."""

from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainFailed, DrainOptions, drain
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions, preflight

from .maintenance_support import AvailabilityRecorder, WatchRecorder, events_of, start_maintenance

pytestmark = pytest.mark.cluster

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def own_client(cluster: Any) -> Client:
    return Client(cluster.client.configuration, pool_size=8)


class BudgetRecorder(WatchRecorder):
    """The fewest currentHealthy of each budget of a namespace, over the drain."""

    def __init__(self, client: Any, namespace: str) -> None:
        super().__init__(Watcher(client, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"))
        self.fewest: Dict[str, int] = {}
        self.looks = 0

    def _look(self) -> None:
        for pdb in self.watcher.objects.values():
            healthy = (pdb.get("status") or {}).get("currentHealthy")
            if healthy is not None:
                name = pdb["metadata"]["name"]
                self.fewest[name] = min(self.fewest.get(name, healthy), healthy)
        self.looks += 1


def test_surge_frees_a_single_replica_behind_min_available_1_and_nothing_else(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    ns = world.namespace
    with world.only_schedulable(a):
        world.deployment("solo", 1)
        world.deployment("recreate", 1)
        world.statefulset("db", 1)
        # its replacement can go nowhere else: surge is tried, and says the new pod cannot be scheduled
        world.deployment("pinned", 1, pod_extra={"nodeSelector": {"kubernetes.io/hostname": a}})
    cluster.client.patch(f"/apis/apps/v1/namespaces/{ns}/deployments/recreate",
                         {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}}, "merge")
    for app in ("solo", "recreate", "db", "pinned"):
        world.pdb(app, app, min_available=1)
    solo = world.pods(namespace=ns, selector="app=solo")[0]["metadata"]["name"]
    recreate = world.pods(namespace=ns, selector="app=recreate")[0]["metadata"]["name"]

    # the pre-flight says, per blocked pod, whether surge would free it
    judged = preflight(own_client(cluster), PreflightOptions(nodes=(a,)))
    blockers = " | ".join(judged["nodes"][0]["blockers"])
    assert f"{ns}/{solo} is refused by PDB {ns}/solo" in blockers and "surge: true would free it" in blockers, blockers
    assert "Recreate strategy" in blockers and "StatefulSet db makes a pod's replacement only after" in blockers
    with_surge = preflight(own_client(cluster), PreflightOptions(nodes=(a,), surge=True))
    node = with_surge["nodes"][0]
    assert not any(solo in b for b in node["blockers"]) and any(
        solo in w and "the drain surges it" in w for w in node["warnings"]), node
    assert len([b for b in node["blockers"] if "PDB" in b]) == 2, node["blockers"]

    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    # without surge: solo stays, as every peer's drain leaves it
    with pytest.raises(DrainFailed) as without:
        drain(own_client(cluster), DrainOptions(node=a, maintenance=name, timeout=3))
    assert f"{ns}/{solo}" in without.value.message and "surge" not in without.value.message
    assert RESTARTED_AT not in (cluster.client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/solo")["spec"]
                                ["template"]["metadata"].get("annotations") or {})

    # with surge: solo goes (its budget sampled all along), Recreate and the StatefulSet stay, named
    with BudgetRecorder(cluster.client, ns) as budgets, AvailabilityRecorder(cluster.client, ns) as ready, \
            pytest.raises(DrainFailed) as surged:
        drain(own_client(cluster), DrainOptions(node=a, maintenance=name, timeout=20, surge=True))
    result = surged.value.details
    assert [p["name"] for p in result["surged"]] == [solo], result
    assert result["surged"][0]["deployment"] == "solo"
    pending = {p["name"] for p in result["pending"]}
    assert solo not in pending and recreate in pending and "db-0" in pending and len(pending) == 3, pending
    assert budgets.looks > 2 and budgets.fewest.get("solo", 0) >= 1, budgets.fewest
    assert ready.fewest.get("solo", 0) >= 1, ready.fewest
    message = surged.value.message
    assert "the Recreate strategy, which stops the old pods before it starts new ones" in message, message
    assert "StatefulSet db makes a pod's replacement only after it is gone" in message, message
    assert "surge blocked: Deployment pinned restarted, but its replacement pinned-" in message, message
    assert "cannot be scheduled: 0/" in message, message
    new = world.pods(namespace=ns, selector="app=solo")
    assert len(new) == 1 and new[0]["spec"]["nodeName"] != a and new[0]["metadata"]["name"] != solo
    template = cluster.client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/solo")["spec"]["template"]
    assert RESTARTED_AT in template["metadata"]["annotations"]
    events = [e["message"] for e in events_of(cluster.client, name)]
    assert sum(1 for m in events if m.startswith(f"Pod {ns}/{solo} surged")) == 1, events
