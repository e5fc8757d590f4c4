"""The drain tells the truth about the node (issue 23): pods that come back, a node deleted
mid-drain or mid-hook, and errors grouped when the RBAC binding goes mid-drain."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client, ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainFailed, DrainOptions, drain
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions, preflight

from .maintenance_support import (
    LEASES,
    Background,
    RestrictedUser,
    Run,
    WatchRecorder,
    events_of,
    maintenance_of,
    nm_name,
    nm_status,
    run,
    slot_prefix,
    start_maintenance,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

EVERYTHING = [{"operator": "Exists"}]
LET_IN = ("tolerates medik8s.io/drain:NoSchedule and node.kubernetes.io/unschedulable:NoSchedule "
          "via {operator: Exists}")


def prefer(node: str) -> Dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}}]}}


def tolerant_web(world: Any, node: str, replicas: int = 3) -> List[str]:
    """The issue's case 1: a Deployment tolerating every taint, preferring ``node``, under a
    PodDisruptionBudget maxUnavailable 1; its pods all on ``node``."""
    world.deployment("web", replicas, pod_extra={"tolerations": EVERYTHING, "affinity": prefer(node)})
    world.pdb("web", "web", max_unavailable=1)
    pods = world.pods(namespace=world.namespace, selector="app=web")
    assert {p["spec"]["nodeName"] for p in pods} == {node}, "the scheduler must have preferred the node"
    return sorted(p["metadata"]["name"] for p in pods)


class PodsSeen(WatchRecorder):
    """The name of every pod ever bound to ``node`` while the block runs, from every watch
    event (a pod created and evicted between two looks included)."""

    def __init__(self, client: Any, node: str) -> None:
        super().__init__(Watcher(client, "/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"}))
        self.names: Set[str] = set()

    def _look(self) -> None:
        self.names.update(o["metadata"]["name"] for o in list(self.watcher.objects.values()))

    def _saw(self, events: List[Any]) -> None:
        for etype, obj in events:
            for item in obj.get("items", []) if etype == "RESYNC" else [obj]:
                self.names.add(item.get("metadata", {}).get("name", ""))


def own_client(cluster: Any) -> Client:
    return Client(cluster.client.configuration, pool_size=40)


def slots_of(client: Any, world: Any) -> List[Dict[str, Any]]:
    return [lease for lease in (client.get_or_none(LEASES) or {}).get("items", [])
            if lease["metadata"]["name"].startswith(slot_prefix(world))]


# -- 1. pods that come back ------------------------------------------------------------------------
def test_pods_that_come_back_are_named_evicted_again_and_fail_the_drain(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    tolerant_web(world, a)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]

    with PodsSeen(cluster.client, a) as seen:
        with pytest.raises(DrainFailed) as failed:
            drain(own_client(cluster), DrainOptions(node=a, maintenance=name, timeout=120, retry_delay=0.5))

        message = failed.value.message
        assert f"pods keep coming back to node {a}" in message, message
        assert LET_IN in message and f"{world.namespace}/ReplicaSet/web-" in message
        assert "returning_pod_evictions" in message
        returned = failed.value.details["returned"]
        # 3 evicted again, then one more is one too many (more may land before the drain stops)
        assert len(returned) >= 4 and all(r["reason"] == LET_IN for r in returned), returned
        status = nm_status(cluster, name)
        assert status["phase"] != "Succeeded" and status["drainProgress"] < 100 and status["pendingPods"], status
        assert "came back" in status["lastError"]
        assert world.pods(node=a), "the pods that came back are on the node"
        # Every pod the status names as pending was on the node. Not necessarily still: an
        # eviction in flight when the drain stopped may have been accepted since.
        wait_for(lambda: set(status["pendingPods"]) <= seen.names, 10, "each pending pod seen on the node")
    warned = [e for e in events_of(cluster.client, name, "Drain") if e["type"] == "Warning"]
    assert warned and all("came back to node" in e["message"] and LET_IN in e["message"] for e in warned)


def test_the_preflight_says_the_replacements_would_come_back(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    tolerant_web(world, a)
    answer = preflight(cluster.client, PreflightOptions(nodes=(a,)))
    (report,) = answer["nodes"]
    assert report["verdict"] == "no-go" and answer["blocked"] == [a]
    assert len(report["blockers"]) == 1 and "would come back to the node" in report["blockers"][0]
    assert LET_IN in report["blockers"][0] and "replacement(s) fit elsewhere" not in report["summary"]


def test_the_role_never_reports_succeeded_while_pods_came_back(cluster, world, user, tmp_path):
    a, _b = world.add_nodes(workers=2)
    tolerant_web(world, a)

    stopped = run("maintenance.yml", write_inventory(world, tmp_path), user.kubeconfig, args=["-l", a])
    assert stopped.proc.returncode != 0 and "would come back to the node" in stopped.output, stopped.output[-3000:]
    assert maintenance_of(cluster.client, a) is None, "the pre-flight stops it before anything is written"

    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn")
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
    assert result.proc.returncode != 0, result.output[-3000:]
    assert f"pods keep coming back to node {a}" in result.output and LET_IN in result.output
    drained = result.last("Drain | Evict the pods (PodDisruptionBudgets respected)")
    assert drained and drained["result"].get("failed") and len(drained["result"]["returned"]) >= 4
    nm = maintenance_of(cluster.client, a)
    assert nm is not None and nm["status"]["phase"] == "Failed" and nm["status"]["drainProgress"] < 100
    assert "SucceedMaintenance" not in [e["reason"] for e in events_of(cluster.client, nm["metadata"]["name"])]


# -- 2. the node deleted mid-drain, mid-hook ------------------------------------------------------
def assert_ended_for_a_gone_node(cluster: Any, world: Any, user: Any, tmp_path: Path, inventory: str, node: str,
                                 by: str) -> None:
    """What is left of a deleted node's maintenance (the NodeMaintenance, Failed, and nothing
    else of ours), what status.yml says of it, and recover.yml ending it (``by`` names it)."""
    nm = maintenance_of(cluster.client, node)
    assert nm is not None and nm["status"]["phase"] == "Failed", nm
    assert "deleted" in nm["status"]["lastError"]
    wait_for(lambda: not slots_of(cluster.client, world), 10, "the slot released by the failure record")
    # the node lease, owned by the Node as medik8s/common makes it, goes with the Node
    wait_for(lambda: cluster.client.get_or_none(f"{LEASES}/node-{node}") is None, 30, "the node lease collected")

    for extra in ({}, {"nmo_nodes": node}):
        status = run("status.yml", inventory, user.kubeconfig, extra_vars=extra)
        assert status.proc.returncode == 0, status.output[-3000:]
        assert f"{node}  node deleted" in status.output and nm["metadata"]["name"] in status.output
        assert "No node is in maintenance" not in status.output
        assert "(as written " in status.output  # the progress says when it was written (issue 23, last point)

    recovered = run("recover.yml", inventory, user.kubeconfig, extra_vars={"nmo_nodes": by})
    assert recovered.proc.returncode == 0, recovered.output[-3000:]
    assert "Unknown node name" not in recovered.output
    assert maintenance_of(cluster.client, node) is None and not slots_of(cluster.client, world)


def test_a_node_deleted_mid_drain_stops_it_at_once_and_can_be_recovered(cluster, world, user, tmp_path):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 2)
    world.pdb("web", "web", min_available=2)  # never allows: the drain waits until the node goes
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="off")
    running = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
    try:
        wait_for(lambda: len(nm_status(cluster, nm_name(a)).get("pendingPods") or []) == 2, 90,
                 "the drain waiting on the budget")
        (slot,) = slots_of(cluster.client, world)
        assert not slot["metadata"].get("ownerReferences"), "the slot must outlive a deleted Node"
        lease = cluster.client.get(f"{LEASES}/node-{a}")
        assert [r["kind"] for r in lease["metadata"]["ownerReferences"]] == ["Node"], "as medik8s/common makes it"

        deleted_at = time.monotonic()
        cluster.client.delete(f"/api/v1/nodes/{a}")
        rc = running.wait(120)
        took = time.monotonic() - deleted_at
    finally:
        if running.proc.poll() is None:
            running.kill()
    assert rc != 0, running.output[-3000:]
    assert f"drain of node {a} stopped: the node was deleted" in running.output, running.output[-3000:]
    assert took < 30, f"the run ended {took:.0f} s after the node was deleted (the drain must notice at once)"
    failed = running.last("Failed | Record it on the NodeMaintenance, then roll back or keep")
    assert failed and not failed["result"].get("failed") and failed["result"].get("node_deleted"), failed
    assert_ended_for_a_gone_node(cluster, world, user, tmp_path, inventory, a, by=nm_name(a))


def test_a_node_deleted_mid_hook_fails_the_ready_wait_saying_so(cluster, world, user, tmp_path):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 1)
    hook = tmp_path / "decommission.yml"
    hook.write_text(
        "- name: The node is decommissioned while it is out\n"
        f"  ansible.builtin.command: {cluster.bin}/kubectl --kubeconfig {cluster.kubeconfig} delete node {a}\n"
        "  changed_when: true\n")
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="off",
                                node_maintenance_hooks_work=[str(hook)])
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
    assert result.proc.returncode != 0, result.output[-3000:]
    assert f'node "{a}" not found in cluster: it was deleted' in result.output, result.output[-3000:]
    failed = result.last("Failed | Record it on the NodeMaintenance, then roll back or keep")
    assert failed and not failed["result"].get("failed") and failed["result"].get("node_deleted"), failed
    assert_ended_for_a_gone_node(cluster, world, user, tmp_path, inventory, a, by=a)


# -- 3. errors grouped -----------------------------------------------------------------------------
def test_rbac_revoked_mid_drain_gives_one_line_per_distinct_error(cluster, world, crd_installed, tmp_path):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 30)
    world.pdb("web", "web", min_available=30)  # every eviction refused: the drain retries them all
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    with RestrictedUser(cluster, tmp_path) as restricted:
        client = connect(ConnectionOptions(kubeconfig=restricted.kubeconfig), pool_size=40)
        running = Background(lambda: drain(client, DrainOptions(node=a, maintenance=name, timeout=120)))
        wait_for(lambda: len(nm_status(cluster, name).get("pendingPods") or []) == 30
                 and events_of(cluster.client, name, "DrainError"), 60, "all 30 evictions refused by the budget")
        cluster.client.delete(restricted.bindings[0])  # the ClusterRoleBinding nmo-maintenance: pods/eviction
        with pytest.raises(DrainFailed) as failed:
            running.join(90)
    message = failed.value.message
    assert message.startswith(f"drain of node {a} stopped: "), message
    # One part per distinct error, whatever the timing: the evictions in flight when the
    # binding went all got 403 (one part, however many they were), the rest still carry the
    # budget's refusal (another part), and the two count all 30 pods.
    pending = message.split("Still pending: ", 1)[1].rstrip(".").split("; ")
    assert len(pending) <= 2 and any("403 Forbidden" in part and "forbidden" in part for part in pending), message
    counted = [int(m.group(1)) if (m := re.search(r"\(x(\d+) pods: ", part)) else 1 for part in pending]
    assert sum(counted) == 30, (counted, message)
    assert message.count("forbidden") <= 2, message  # once for what stopped it, once for what is left
    assert len(message) < 2000, f"{len(message)} characters: {message}"
