"""nmo_taint and nmo_cordon in every order against the real node-lifecycle controller.

kube-controller-manager's node-lifecycle controller keeps node.kubernetes.io/unschedulable
equal to spec.unschedulable. Each order is run, each call twice in a row once the controller
has had its say (the node's taint agrees with its cordon), then the whole order a second
time: no call after the first may report a change, and the node ends as asked.
"""

from typing import Any, Dict, List

import pytest
from helpers import run_module
from topology import wait_for

pytestmark = pytest.mark.cluster

LABEL = "remediation.medik8s.io/exclude-from-remediation"
MIRROR = ("node.kubernetes.io/unschedulable", "NoSchedule")
DRAIN = ("medik8s.io/drain", "NoSchedule")
USER_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
USER = ("dedicated", "NoSchedule")

TAINT = ("nmo_taint", {"state": "present"})
UNTAINT = ("nmo_taint", {"state": "absent"})
CORDON = ("nmo_cordon", {"state": "cordoned"})
UNCORDON = ("nmo_cordon", {"state": "uncordoned"})


def keys(node: Dict[str, Any]) -> List[tuple]:
    return sorted((t["key"], t["effect"]) for t in node["spec"].get("taints") or [])


def settled(cluster: Any, name: str) -> Dict[str, Any]:
    """The node once the controller agrees with it: the mirror taint there exactly when cordoned."""
    def agreed():
        node = cluster.client.get(f"/api/v1/nodes/{name}")
        return node if (MIRROR in keys(node)) == bool(node["spec"].get("unschedulable")) else None
    return wait_for(agreed, 30, f"node {name}'s unschedulable taint to follow its cordon")


def call(cluster: Any, name: str, module: str, args: Dict[str, Any]) -> Dict[str, Any]:
    result = run_module(module, {"node": name, **args}, cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    return result


def test_the_test_clusters_node_lifecycle_controller_mirrors_cordon_into_the_taint(cluster, world):
    (name,) = world.add_nodes(workers=1)
    world.cordon(name)  # a plain merge patch: only the controller can add the taint
    wait_for(lambda: MIRROR in keys(world.node(name)), 30, "the controller to add the unschedulable taint")
    world.cordon(name, False)
    wait_for(lambda: MIRROR not in keys(world.node(name)), 30, "the controller to remove it")


@pytest.mark.parametrize("begin_maintained, calls, wanted", [
    (False, [TAINT, CORDON], [DRAIN, USER, MIRROR]),
    (False, [CORDON, TAINT], [DRAIN, USER, MIRROR]),
    (True, [UNTAINT, UNCORDON], [USER]),
    (True, [UNCORDON, UNTAINT], [USER]),
], ids=["taint-then-cordon", "cordon-then-taint", "untaint-then-uncordon", "uncordon-then-untaint"])
def test_each_order_twice_changes_nothing_the_second_time_and_ends_as_asked(
        cluster, world, begin_maintained, calls, wanted):
    (name,) = world.add_nodes(workers=1)
    cluster.client.patch(f"/api/v1/nodes/{name}", {"spec": {"taints": [USER_TAINT]}}, "merge")
    if begin_maintained:
        for module, args in (TAINT, CORDON):
            call(cluster, name, module, args)
    settled(cluster, name)
    for module, args in calls:
        first = call(cluster, name, module, args)
        assert first["changed"], f"{module} {args} did nothing on a node that needed it"
        before = settled(cluster, name)
        again = call(cluster, name, module, args)
        assert not again["changed"], f"{module} {args} changed the node again: the controller undid it"
        assert keys(settled(cluster, name)) == keys(before)
    for module, args in calls:
        assert not call(cluster, name, module, args)["changed"], f"second run: {module} {args} changed the node"
    node = settled(cluster, name)
    assert keys(node) == sorted(wanted)
    cordoned = MIRROR in wanted
    assert bool(node["spec"].get("unschedulable")) is cordoned
    assert (node["metadata"].get("labels", {}).get(LABEL) == "true") is cordoned


def test_nmo_taint_says_why_it_leaves_the_unschedulable_taint_to_the_cordon(cluster, world):
    (name,) = world.add_nodes(workers=1)
    added = call(cluster, name, *TAINT)
    assert keys(settled(cluster, name)) == [DRAIN]
    assert any("not cordoned" in w and "nmo_cordon" in w for w in added.get("warnings", [])), added.get("warnings")
    call(cluster, name, *CORDON)
    kept = call(cluster, name, *UNTAINT)
    assert keys(settled(cluster, name)) == [MIRROR]
    assert any("kept: the node is cordoned" in w for w in kept.get("warnings", [])), kept.get("warnings")
