"""What a node waiting for a place tells, and how often (workflows/disruption.py Reporter, design §4.3).

A new kind of wait is told at once (what the run's other nodes read of it: a wait for a place
or not); the same kind with other holders at most every REPORT_EVERY seconds, the newest when
the wait's tick finds it due; an acquired place clears only what this wait wrote.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.disruption import (
    BLOCKED_PREFIX,
    REPORT_EVERY,
    Blocked,
    Reporter,
)

SLOTS = f"{BLOCKED_PREFIX} 2 of 2 maintenance slot(s) are held"
LEASE = f"{disruption.LEASE_HELD} x"


def blocked(message: str, kind: str = "slot") -> Blocked:
    return Blocked(kind, message, "BlockedByNodeHealthCheck", message, [])


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def told(monkeypatch) -> List[Dict[str, Any]]:
    """The status writes and events, in order, as the API server would have been asked."""
    asked: List[Dict[str, Any]] = []

    def update_status(_client, nm, wanted):
        asked.append({"status": dict(wanted)})
        return {**nm, "status": {**(nm.get("status") or {}), **wanted}}, True

    monkeypatch.setattr(disruption.maintenance, "update_status", update_status)
    monkeypatch.setattr(disruption.EventRecorder, "record",
                        lambda self, _obj, reason, message=None, _type=None: asked.append({"event": message}))
    return asked


def reporter(clock: Clock) -> Reporter:
    return Reporter(object(), {"metadata": {"name": "nm"}, "status": {}}, {}, clock=clock)


def test_the_same_wait_with_other_holders_is_told_at_most_every_few_seconds(told):
    clock = Clock()
    r = reporter(clock)
    r.blocked(blocked(SLOTS + ": a, b."))
    assert [t.get("status", {}).get("lastError") for t in told if "status" in t] == [SLOTS + ": a, b."]
    for holders in ("a, c.", "c, d.", "d, e."):  # holders come and go within the interval
        clock.now += 1
        r.blocked(blocked(f"{SLOTS}: {holders}", kind="budget"))
        r.due()
    assert len(told) == 2, told  # one write and one event, no more
    clock.now += REPORT_EVERY
    r.due()  # the newest, once due
    assert told[-1] == {"status": {"phase": "Pending", "lastError": SLOTS + ": d, e."}}
    assert len(told) == 4
    r.due()
    assert len(told) == 4, "told once"


def test_a_new_kind_of_wait_is_told_at_once(told):
    clock = Clock()
    r = reporter(clock)
    r.blocked(blocked(SLOTS + ": a."))
    clock.now += 1
    r.blocked(blocked(LEASE, kind="lease"))  # not a wait for a place: the run's other nodes read it so
    assert told[-1]["status"]["lastError"] == LEASE
    clock.now += 1
    r.blocked(blocked(SLOTS + ": b."))  # and back
    assert told[-1]["status"]["lastError"] == SLOTS + ": b."
    assert len(told) == 6


def held_back(clock: Clock) -> Reporter:
    """A wait told with holder a, then with holder b a second later: held back, not written."""
    r = reporter(clock)
    r.blocked(blocked(SLOTS + ": a."))
    clock.now += 1
    r.blocked(blocked(SLOTS + ": b."))
    return r


def test_the_same_message_again_is_not_told_and_drops_a_held_back_one(told):
    clock = Clock()
    r = held_back(clock)
    r.blocked(blocked(SLOTS + ": a."))  # as told: nothing new to tell
    clock.now += REPORT_EVERY
    r.due()
    assert len(told) == 2


def test_acquiring_clears_only_what_this_wait_wrote(told):
    r = held_back(Clock())
    none = disruption.leases.Outcome(disruption.leases.HELD, "", None, None)
    r.acquired(disruption.Acquired(none, none, None))
    assert told[-1] == {"status": {"lastError": ""}}
