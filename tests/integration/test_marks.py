"""What is ours on a node, and only that, is undone: an administrator's label and cordon stay.

The begin records on the node which run cordoned it and whether it added the
exclude-from-remediation label; the end and recover.yml undo only that. Our CRD takes what
NMO writes (a negative drainProgress).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import run_module, run_playbook

from .maintenance_support import (
    LABEL,
    LEASES,
    NM_API,
    leases_naming,
    maintenance_of,
    node_clean,
    slot_prefix,
    wait_clean,
)

pytestmark = [pytest.mark.cluster]

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
MAINTAINED_BY = "nmo.maintenance/maintained-by"
LABEL_ADDED = "nmo.maintenance/label-added"


def playbook(name: str, cluster: Any, extra: Optional[Dict[str, Any]] = None) -> Any:
    args: List[str] = []
    for key, value in (extra or {}).items():
        args += ["-e", f"{key}={value}"]
    return run_playbook(None, cluster.kubeconfig, args=args, playbook_path=str(PLAYBOOKS / name))


def labels(cluster: Any, node: str) -> Dict[str, str]:
    return cluster.client.get(f"/api/v1/nodes/{node}")["metadata"].get("labels") or {}


def annotations(cluster: Any, node: str) -> Dict[str, str]:
    return cluster.client.get(f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {}


def module(cluster: Any, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
    result = run_module(name, args, cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    return result


def test_an_administrators_label_survives_our_maintenance(cluster, world):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    cluster.client.patch(f"/api/v1/nodes/{w1}", {"metadata": {"labels": {LABEL: "true"}}}, "merge")
    prefix = slot_prefix(world)
    for node in (w1, w2):
        module(cluster, "nmo_maintenance", {"node": node, "install_crd": True, "slot_prefix": prefix, "wait": False,
                                            "concurrency": 2})
    assert annotations(cluster, w1).get(MAINTAINED_BY) and LABEL_ADDED not in annotations(cluster, w1)
    assert annotations(cluster, w2).get(LABEL_ADDED) == "true"
    for node in (w1, w2):
        module(cluster, "nmo_maintenance", {"node": node, "state": "absent", "slot_prefix": prefix})
    wait_clean(cluster.client, [w2])
    assert labels(cluster, w1).get(LABEL) == "true", "the administrator's label was removed"
    assert LABEL not in labels(cluster, w2), "our own label was kept"
    for node in (w1, w2):
        assert MAINTAINED_BY not in annotations(cluster, node) and LABEL_ADDED not in annotations(cluster, node)
        assert not cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")


def test_recover_without_names_leaves_nodes_that_carry_no_mark_of_ours(cluster, world):
    """worker-01: cordoned and labelled by an administrator (or by NMO), never ours.
    worker-02: ours, its NodeMaintenance deleted by hand. recover.yml ends only worker-02."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    cluster.client.patch(f"/api/v1/nodes/{w1}", {"metadata": {"labels": {LABEL: "true"}},
                                                 "spec": {"unschedulable": True}}, "merge")
    prefix = slot_prefix(world)
    module(cluster, "nmo_maintenance", {"node": w2, "install_crd": True, "slot_prefix": prefix, "wait": False})
    cluster.client.delete(f"{NM_API}/{maintenance_of(cluster.client, w2)['metadata']['name']}")

    recovered = playbook("recover.yml", cluster, {"node_maintenance_slot_prefix": prefix})
    assert recovered.rc == 0, recovered.stdout[-3000:]
    wait_clean(cluster.client, [w2])
    assert leases_naming(cluster.client, [w2], prefix) == []
    node = cluster.client.get(f"/api/v1/nodes/{w1}")
    assert node["spec"].get("unschedulable") and labels(cluster, w1).get(LABEL) == "true", \
        "recover.yml undid a cordon and a label that were not ours"
    assert w1 not in recovered.stdout.split("Nodes to recover", 1)[-1].split("TASK", 1)[0]


def test_our_node_lease_is_not_held_under_nmos_holder_name(cluster, world):
    world.add_nodes(workers=1)
    (w1,) = world.workers
    module(cluster, "nmo_maintenance", {"node": w1, "install_crd": True, "slot_prefix": slot_prefix(world),
                                        "wait": False})
    spec = cluster.client.get(f"{LEASES}/node-{w1}")["spec"]
    assert spec["holderIdentity"] == "nmo.maintenance", "NMO's holder name would let a running NMO take our lease"
    module(cluster, "nmo_maintenance", {"node": w1, "state": "absent", "slot_prefix": slot_prefix(world)})
    assert cluster.client.get_or_none(f"{LEASES}/node-{w1}") is None


def test_our_crd_takes_a_negative_drain_progress_as_nmos_does(cluster, world):
    world.add_nodes(workers=1)
    (w1,) = world.workers
    module(cluster, "nmo_maintenance", {"node": w1, "install_crd": True, "slot_prefix": slot_prefix(world),
                                        "wait": False})
    name = maintenance_of(cluster.client, w1)["metadata"]["name"]
    # what NMO's reconcile may write when pods come and go during its drain
    written = cluster.client.patch(f"{NM_API}/{name}/status", {"status": {"drainProgress": -50}}, "merge")
    assert written["status"]["drainProgress"] == -50
    module(cluster, "nmo_maintenance", {"node": w1, "state": "absent", "slot_prefix": slot_prefix(world)})
    assert node_clean(cluster.client, w1) is None


def test_the_end_waits_for_nmos_finalizer_and_a_terminating_object_is_not_resumed(cluster, world):
    """NMO adds foregroundDeleteNodeMaintenance to every NodeMaintenance it sees and removes it
    once it has let the node go. Here the test plays NMO's part by hand."""
    import threading

    from topology import wait_for

    world.add_nodes(workers=1)
    (w1,) = world.workers
    prefix = slot_prefix(world)
    module(cluster, "nmo_maintenance", {"node": w1, "install_crd": True, "slot_prefix": prefix, "wait": False})
    name = maintenance_of(cluster.client, w1)["metadata"]["name"]
    cluster.client.patch(f"{NM_API}/{name}", {"metadata": {"finalizers": ["foregroundDeleteNodeMaintenance"]}},
                         "merge")
    ended: Dict[str, Any] = {}
    end = threading.Thread(target=lambda: ended.update(run_module(
        "nmo_maintenance", {"node": w1, "state": "absent", "slot_prefix": prefix}, cluster.kubeconfig)))
    end.start()
    try:
        wait_for(lambda: (cluster.client.get_or_none(f"{NM_API}/{name}") or {}).get("metadata", {})
                 .get("deletionTimestamp"), 60, "the end to delete the NodeMaintenance")
        assert end.is_alive(), f"the end did not wait for the finalizer: {ended}"
        again = run_module("nmo_maintenance", {"node": w1, "slot_prefix": prefix, "wait": False}, cluster.kubeconfig)
        assert again.get("failed") and "is being deleted" in again["msg"] and "kubectl patch" in again["msg"], again
    finally:
        cluster.client.patch(f"{NM_API}/{name}", {"metadata": {"finalizers": None}}, "merge")  # NMO lets go
        end.join(timeout=120)
    assert not ended.get("failed"), ended.get("msg")
    assert ended["deleted"] and maintenance_of(cluster.client, w1) is None
    wait_clean(cluster.client, [w1])
