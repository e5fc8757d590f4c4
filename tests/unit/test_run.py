"""Run identity: ids, who owns what, which slot is whose, and the guard's verdicts."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run

NOW = datetime(2026, 12, 1, 5, 0, 0, tzinfo=timezone.utc)


def lease(name: str, holder: str, renewed: datetime = NOW, duration: int = 60,
          run_id: Optional[str] = None) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "medik8s-leases", "resourceVersion": "3"}
    if run_id is not None:
        meta["annotations"] = {run.RUN_ANNOTATION: run_id}
    return {"metadata": meta, "spec": {"holderIdentity": holder, "renewTime": leases.format_time(renewed),
                                       "leaseDurationSeconds": duration}}


class ServerClock:
    """Only the server's time: what the guard asks of a client when it is handed the leases."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def server_now(self) -> datetime:
        return self.now


def test_ids_awx_generated_and_validated():
    assert run.new_id("4711") == "awx-4711"
    made = run.new_id(now=NOW)
    assert made.startswith("20261201-050000-") and run.validate_id(made) == made
    assert run.new_id(now=NOW) != made  # a random part: two runs started in one second differ
    for bad in ("", "Upper", "-lead", "trail-", "a" * 51, "with space", "../x", "x.y"):
        with pytest.raises(InputError, match="run id"):
            run.validate_id(bad)
    assert run.lease_name("abc") == "nmo-run-abc"


def test_owner_state_tells_ours_none_alive_and_gone():
    def nm(owner: Optional[str]) -> Dict[str, Any]:
        return {"metadata": {"name": "m", "annotations": {run.RUN_ANNOTATION: owner} if owner else {}}}

    assert run.owner_state(nm(None), "me", set()) == (run.NONE, "")
    assert run.owner_state(nm("me"), "me", {"me"}) == (run.OURS, "me")
    assert run.owner_state(nm("other"), "me", {"other"}) == (run.ALIVE, "other")
    assert run.owner_state(nm("other"), "me", set()) == (run.GONE, "other")
    assert run.owner_state(nm("other"), "", {"other"}) == (run.ALIVE, "other")  # a call outside any run
    assert run.owner_state(None, "me", set()) == (run.NONE, "")


def test_alive_run_ids_are_the_valid_run_leases_judged_at_the_servers_time():
    seen = [lease("nmo-run-a", "a"), lease("nmo-run-b", "b", NOW - timedelta(seconds=61)),
            lease("node-w1", "node-maintenance"), lease("nmo-run-c", "c", NOW + timedelta(seconds=30))]
    # c's renewTime is in the future of the server: invalid, as medik8s judges it
    assert leases.alive_run_ids(seen, NOW) == {"a"}


def test_a_slot_of_the_same_node_held_for_a_live_run_is_not_ours():
    slot = lease("nmo-maintenance-slot-0", "w1", duration=3600, run_id="run-a")
    plan = leases.plan_slot([slot], "w1", "nmo-maintenance-slot", 1, NOW, "run-b", {"run-a"})
    assert plan.own is None and plan.blocked and plan.blockers == [slot]
    # the same slot once run-a is gone: ours to adopt
    plan = leases.plan_slot([slot], "w1", "nmo-maintenance-slot", 1, NOW, "run-b", set())
    assert plan.own is slot and not plan.blocked
    # a slot without a run (made before runs had ids) stays the node's own, as before
    legacy = lease("nmo-maintenance-slot-0", "w1", duration=3600)
    assert leases.plan_slot([legacy], "w1", "nmo-maintenance-slot", 1, NOW, "run-b", {"run-a"}).own is legacy


def test_with_run_annotates_and_keeps_other_annotations():
    body = {"metadata": {"name": "x", "annotations": {"keep": "1"}}}
    assert leases.with_run(body, "r1")["metadata"]["annotations"] == {"keep": "1", run.RUN_ANNOTATION: "r1"}
    assert leases.with_run({"metadata": {}}, "")["metadata"] == {}


def test_process_start_tells_a_live_process_from_a_gone_one():
    assert run.process_start(os.getpid()) is not None
    assert run.process_start(2 ** 22 + 12345) is None


def test_the_local_anchor_is_the_parent_until_it_changes():
    try:
        run.set_local_anchor(os.getppid())
        assert run.local_anchor_alive()
        run.set_local_anchor(os.getpid())  # not our parent: as if we had been orphaned
        assert not run.local_anchor_alive()
        with pytest.raises(run.RunGone, match="controller process is gone"):
            run.NoGuard().check()
    finally:
        run._local_anchor = None  # pylint: disable=protected-access


def test_guard_reads_the_run_lease_from_a_given_view():
    guard = run.Guard(ServerClock(NOW), "r1")  # type: ignore[arg-type]
    guard.check(lease_list=[lease("nmo-run-r1", "r1")])
    with pytest.raises(run.RunGone, match="gone or expired"):
        guard.check(lease_list=[lease("nmo-run-r1", "r1", NOW - timedelta(seconds=120))])
    with pytest.raises(run.RunGone):
        guard.check(lease_list=[])
    with pytest.raises(run.RunGone):  # taken by another process under the same name
        guard.check(lease_list=[lease("nmo-run-r1", "someone-else")])


def test_guard_refuses_a_maintenance_another_run_adopted():
    guard = run.Guard(ServerClock(NOW), "r1")  # type: ignore[arg-type]
    mine = {"metadata": {"name": "m", "annotations": {run.RUN_ANNOTATION: "r1"}}}
    theirs = {"metadata": {"name": "m", "annotations": {run.RUN_ANNOTATION: "r2"}}}
    guard.check_maintenance(mine)
    guard.check_maintenance(None)
    with pytest.raises(run.RunGone, match="belongs to run r2"):
        guard.check_maintenance(theirs)


def test_the_run_lease_says_whether_its_start_checked_the_crd():
    said = {"metadata": {"annotations": {run.CRD_ANNOTATION: "true"}}}
    assert run.crd_checked(said)
    assert not run.crd_checked({"metadata": {"annotations": {run.MODE_ANNOTATION: "standalone"}}})
    assert not run.crd_checked({"metadata": {}}) and not run.crd_checked(None)
