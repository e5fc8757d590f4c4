"""Taints, cordon and our marks as one patch: what it leaves on the node, in every order.

Each order of nmo_taint and nmo_cordon is played on a node dict through the patch our plan
makes and the node-lifecycle controller's mirror (node_patch.controller), twice: the second
round must change nothing, and the node must end as asked.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import marks
from ansible_collections.nmo.maintenance.plugins.module_utils.model import node_state as state
from ansible_collections.nmo.maintenance.plugins.module_utils.model.node_state import Wanted
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import (
    DRAIN_TAINT,
    MAINTENANCE_TAINTS,
    UNSCHEDULABLE_TAINT,
)

from .node_patch import PatchTestFailed, apply, controller

KEY = marks.EXCLUDE_FROM_REMEDIATION
USER = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def bare(**spec: Any) -> Dict[str, Any]:
    return {"metadata": {"name": "w1", "labels": {"kubernetes.io/hostname": "w1"}}, "spec": dict(spec)}


def keys(node: Dict[str, Any]) -> List[str]:
    return [f"{t['key']}:{t['effect']}" for t in node["spec"].get("taints") or []]


def step(node: Dict[str, Any], want: Any) -> tuple:
    """One module call, then the controller: (node, changed, held)."""
    wanted = want(node) if callable(want) else want
    planned = state.plan(node, wanted)
    return controller(apply(node, planned.ops)), planned.changed, planned.held


TAINT = Wanted(add=list(MAINTENANCE_TAINTS))
UNTAINT = Wanted(remove=list(MAINTENANCE_TAINTS))


def CORDON(node):  # noqa: N802 - named as the module call it stands for
    return marks.cordon_wanted(node, True, KEY, True)


def UNCORDON(node):  # noqa: N802
    return marks.cordon_wanted(node, False, KEY, True)


MAINTAINED = ["node.kubernetes.io/unschedulable:NoSchedule", "medik8s.io/drain:NoSchedule", "dedicated:NoSchedule"]


def maintained() -> Dict[str, Any]:
    node = bare(unschedulable=True, taints=MAINTENANCE_TAINTS + [USER])
    node["metadata"]["labels"][KEY] = "true"
    return node


@pytest.mark.parametrize("start, calls, taints, cordoned", [
    (bare(taints=[USER]), [TAINT, CORDON], MAINTAINED, True),
    (bare(taints=[USER]), [CORDON, TAINT], MAINTAINED, True),
    (maintained(), [UNTAINT, UNCORDON], ["dedicated:NoSchedule"], False),
    (maintained(), [UNCORDON, UNTAINT], ["dedicated:NoSchedule"], False),
], ids=["taint-cordon", "cordon-taint", "untaint-uncordon", "uncordon-untaint"])
def test_every_order_ends_as_asked_and_a_second_run_changes_nothing(start, calls, taints, cordoned):
    node = start
    for want in calls:  # each call, then the same call again once the controller has acted
        node, _changed, _held = step(node, want)
        again, changed, _held = step(node, want)
        assert not changed and again == node, f"{want} changed the node again after the controller's mirror"
    for want in calls:  # the whole order, a second time
        again, changed, _held = step(node, want)
        assert not changed and again == node, f"{want} changed the node on the second run"
    assert sorted(keys(node)) == sorted(taints)
    assert bool(node["spec"].get("unschedulable")) is cordoned
    assert (node["metadata"]["labels"].get(KEY) == "true") is cordoned


def test_the_mirror_taint_is_not_added_to_a_schedulable_node_and_the_call_says_why():
    planned = state.plan(bare(), TAINT)
    assert planned.after["taints"] == [DRAIN_TAINT]
    assert len(planned.held) == 1 and "not cordoned" in planned.held[0] and "nmo_cordon" in planned.held[0]


def test_the_mirror_taint_is_kept_on_a_cordoned_node_and_the_call_says_why():
    node = bare(unschedulable=True, taints=[UNSCHEDULABLE_TAINT, DRAIN_TAINT])
    planned = state.plan(node, UNTAINT)
    assert apply(node, planned.ops)["spec"]["taints"] == [UNSCHEDULABLE_TAINT]
    assert "cordoned" in planned.held[0]


def test_cordon_writes_the_mirror_taint_in_the_same_patch_and_keeps_user_taints_after_it():
    node = bare(taints=[USER])
    planned = state.plan(node, CORDON(node))
    after = apply(node, planned.ops)
    assert after["spec"] == {"unschedulable": True, "taints": [UNSCHEDULABLE_TAINT, USER]}
    assert after["metadata"]["labels"][KEY] == "true"
    assert planned.ops[0] == {"op": "test", "path": "/spec/taints", "value": [USER]}, "taints are written unguarded"


def test_uncordon_removes_the_mirror_taint_and_leaves_the_drain_taint_to_nmo_taint():
    node = bare(unschedulable=True, taints=[UNSCHEDULABLE_TAINT, DRAIN_TAINT, USER])
    node["metadata"]["labels"][KEY] = "true"
    after = apply(node, state.plan(node, UNCORDON(node)).ops)
    assert after["spec"] == {"taints": [DRAIN_TAINT, USER]}
    assert KEY not in after["metadata"]["labels"]


def test_begin_and_end_are_one_patch_each_and_the_end_undoes_the_begin():
    node = bare(taints=[USER])
    begun = apply(node, state.plan(node, marks.begin_wanted(node, KEY, "r1")).ops)
    assert begun["spec"] == {"taints": MAINTENANCE_TAINTS + [USER], "unschedulable": True}
    assert begun["metadata"]["annotations"] == {marks.MAINTAINED_BY: "r1", marks.LABEL_ADDED: "true"}
    ended = apply(begun, state.plan(begun, marks.end_wanted(begun, KEY)).ops)
    assert ended["spec"] == {"taints": [USER]}
    assert ended["metadata"] == {**node["metadata"], "annotations": {}}


def test_a_node_without_taints_or_labels_gets_the_fields_guarded_by_a_test_of_null():
    node = {"metadata": {"name": "w1"}, "spec": {}}
    ops = state.plan(node, marks.begin_wanted(node, "a~b/c", "r1")).ops
    assert {"op": "test", "path": "/spec/taints", "value": None} in ops
    assert {"op": "test", "path": "/metadata/labels", "value": None} in ops
    assert {"op": "add", "path": "/metadata/labels", "value": {"a~b/c": "true"}} in ops
    assert apply(node, ops)["metadata"]["labels"] == {"a~b/c": "true"}


def test_a_removed_label_is_tested_first_so_a_concurrent_change_makes_the_patch_fail():
    node = bare(unschedulable=True)
    node["metadata"]["labels"][KEY] = "true"
    ops = state.plan(node, UNCORDON(node)).ops
    escaped = "/metadata/labels/remediation.medik8s.io~1exclude-from-remediation"
    assert ops.index({"op": "test", "path": escaped, "value": "true"}) < ops.index({"op": "remove", "path": escaped})
    node["metadata"]["labels"][KEY] = "maybe"  # someone else wrote it after we read it
    with pytest.raises(PatchTestFailed):
        apply(node, ops)


def test_nothing_to_do_is_no_operation_at_all():
    node = bare(unschedulable=True, taints=[UNSCHEDULABLE_TAINT, DRAIN_TAINT])
    node["metadata"]["labels"][KEY] = "true"
    node["metadata"]["annotations"] = {marks.MAINTAINED_BY: "r0"}
    planned = state.plan(node, marks.begin_wanted(node, KEY, "r1"))
    assert planned.ops == [] and not planned.changed, "a resumed maintenance keeps its first record"


def test_an_annotation_set_to_none_is_removed_only_when_present():
    node = bare()
    node["metadata"]["annotations"] = {"nmo.maintenance/campaign": "w48", "other": "x"}
    assert state.plan(node, Wanted(annotations={"nmo.maintenance/campaign": "w48"})).ops == []
    after = apply(node, state.plan(node, Wanted(annotations={"nmo.maintenance/campaign": None, "gone": None})).ops)
    assert after["metadata"]["annotations"] == {"other": "x"}
