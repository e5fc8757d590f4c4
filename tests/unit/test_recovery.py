"""What recover.yml does with a node (model/recovery.py), over the cases of issue 32, item 5:
every maintenance no live run holds is ended without names; named, never a cordon or taint
that is not ours; a quarantine is lifted only by name."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, recovery
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import (
    CORDONED_BEFORE,
    MAINTAINED_BY,
    QUARANTINED,
)

MARKS = {MAINTAINED_BY: "r-gone"}


def report(nm: Optional[str] = None, run: Optional[Dict[str, Any]] = None, annotations: Optional[Dict[str, str]] = None,
           **extra: Any) -> Dict[str, Any]:
    return {"node": "w1", "node_deleted": False, "unschedulable": False, "labels": {},
            "maintenance": {"name": "maintenance-w1", "phase": nm} if nm else None,
            "run": run if nm else None, "annotations": annotations or {}, "leases": [], **extra}


GONE = {"id": "r-gone", "alive": False}
ALIVE = {"id": "r-live", "alive": True}
NO_RUN = {"id": "", "alive": False}
SLOT = {"name": leases.slot_name(leases.SLOT_PREFIX, 0), "holder": "w1", "slot": True}
QUARANTINE = {"labels": {QUARANTINED: "true"}, "annotations": {**MARKS, QUARANTINED: "drain: PDB web allows 0"}}


@pytest.mark.parametrize("case,named,action", [
    # the three of the issue: a Failed one cordoned and tainted, two Pending ones that never cordoned
    (report("Failed", GONE, MARKS), False, recovery.END),
    (report("Pending", GONE), False, recovery.RELEASE),
    (report("Running", GONE, MARKS), False, recovery.END),
    (report("Running", ALIVE, MARKS), False, recovery.LEAVE),
    (report("Running", ALIVE, MARKS), True, recovery.END),  # named: the end itself refuses, and says so
    (report("Pending", NO_RUN), False, recovery.LEAVE),
    (report("Pending", NO_RUN, MARKS), True, recovery.END),
    (report(annotations=MARKS), False, recovery.END),
    (report(leases=[SLOT]), False, recovery.RELEASE),
    (report(leases=[SLOT], unschedulable=True), True, recovery.RELEASE),
    (report(unschedulable=True), False, None),
    (report(unschedulable=True), True, recovery.LEAVE),
    (report(**QUARANTINE, unschedulable=True), False, recovery.LEAVE),
    (report(**QUARANTINE, unschedulable=True), True, recovery.LIFT),
    (report("Running", GONE, node_deleted=True), False, recovery.END),
    (report("Running", ALIVE, node_deleted=True), False, recovery.LEAVE),
])
def test_the_rule(case, named, action):
    choice = recovery.choose(case, named)
    assert (choice.action if choice else None) == action, choice


def test_a_node_with_nothing_of_ours_is_said_to_be_left_as_it_is():
    # an administrator's cordon, kept by a maintenance that has since ended: its marks are gone
    choice = recovery.choose(report(unschedulable=True), named=True)
    assert choice.why == "w1: no maintenance of nmo.maintenance, left as it is (its cordon is not ours)"
    assert recovery.choose(report(), named=True).why == "w1: no maintenance of nmo.maintenance, left as it is"


def test_each_node_left_says_why_and_how_to_end_it():
    live = recovery.choose(report("Running", ALIVE, MARKS), named=False)
    assert live.why == ("w1: in maintenance by run r-live, which is alive (its run lease is being renewed): "
                        "left to that run")
    hand = recovery.choose(report("Pending", NO_RUN), named=False)
    assert "NodeMaintenance maintenance-w1 (Pending) names no run" in hand.why
    assert hand.why.endswith("playbooks/recover.yml -e nmo_nodes=w1 ends it")
    kept = recovery.choose(report(**QUARANTINE), named=False)
    assert kept.why == ("w1: quarantined (drain: PDB web allows 0): left out of service; "
                        "playbooks/recover.yml -e nmo_nodes=w1 lifts the quarantine")


def test_the_line_of_a_node_acted_on():
    failed = recovery.choose(report("Failed", GONE, MARKS), named=False)
    assert recovery.said(failed, {}) == ("w1: maintenance ended (its NodeMaintenance maintenance-w1 (Failed) is of "
                                         "run r-gone, which is gone)")
    pending = recovery.choose(report("Pending", GONE), named=False)
    assert recovery.said(pending, {}, dry_run=True).startswith("w1: NodeMaintenance and leases would be released")
    lift = recovery.choose(report(**QUARANTINE), named=True)
    assert recovery.said(lift, {}) == "w1: quarantine lifted (drain: PDB web allows 0); uncordoned"
    before = "node w1 was cordoned before the maintenance began: left cordoned"
    assert recovery.said(lift, {"left_as_found": [before]}).endswith(f"; {before}")


def test_a_quarantine_is_told_by_its_label_or_its_annotation():
    assert recovery.quarantine(report(labels={QUARANTINED: "true"})) == "no blocker recorded"
    assert recovery.quarantine(report(annotations={QUARANTINED: "x"})) == "x"
    assert recovery.quarantine(report(annotations={CORDONED_BEFORE: "true"})) is None
