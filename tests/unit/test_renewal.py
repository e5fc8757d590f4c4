"""The heartbeat's renewal schedule and the shortest lease it can keep (model/renewal.py),
and the verdict on the leases a run holds for a node (run.held_verdict, run.Guard)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, renewal
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import heartbeat, run

NOW = datetime(2026, 12, 1, 5, 0, 0, tzinfo=timezone.utc)
RUN = "r1"


def lease(name: str, holder: str, age: float = 0, duration: int = 30, run_id: Optional[str] = RUN) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": leases.LEASE_NAMESPACE, "resourceVersion": "3"}
    if run_id is not None:
        meta["annotations"] = {run.RUN_ANNOTATION: run_id}
    return {"metadata": meta, "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                                       "renewTime": leases.format_time(NOW - timedelta(seconds=age))}}


def held(age: float = 0, slot_age: float = 0, duration: int = 30) -> List[Dict[str, Any]]:
    return [lease(run.lease_name(RUN), RUN, 0, 60),
            lease("node-w1", leases.HOLDER, age, duration),
            lease("nmo-maintenance-slot-0", "w1", slot_age, duration)]


# -- the bound -----------------------------------------------------------------------------------
def test_the_shortest_lease_outlives_a_missed_beat():
    """Renewed at the latest with margin - beat left, which must hold a failed beat's retries
    and the clocks' allowance: true from the minimum up, false just below it."""
    assert renewal.MIN_LEASE_SECONDS == 30
    assert renewal.missed_beat_budget() < renewal.MIN_LEASE_SECONDS - renewal.BEAT
    for duration in (30, 31, 45, 59, 60, 61, 600, 3600, 604800):
        assert renewal.keepable(duration), duration
    for duration in (1, 5, 10, 20, 29):
        assert not renewal.keepable(duration), duration


def test_the_minimum_is_renewed_every_third_of_it():
    """A 30 s lease is due at every beat (10 s, a third of it); one renewed a beat ago is due."""
    assert heartbeat.due(lease("l", "h", 0, 30), NOW)
    assert heartbeat.due(lease("l", "h", renewal.BEAT, 30), NOW)
    # a long one only once half of it is gone
    assert not heartbeat.due(lease("l", "h", 1700, 3600), NOW)
    assert heartbeat.due(lease("l", "h", 1800, 3600), NOW)


@pytest.mark.parametrize("duration", [30, 45, 60, 3600])
def test_a_lease_renewed_on_schedule_is_never_late(duration):
    """Age at the latest renewal (duration - margin + beat): not late; a little later, late."""
    last = duration - min(renewal.margin(duration), duration) + renewal.BEAT
    on_time = lease("l", "h", last, duration)
    assert renewal.late_by(on_time, leases.expiry(on_time), NOW) == 0
    overdue = lease("l", "h", last + 7, duration)
    assert renewal.late_by(overdue, leases.expiry(overdue), NOW) == pytest.approx(7)


@pytest.mark.parametrize("duration", [0, 1, 5, 29])
def test_a_lease_below_the_minimum_is_refused_with_the_option_named(duration):
    with pytest.raises(InputError) as caught:
        leases.validate(1, duration, "p")
    assert caught.value.message.startswith(f"duration: {duration} is shorter than the 30 s")
    assert "renews it every 10 s" in caught.value.message


def test_the_minimum_itself_is_accepted():
    leases.validate(1, renewal.MIN_LEASE_SECONDS, "p")


# -- the verdict on the node's leases --------------------------------------------------------------
def test_leases_held_and_fresh_say_nothing():
    assert run.held_verdict(held(), "w1", RUN, run.HELD_ALL, NOW) == ([], [])
    assert run.held_verdict(held(age=100), "w1", RUN, run.HELD_NONE, NOW) == ([], [])


def test_a_lapsed_node_lease_stops_the_node_with_when_and_how_late():
    errors, _warnings = run.held_verdict(held(age=35), "w1", RUN, run.HELD_ALL, NOW)
    assert errors == ["the node lease of w1 (medik8s-leases/node-w1) lapsed at 2026-12-01T04:59:55Z (renewal late "
                      "by 25 s): another run may hold the node; stopped"]


def test_a_late_renewal_is_a_warning():
    errors, warnings = run.held_verdict(held(age=18), "w1", RUN, run.HELD_ALL, NOW)
    assert errors == []
    assert warnings and warnings[0].startswith("the node lease of w1 (medik8s-leases/node-w1) was renewed late (by 8 s")


def test_a_slot_taken_by_another_node_or_run_is_gone():
    seen = held()[:2] + [lease("nmo-maintenance-slot-0", "w2", 0, 30, run_id="r2")]
    errors, _warnings = run.held_verdict(seen, "w1", RUN, run.HELD_ALL, NOW)
    assert len(errors) == 1 and errors[0].startswith("the maintenance slot of w1 is gone")


def test_a_node_lease_taken_by_another_holder():
    seen = [held()[0], lease("node-w1", "NodeHealthCheck-x", 0, 3600, run_id=None), held()[2]]
    errors, _warnings = run.held_verdict(seen, "w1", RUN, run.HELD_ALL, NOW)
    assert errors == ["the node lease of w1 (medik8s-leases/node-w1) is held by NodeHealthCheck-x now, not by this "
                      "run: another run may hold the node; stopped"]


def test_operator_mode_checks_the_slot_only():
    seen = [held()[0], held()[2]]  # NMO's node lease is not ours to check
    assert run.held_verdict(seen, "w1", RUN, run.HELD_SLOT, NOW) == ([], [])
    lapsed = [held()[0], lease("nmo-maintenance-slot-0", "w1", 31, 30)]
    errors, _warnings = run.held_verdict(lapsed, "w1", RUN, run.HELD_SLOT, NOW)
    assert errors and "slot of w1 (medik8s-leases/nmo-maintenance-slot-0) lapsed" in errors[0]


class Lister:
    """The two requests the guard makes: a list of the namespace, or the run lease read."""

    def __init__(self, items: List[Dict[str, Any]]) -> None:
        self.items = items
        self.requests: List[str] = []

    def server_now(self) -> datetime:
        return NOW

    def get(self, path: str, query: Any = None) -> Dict[str, Any]:
        self.requests.append(path)
        return {"items": self.items}

    def get_or_none(self, path: str) -> Optional[Dict[str, Any]]:
        self.requests.append(path)
        return leases.named(self.items, path.rsplit("/", 1)[-1])


def test_the_guard_checks_the_nodes_leases_in_its_one_look():
    client = Lister(held(age=18))
    guard = run.Guard(client, RUN, node="w1", held=run.HELD_ALL)  # type: ignore[arg-type]
    guard.check()
    assert client.requests == [lease_store.leases_path(leases.LEASE_NAMESPACE)]  # one list, no read besides
    assert len(guard.warnings) == 1
    guard.check(force=True)
    assert len(guard.warnings) == 1, "each late renewal said once"
    client.items = held(age=40)
    with pytest.raises(run.LeaseLost) as caught:
        guard.check(force=True)
    assert "the node lease of w1" in caught.value.message and caught.value.message.endswith("stopped")


def test_a_guard_without_held_leases_reads_the_run_lease_only():
    client = Lister(held(age=100))
    run.Guard(client, RUN).check()  # type: ignore[arg-type]
    assert client.requests == [lease_store.leases_path(leases.LEASE_NAMESPACE, run.lease_name(RUN))]
