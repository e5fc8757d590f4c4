"""The node lifecycle conditions' rules (model/node_conditions.py): support, ours, the patches."""

from __future__ import annotations

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import node_conditions as nc

GATE_ON = 'kubernetes_feature_enabled{name="NodeLifecycleConditions",stage="ALPHA"} 1'


def test_the_gate_is_read_from_its_metric_line_only() -> None:
    lines = ["# HELP kubernetes_feature_enabled ...", 'kubernetes_feature_enabled{name="NodeLifecycle",stage="ALPHA"} 1',
             GATE_ON.replace("} 1", "} 0")]
    assert nc.gate_in_metrics(lines) is False
    assert nc.gate_in_metrics(lines[:2] + [GATE_ON]) is True
    assert nc.gate_in_metrics(lines[:2]) is None


def test_written_only_on_137_or_later_with_the_gate_on() -> None:
    assert nc.support((1, 37), True) == (True, "")
    assert nc.support((1, 38), True)[0]
    older = nc.support((1, 31), None)
    assert not older[0] and "Kubernetes 1.31 has no node lifecycle conditions" in older[1]
    assert nc.support((1, 37), False) == (False, "the API server's feature gate NodeLifecycleConditions is off")
    assert "does not name" in nc.support((1, 37), None)[1]
    assert "GET /metrics answered 403" in nc.support((1, 37), None, "GET /metrics answered 403 Forbidden")[1]
    assert not nc.support(None, True)[0]


def node(*conditions: dict) -> dict:
    kubelet = {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    return {"metadata": {"name": "w1"}, "status": {"conditions": [kubelet, *conditions]}}


def test_ours_are_told_by_their_message_and_only_ours_are_removed() -> None:
    mine = nc.condition(nc.MAINTENANCE, nc.REASON_MAINTENANCE, nc.begin_message("kernel", "nm-w1"), "T")
    assert mine == {"type": "MaintenanceInProgress", "status": "True", "reason": "MaintenanceWindow",
                    "message": "nmo.maintenance: in maintenance (NodeMaintenance nm-w1): kernel",
                    "lastTransitionTime": "T", "lastHeartbeatTime": "T"}
    theirs = {"type": "Drained", "status": "True", "reason": "Other", "message": "by someone else"}
    assert nc.ours(node(mine, theirs)) == ["MaintenanceInProgress"] and nc.maintained(node(mine, theirs))
    assert not nc.maintained(node(theirs)) and not nc.maintained(node(dict(mine, status="False")))
    assert nc.ours(node()) == [] and nc.ours({}) == []
    assert nc.patch([mine], ["DrainInProgress"]) == {"status": {"conditions": [
        mine, {"type": "DrainInProgress", "$patch": "delete"}]}}
    assert len(nc.condition(nc.DRAINED, nc.REASON_DRAINED, "x" * 5000, "T")["message"]) == nc.MAX_MESSAGE


def test_the_diff_shows_ours_before_and_after() -> None:
    from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.lifecycle import conditions_diff

    mine = nc.condition(nc.DRAINED, nc.REASON_DRAINED, "done", "T")
    assert conditions_diff(node()) == {} and conditions_diff({}) == {}
    assert conditions_diff(node(), [nc.MAINTENANCE]) == {"node_conditions": ["MaintenanceInProgress"]}
    assert conditions_diff(node(mine)) == {"node_conditions": ["Drained"]}
    assert conditions_diff(node(mine), gone=["Drained"]) == {"node_conditions": []}


@pytest.mark.parametrize("supported,why", [(True, ""), (False, "Kubernetes 1.31 has no node lifecycle conditions"),
                                           (False, "GET /metrics answered 403 Forbidden")])
def test_the_run_lease_note_gives_back_the_verdict(supported, why):
    assert nc.support_of_note(nc.support_note(supported, why)) == (supported, why)


@pytest.mark.parametrize("note", [None, "", "yes", "unsupported: ", 3, "Supported"])
def test_a_note_that_says_nothing_is_read_again(note):
    assert nc.support_of_note(note) is None
