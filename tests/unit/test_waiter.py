"""The waiter's logic on a clock the test drives: deadlines, ticks, backoff, the watch view."""

from __future__ import annotations

from typing import List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.api import waiter
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError, WaitTimeout


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Quiet:
    """A watcher on which nothing happens: each wait passes ``timeout`` seconds of the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.waits: List[float] = []

    def drain_events(self, timeout: float) -> list:
        self.waits.append(round(timeout, 3))
        self.clock.now += timeout
        return []


def test_wait_until_returns_the_first_value_without_waiting():
    clock = Clock()
    quiet = Quiet(clock)
    assert waiter.wait_until(quiet, lambda: "ready", 10, lambda: "x", clock=clock) == "ready"
    assert quiet.waits == []


def test_wait_until_times_out_at_the_deadline_and_says_what_it_awaited():
    clock = Clock()
    quiet = Quiet(clock)
    with pytest.raises(WaitTimeout) as exc:
        waiter.wait_until(quiet, lambda: None, 2.5, lambda: "node w1 to be Ready", clock=clock)
    assert str(exc.value) == "timed out after 2.5 s: node w1 to be Ready"
    assert clock.now == pytest.approx(102.5), "waited past the deadline"
    assert quiet.waits == [1.0, 1.0, 0.5], "the last wait is cut to the deadline"


def test_wait_until_ticks_at_its_cadence_between_events():
    clock = Clock()
    quiet = Quiet(clock)
    ticks: List[float] = []
    seen = {"n": 0}

    def check() -> Optional[bool]:
        seen["n"] += 1
        return True if len(ticks) == 3 else None

    waiter.wait_until(quiet, check, 60, lambda: "x", tick=lambda: ticks.append(clock.now), tick_every=2.0,
                      clock=clock)
    assert ticks == [102.0, 104.0, 106.0]


def test_wait_until_checks_again_after_every_batch_of_events():
    clock = Clock()
    answers = iter([None, None, "done"])

    class Busy(Quiet):
        def drain_events(self, timeout: float) -> list:
            self.waits.append(timeout)
            return [("MODIFIED", {})]  # events at once: no time passes

    busy = Busy(clock)
    assert waiter.wait_until(busy, lambda: next(answers), 5, lambda: "x", clock=clock) == "done"
    assert len(busy.waits) == 2 and clock.now == 100.0


def test_poll_until_backs_off_and_stops_at_the_deadline():
    clock = Clock()
    sleeps: List[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 3))
        clock.now += seconds

    with pytest.raises(WaitTimeout) as exc:
        waiter.poll_until(lambda: None, 1.0, lambda: "the API server to serve nodemaintenances",
                          clock=clock, sleep=sleep)
    assert sleeps == [0.05, 0.1, 0.2, 0.4, 0.25], "doubling from 0.05 s, the last one cut to the deadline"
    assert str(exc.value) == "timed out after 1 s: the API server to serve nodemaintenances"


def test_poll_until_returns_once_the_condition_holds():
    clock = Clock()
    answers = iter([None, None, 7])
    assert waiter.poll_until(lambda: next(answers), 5, lambda: "x", clock=clock,
                             sleep=lambda s: setattr(clock, "now", clock.now + s)) == 7


def pod(name: str, rv: str = "1") -> dict:
    return {"metadata": {"namespace": "ns", "name": name, "resourceVersion": rv}}


def test_the_watch_view_applies_events_and_a_resync():
    listed = {"metadata": {"resourceVersion": "5"}, "items": [pod("a"), pod("b")]}
    watcher = waiter.Watcher(None, "/api/v1/pods", initial=listed)
    assert set(watcher.objects) == {"ns/a", "ns/b"} and watcher.resource_version == "5"
    watcher._put(("MODIFIED", pod("a", "6")))
    watcher._put(("DELETED", pod("b")))
    watcher._put(("ADDED", pod("c")))
    assert len(watcher.drain_events(0)) == 3
    assert set(watcher.objects) == {"ns/a", "ns/c"} and watcher.objects["ns/a"]["metadata"]["resourceVersion"] == "6"
    watcher._put(("RESYNC", {"metadata": {"resourceVersion": "9"}, "items": [pod("d")]}))
    watcher.drain_events(0)
    assert set(watcher.objects) == {"ns/d"} and watcher.resource_version == "9"


def test_a_final_watch_error_reaches_the_caller():
    watcher = waiter.Watcher(None, "/api/v1/pods", initial={"metadata": {}, "items": []})
    forbidden = ApiError(403, "Forbidden", "pods is forbidden", "WATCH", "/api/v1/pods", {})
    watcher._put(("FAILED", {"error": forbidden}))
    with pytest.raises(ApiError) as exc:
        watcher.drain_events(0)
    assert exc.value.status == 403


def test_a_multi_watcher_counts_only_batches_that_brought_events():
    one = waiter.Watcher(None, "/a", initial={"metadata": {}, "items": []})
    two = waiter.Watcher(None, "/b", initial={"metadata": {}, "items": []})
    multi = waiter.MultiWatcher(one, two)
    two._put(("ADDED", pod("x")))
    assert len(multi.drain_events(0)) == 1 and multi.changes == 1 and "ns/x" in two.objects
    assert multi.drain_events(0) == [] and multi.changes == 1


class OneList:
    """A collection listed once: its items and resourceVersion; any other request fails the test."""

    def __init__(self) -> None:
        self.gets = 0

    def get(self, path, query=None):
        self.gets += 1
        return {"kind": "LeaseList", "apiVersion": "coordination.k8s.io/v1", "metadata": {"resourceVersion": "41"},
                "items": [{"metadata": {"namespace": "ns", "name": "a"}}]}


def test_a_list_as_answered_starts_a_watcher_and_a_copy_of_it_does_not():
    client = OneList()
    found = waiter.listed(client, "/leases")
    assert found == [{"kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "metadata": {"namespace": "ns", "name": "a"}}]
    watcher = waiter.Watcher(client, "/leases", initial=waiter.start_from(found))
    assert watcher.resource_version == "41" and list(watcher.objects) == ["ns/a"]
    watcher.objects["ns/a"]["metadata"]["name"] = "changed by the watch"
    assert found[0]["metadata"]["name"] == "a", "the watcher's view is its own copy"
    assert waiter.start_from(list(found)) is None and waiter.start_from(None) is None
    assert waiter.start_from(waiter.Listed([{}])) is None, "a list without a version is listed again"
    assert client.gets == 1
