"""The one rule that says what a run does with a node (model/plan.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import plan

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)
ME = "20261201-120000-abcdef"


def report(in_flight=False, owner="", alive=False, campaign=None, phase="Running"):
    return {"node": "w1", "maintenance": {"name": "maintenance-w1", "phase": phase} if in_flight else None,
            "run": {"id": owner, "alive": alive} if in_flight else None,
            "annotations": {plan.CAMPAIGN_MARK: campaign} if campaign else {}}


def window(minutes_from_now, given="2026-12-01T13:00:00+01:00"):
    return plan.Window(NOW + timedelta(minutes=minutes_from_now), given)


@pytest.mark.parametrize("node, expected, resume", [
    (report(), plan.FULL, False),
    (report(in_flight=True, owner="gone-run"), plan.FULL, True),  # its run is gone: resumed
    (report(in_flight=True, owner="gone-run", campaign="c1"), plan.FINISH, True),
    # a gone run's Pending, holding nothing: begun with the new nodes (adopted), not first (rollout.py)
    (report(in_flight=True, owner="gone-run", phase="Pending"), plan.FULL, False),
    (report(campaign="c1"), plan.SKIP_DONE, False),
    (report(in_flight=True, owner="other", alive=True), plan.SKIP_OWNED, False),
    ({}, plan.FULL, False),  # a node no report was found for: the begin says what is wrong
])
def test_each_plan(node, expected, resume):
    decided = plan.plan_node("w1", node, ME, "c1", None, NOW)
    assert (decided.plan, decided.resume) == (expected, resume)
    assert decided.outcome


def test_a_closed_window_begins_no_node_but_finishes_one_in_flight():
    closed = window(-30)
    over = plan.plan_node("w1", report(), ME, "", closed, NOW)
    assert over.plan == plan.SKIP_WINDOW
    assert over.say == ("the window ended at 2026-12-01T11:30:00Z (30 min ago, node_maintenance_window_end "
                        "2026-12-01T13:00:00+01:00): w1 not begun")
    assert over.outcome == "skipped (window ended 2026-12-01T13:00:00+01:00)"
    assert plan.plan_node("w1", report(in_flight=True, owner="gone"), ME, "", closed, NOW).plan == plan.FULL


def test_the_window_edge_its_end_is_already_closed():
    assert plan.plan_node("w1", report(), ME, "", window(0), NOW).plan == plan.SKIP_WINDOW
    assert plan.plan_node("w1", report(), ME, "", window(1 / 60000), NOW).plan == plan.FULL
    # minutes are whole minutes gone, not rounded up: 89 s ago is 1 min ago
    assert "(1 min ago," in plan.plan_node("w1", report(), ME, "", window(-89 / 60), NOW).say


def test_done_comes_before_the_window_and_needs_a_campaign():
    assert plan.plan_node("w1", report(campaign="c1"), ME, "c1", window(-5), NOW).plan == plan.SKIP_DONE
    assert plan.plan_node("w1", report(campaign="c1"), ME, "", None, NOW).plan == plan.FULL
    assert plan.plan_node("w1", report(campaign="c2"), ME, "c1", None, NOW).plan == plan.FULL


@pytest.mark.parametrize("owner, alive, expected", [
    ("other", True, plan.SKIP_OWNED),  # another live run: left to it
    ("other", False, plan.FULL),  # a gone run: resumed
    (ME, True, plan.FULL),  # this run's own (a run id given again): ours to go on with
    ("", False, plan.FULL),  # names no run (made by hand): adopted
])
def test_the_owner(owner, alive, expected):
    decided = plan.plan_node("w1", report(in_flight=True, owner=owner, alive=alive), ME, "", None, NOW)
    assert decided.plan == expected
    assert decided.owner == (owner if expected == plan.SKIP_OWNED else "")


def test_owned_is_said_the_same_way_by_the_look_and_the_begin():
    looked = plan.plan_node("w1", report(in_flight=True, owner="other", alive=True), ME, "", None, NOW)
    assert looked == plan.owned_by("w1", "other")
    assert looked.say == ("w1 is in maintenance by run other, which is alive (its run lease is being renewed): "
                          "left to that run, not adopted.")
    assert looked.outcome == "skipped (in maintenance by run other, alive)"
    foreign = plan.owned_by("w1", "")
    assert "did not make" in foreign.say and foreign.outcome == "skipped (a NodeMaintenance made by someone else, left to NMO)"


def test_as_dict_is_what_the_module_returns():
    assert set(plan.plan_node("w1", report(), ME).as_dict()) == {"node", "plan", "owner", "say", "outcome", "resume"}
