"""lifecycle's pure parts: options refused before the first request, the steps a failure
carries, and a rollback refusing what it cannot undo before it asks the API server anything."""

from __future__ import annotations

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, RefusedError
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import node_ready as ready
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption, lifecycle


def opts(**change) -> lifecycle.Options:
    return lifecycle.Options(**{"node": "w1", "lease": disruption.Request(node="w1"), **change})


@pytest.mark.parametrize("change, says", [
    ({"mode": "both"}, "mode must be standalone or operator"),
    ({"label_key": "not a key"}, "label_key"),
    ({"name": "Bad_Name"}, "name"),
    ({"run_id": "no spaces allowed"}, "run"),
    ({"node": ""}, "node"),
    ({"end_events": [{"reason": ""}]}, "reason"),
])
def test_bad_options_are_refused_by_name(change, says):
    with pytest.raises(InputError) as exc:
        opts(**change).validate()
    assert says in str(exc.value)


def test_a_failure_carries_the_steps_that_were_done():
    progress = lifecycle.Progress()
    progress.done("maintenance")
    progress.done("lease")
    exc = progress.fail(RefusedError("node w1: no slot"))
    assert exc.details["reached"] == ["maintenance", "lease"]
    progress.done("taints")
    assert exc.details["reached"] == ["maintenance", "lease"], "the error keeps what was done when it happened"


def test_a_rollback_of_unknown_steps_is_refused_before_any_request():
    with pytest.raises(InputError) as exc:
        lifecycle.rollback(None, opts(), ["maintenance", "drain"])  # a request would fail on None
    assert "unknown steps drain" in str(exc.value)


def test_a_rollback_of_nothing_reached_asks_nothing_and_changes_nothing():
    done = lifecycle.rollback(None, opts(), [])
    assert not done["changed"] and done["reached"] == []


def test_the_begin_steps_are_the_ones_nmo_maintenance_offers_for_reached():
    assert lifecycle.BEGIN_STEPS == ("maintenance", "lease", "taints", "cordon")
    assert lifecycle.END_STEPS == ("uncordon", "taints", "lease", "maintenance")


def test_a_long_error_is_cut_to_the_status_limit():
    assert lifecycle.truncate("x" * 10, 10) == "x" * 10
    assert lifecycle.truncate("x" * 11, 10) == "xxxxxxx..."


def test_the_view_of_a_missing_maintenance_is_empty():
    assert lifecycle.view(None) == {}
    nm = {"metadata": {"name": "m"}, "spec": {"nodeName": "w1"}, "status": {"phase": "Failed"}}
    assert lifecycle.view(nm) == {"name": "m", "spec": {"nodeName": "w1"}, "status": {"phase": "Failed"}}


def test_a_node_that_is_not_ready_is_described_for_an_operator():
    node = {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                       "message": "container runtime is down",
                                       "lastHeartbeatTime": "2026-12-01T10:00:00Z"}]}}
    assert ready.not_ready_text("w1", node) == (
        "node w1 is not Ready (Ready=False: reason KubeletNotReady, message container runtime is down, "
        "lastHeartbeatTime 2026-12-01T10:00:00Z)")
    assert "no Ready condition" in ready.not_ready_text("w1", {"status": {}})
    assert ready.not_ready_text("w1", None) == "node w1 was deleted while we waited for it to be Ready"


ALL = list(lifecycle.BEGIN_STEPS)


@pytest.mark.parametrize("progress, nm_run, reached", [
    (Record(run="r1", phase="begin", reached=("maintenance", "lease")), "r1", ["maintenance", "lease"]),
    (Record(run="r1", phase="drain", reached=("maintenance",)), "r1", ALL),  # past its begin: all of them
    (Record(run="r0", phase="work", reached=tuple(ALL)), "r0", []),  # another run's record: nothing of this run
    (None, "r1", ["maintenance"]),  # no record, a NodeMaintenance this run made
    (None, "r0", []),
    (Record(run="r1", phase="gate"), "r0", ALL),
])
def test_the_steps_to_undo_are_those_the_record_of_this_run_says(progress, nm_run, reached):
    nm = {"metadata": {"name": "maintenance-w1", "annotations": {"nmo.maintenance/run": nm_run}}}
    assert lifecycle.reached_of(None, opts(run_id="r1"), nm, progress) == reached


def test_without_a_maintenance_or_a_record_nothing_of_the_run_is_undone():
    assert lifecycle.reached_of(None, opts(run_id="r1"), None, None) == []
