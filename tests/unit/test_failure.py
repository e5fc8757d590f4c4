"""The failure policy per phase, and the failed node's last line."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import failure
from ansible_collections.nmo.maintenance.plugins.module_utils.model.record import Record


@pytest.mark.parametrize("phase", failure.PHASES)
def test_the_phase_is_the_one_the_node_s_record_says_it_reached(phase):
    assert failure.phase_of(Record(run="r1", phase=phase)) == (phase, "")


@pytest.mark.parametrize("progress, said", [
    (None, "the node's NodeMaintenance has no progress record"),
    (Record.parse({"phase": 7}), "its progress record names no known phase (none)"),
    (Record.parse({"phase": "firmware"}), "its progress record names no known phase (firmware)"),
])
def test_without_a_readable_phase_it_is_taken_as_the_work_phase_and_said(progress, said):
    phase, note = failure.phase_of(progress)
    assert phase == "work" and failure.keeps("auto", phase)  # the earliest phase where the machine may be half-done
    assert note == (f"the phase that failed is unknown ({said}): taken as the work phase, "
                    "the earliest where the machine may be half-done")


@pytest.mark.parametrize("phase, kept", [
    ("begin", False), ("before_drain", False), ("drain", False), ("work", True), ("ready", True),
    ("gate", True), ("confirm", True), ("end", False)])
def test_auto_keeps_a_node_whose_work_failed_and_rolls_back_one_that_failed_before(phase, kept):
    assert failure.keeps("auto", phase) is kept
    assert failure.keeps("rollback", phase) is False
    assert failure.keeps("keep", phase) is True


def test_an_unknown_policy_or_phase_is_refused():
    with pytest.raises(InputError, match="policy must be one of auto, rollback, keep"):
        failure.keeps("undo", "work")
    with pytest.raises(InputError, match="phase must be one of"):
        failure.keeps("auto", "reboot")


NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
REPORT = {"node": "w1", "unschedulable": True,
          "maintenance_taints": [{"key": "medik8s.io/drain", "effect": "NoSchedule"}],
          "maintenance": {"name": "maintenance-w1", "phase": "Failed"},
          "leases": [{"name": "node-w1", "renewTime": "2026-12-01T11:59:00.000000Z", "leaseDurationSeconds": 3600},
                     {"name": "nmo-maintenance-slot-0", "slot": True, "renewTime": "2026-12-01T11:00:00.000000Z",
                      "leaseDurationSeconds": 3600},
                     {"name": "someone-elses", "holder": "w1"}]}


def test_the_state_says_cordon_taints_phase_and_how_long_the_leases_are_held():
    assert failure.node_state(REPORT, NOW) == (
        "cordoned, tainted medik8s.io/drain:NoSchedule, NodeMaintenance maintenance-w1 Failed, holds node lease node-w1 "
        "(expires in 3540 s unless renewed), slot nmo-maintenance-slot-0 (expires in 0 s unless renewed)")
    back = {"node": "w1", "unschedulable": False, "maintenance_taints": [], "maintenance": None, "leases": []}
    assert failure.node_state(back, NOW) == "schedulable, no maintenance taint, no NodeMaintenance, no lease held"


def outcome(**change):
    return {"phase": "work", "policy": "auto", "kept": True, "rolled_back": False, "recorded": True,
            "reached": ["maintenance", "lease", "taints", "cordon"], "maintenance": "maintenance-w1",
            "state": "cordoned", **change}


def test_a_kept_node_says_why_where_it_is_and_what_to_run():
    said = failure.message("w1", "Flash: firmware tool exited 3: flash verify error", outcome())
    assert said.startswith("maintenance of node w1 failed (work phase): Flash: firmware tool exited 3")
    assert "kept out of service (policy auto: its work failed, in the work phase)" in said
    assert "Now: cordoned." in said and "recover.yml -e nmo_nodes=w1" in said and "run again to resume" in said
    assert "rolled back" not in said


def test_a_rolled_back_node_says_so_and_nothing_claims_a_rollback_that_did_not_happen():
    back = failure.message("w1", "Drain: timeout", outcome(phase="drain", kept=False, rolled_back=True))
    assert "It was rolled back (policy auto: it failed in the drain phase, before its work began)" in back
    assert "NodeMaintenance maintenance-w1 is kept as Failed" in back
    nothing = failure.message("w1", 'node "w1" not found in cluster', outcome(reached=[], maintenance=None))
    assert "Nothing was written for it" in nothing and "rolled back" not in nothing
    dry = failure.message("w1", "Begin: x", outcome(dry_run=True))
    assert "Check mode: nothing was written" in dry and "rolled back" not in dry


def test_a_record_that_failed_still_says_what_is_known_and_what_to_run():
    known = failure.known_state(["maintenance", "lease", "taints", "cordon"], "maintenance-w1", 3600)
    said = failure.unrecorded_message("w1", "Drain: 403", "API server answered 403 Forbidden", known)
    assert "could not be recorded either (API server answered 403 Forbidden), so nothing was rolled back" in said
    assert "cordoned, tainted medik8s.io/drain:NoSchedule, NodeMaintenance maintenance-w1 not marked Failed" in said
    assert "up to 3600 s" in said and "recover.yml -e nmo_nodes=w1" in said
    assert failure.known_state([], None, 3600) == "nothing was written for it"


def test_a_node_deleted_during_its_maintenance_is_not_said_to_be_back_in_service():
    said = failure.message("w1", "drain of node w1 stopped: the node was deleted", {
        "phase": failure.DRAIN, "policy": "auto", "kept": False, "rolled_back": True, "recorded": True,
        "reached": ["maintenance", "lease", "taints", "cordon"], "maintenance": "maintenance-w1",
        "node_deleted": True, "state": "unknown"})
    assert "deleted during its maintenance" in said
    assert "back in service" not in said
    assert "recover.yml -e nmo_nodes=w1" in said
