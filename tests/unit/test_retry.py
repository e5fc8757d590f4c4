"""Retries of transient API failures (retry.py, client.py), the eviction-answer classifier,
events that must not fail a maintenance, and watches that survive a restarting server.

The client runs on a tiny fake transport (a urllib3-like pool that plays a script of
answers), so these tests need no cluster and no sleeping beyond milliseconds."""

from __future__ import annotations

import json
import threading
from typing import Any, Dict, List, Optional

import pytest
import urllib3

from ansible_collections.nmo.maintenance.plugins.module_utils.api import retry, waiter
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.api.kubeconfig import Configuration
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import (
    ApiError,
    Conflict,
    DisruptionBudgetRefusal,
    TooManyRequests,
    api_error,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking as dt
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import events

PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_BODY = {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": PDB_MESSAGE,
            "details": {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget db needs 2 healthy pods and has 2 currently"}]}}
APF_BODY = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
            "message": "Too many requests, please try again later.", "details": {"retryAfterSeconds": 1}}
STORAGE_BODY = {"kind": "Status", "code": 429, "reason": "TooManyRequests",
                "message": "storage is (re)initializing"}
SEVERAL_PDBS = ("This pod has more than one PodDisruptionBudget, which the eviction subresource "
                "does not support.")


def error_of(body: Dict[str, Any]) -> ApiError:
    return api_error(body["code"], body["reason"], body["message"], "POST", "/x", body)


# -- the eviction answer ------------------------------------------------------------------------
class TestEvictionAnswer:
    def test_a_budgets_refusal_is_told_by_its_cause(self) -> None:
        refused = error_of(PDB_BODY)
        assert isinstance(refused, DisruptionBudgetRefusal)
        outcome = dt.outcome_of(refused, "ns/p")
        assert outcome.kind == dt.REFUSED and outcome.message.startswith(PDB_MESSAGE)

    def test_a_refusal_without_causes_is_told_by_its_message(self) -> None:
        assert isinstance(api_error(429, "TooManyRequests", PDB_MESSAGE), DisruptionBudgetRefusal)

    @pytest.mark.parametrize("body", [APF_BODY, STORAGE_BODY], ids=["apf", "storage"])
    def test_throttling_is_no_refusal_and_blames_no_budget(self, body: Dict[str, Any]) -> None:
        throttled = error_of(body)
        assert isinstance(throttled, TooManyRequests) and not isinstance(throttled, DisruptionBudgetRefusal)
        outcome = dt.outcome_of(throttled, "ns/p")
        assert outcome.kind == dt.RETRY
        assert "not a PodDisruptionBudget" in outcome.message and "disruption budget" not in outcome.message

    def test_only_a_429_is_a_refusal(self) -> None:
        assert not isinstance(api_error(500, "InternalError", PDB_MESSAGE), DisruptionBudgetRefusal)


# -- what is transient ---------------------------------------------------------------------------
@pytest.mark.parametrize("error", [
    api_error(0, "ConnectionError", "cannot reach https://127.0.0.1:1: connection refused"),
    error_of(APF_BODY),
    error_of(STORAGE_BODY),
    api_error(503, "ServiceUnavailable", "the server is currently unable to handle the request"),
    api_error(502, "BadGateway", ""),
    api_error(504, "Timeout", "Too large resource version"),
    api_error(500, "InternalError", "etcdserver: request timed out"),
    api_error(500, "InternalError", "rpc error: code = Unavailable desc = connection refused"),
], ids=["connection", "apf", "storage", "503", "502", "504", "500-etcd", "500-unavailable"])
def test_transient(error: ApiError) -> None:
    assert retry.transient(error)


@pytest.mark.parametrize("error", [
    error_of(PDB_BODY),
    api_error(500, "InternalError", SEVERAL_PDBS),
    api_error(500, "InternalError", "some bug in a webhook's answer"),
    api_error(400, "BadRequest", "bad"),
    api_error(403, "Forbidden", "no"),
    api_error(404, "NotFound", "gone"),
    api_error(409, "AlreadyExists", "exists"),
    api_error(422, "Invalid", "test failed"),
    ValueError("not an API answer"),
], ids=["pdb", "several-pdbs", "500-other", "400", "403", "404", "409", "422", "not-api"])
def test_final(error: BaseException) -> None:
    assert not retry.transient(error)


def test_a_500_with_retry_after_is_transient() -> None:
    error = api_error(500, "InternalError", "some bug")
    error.retry_after = 1.0
    assert retry.transient(error)


# -- the backoff -----------------------------------------------------------------------------------
class TestDelay:
    policy = retry.RetryPolicy(budget=60, first=0.2, cap=4.0, jitter=0.5)

    def test_doubles_from_first_up_to_the_cap(self) -> None:
        longest = [self.policy.delay(n, rand=lambda: 0.0) for n in range(1, 9)]
        assert longest == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 4.0, 4.0, 4.0])

    def test_jitter_shortens_by_at_most_half(self) -> None:
        assert self.policy.delay(3, rand=lambda: 1.0) == pytest.approx(0.4)
        assert self.policy.delay(30, rand=lambda: 0.999) >= 2.0

    def test_retry_after_is_a_floor_and_spread_above_it(self) -> None:
        assert self.policy.delay(1, retry_after=2.0, rand=lambda: 0.0) == pytest.approx(2.0)
        assert self.policy.delay(1, retry_after=2.0, rand=lambda: 1.0) == pytest.approx(3.0)
        assert self.policy.delay(7, retry_after=1.0, rand=lambda: 0.0) == pytest.approx(4.0)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: List[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def script(*answers: Any) -> Any:
    """An attempt function answering in turn: an exception is raised, anything else returned."""
    queue = list(answers)
    calls: List[int] = []

    def attempt() -> Any:
        calls.append(1)
        answer = queue.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer
    attempt.calls = calls  # type: ignore[attr-defined]
    return attempt


DEFAULT = retry.RetryPolicy()


def run(attempt: Any, policy: retry.RetryPolicy = DEFAULT, deadline: Optional[float] = None,
        clock: Optional[FakeClock] = None) -> Any:
    clock = clock or FakeClock()
    return retry.call(attempt, policy, deadline, clock.clock, clock.sleep, rand=lambda: 0.0)


class TestCall:
    def test_transient_failures_are_asked_again_until_an_answer(self) -> None:
        clock = FakeClock()
        attempt = script(api_error(0, "ConnectionError", "refused"), error_of(STORAGE_BODY), {"ok": 1})
        assert run(attempt, clock=clock) == {"ok": 1}
        assert clock.slept == pytest.approx([0.2, 0.4])

    def test_success_costs_one_request(self) -> None:
        attempt = script({"ok": 1})
        run(attempt)
        assert len(attempt.calls) == 1

    def test_final_answers_are_not_retried(self) -> None:
        for error in (error_of(PDB_BODY), api_error(500, "InternalError", SEVERAL_PDBS), api_error(404, "NotFound", "")):
            attempt = script(error, {"ok": 1})
            with pytest.raises(type(error)):
                run(attempt)
            assert len(attempt.calls) == 1

    def test_retry_after_is_honoured(self) -> None:
        clock = FakeClock()
        throttled = error_of(APF_BODY)
        throttled.retry_after = 3.0
        run(script(throttled, {"ok": 1}), clock=clock)
        assert clock.slept == [3.0]

    def test_the_budget_bounds_the_retries_and_the_last_error_says_how_many(self) -> None:
        clock = FakeClock()
        down = [api_error(503, "ServiceUnavailable", "down") for _n in range(100)]
        with pytest.raises(ApiError) as failed:
            run(script(*down), retry.RetryPolicy(budget=10), clock=clock)
        assert clock.now - 100.0 <= 10.0
        assert sum(clock.slept) > 6.0, "it gave up long before its budget"
        assert failed.value.attempts == len(clock.slept) + 1

    def test_a_callers_deadline_is_earlier_than_the_budget(self) -> None:
        clock = FakeClock()
        with pytest.raises(ApiError):
            run(script(*[api_error(0, "ConnectionError", "refused") for _n in range(100)]), deadline=101.0, clock=clock)
        assert clock.now <= 101.0

    def test_a_huge_retry_after_gives_up_instead_of_stalling(self) -> None:
        clock = FakeClock()
        throttled = error_of(APF_BODY)
        throttled.retry_after = 3600.0
        with pytest.raises(TooManyRequests):
            run(script(throttled, {"ok": 1}), clock=clock)
        assert clock.slept == []


class TestStarting:
    """A 403 right after the server was unreachable: its authorizer may not be ready yet."""

    def test_a_403_after_an_outage_is_asked_again(self) -> None:
        outages = retry.Outages()
        attempt = script(api_error(0, "ConnectionError", "refused"), api_error(403, "Forbidden", "no"), {"ok": 1})
        assert retry.call(attempt, DEFAULT, None, FakeClock().clock, FakeClock().sleep, lambda: 0.0, outages) == {"ok": 1}

    def test_a_403_long_after_an_outage_is_final(self) -> None:
        clock, outages = FakeClock(), retry.Outages(window=30)
        outages.note(api_error(503, "ServiceUnavailable", ""), clock.now - 31)
        attempt = script(api_error(403, "Forbidden", "no"), {"ok": 1})
        with pytest.raises(ApiError):
            retry.call(attempt, DEFAULT, None, clock.clock, clock.sleep, lambda: 0.0, outages)
        assert len(attempt.calls) == 1

    def test_only_unreachable_answers_count_as_an_outage(self) -> None:
        outages = retry.Outages()
        outages.note(error_of(APF_BODY), 100.0)
        outages.note(api_error(404, "NotFound", ""), 100.0)
        assert not outages.recent(100.0)
        outages.note(api_error(0, "ConnectionError", "reset"), 100.0)
        assert outages.recent(129.0) and not outages.recent(130.0)


# -- the client on a fake transport ------------------------------------------------------------------
class FakeResponse:
    def __init__(self, status: int, body: Any = None, headers: Optional[Dict[str, str]] = None,
                 lines: Optional[List[Dict[str, Any]]] = None) -> None:
        self.status = status
        self.data = json.dumps(body).encode() if body is not None else b""
        self.headers = headers or {}
        self.reason = ""
        self.lines = lines or []

    def stream(self, _size: int, decode_content: bool = True) -> Any:
        for line in self.lines:
            yield json.dumps(line).encode() + b"\n"

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        pass


class FakePool:
    """Plays a script of answers: a FakeResponse, or an exception to raise (a reset)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: List[str] = []
        self.lock = threading.Lock()

    def request(self, method: str, url: str, **_kwargs: Any) -> FakeResponse:
        with self.lock:
            self.sent.append(f"{method} {url}")
            answer = self.answers.pop(0) if self.answers else FakeResponse(503, {"message": "script ended"})
        if isinstance(answer, BaseException):
            raise answer  # pylint: disable=raising-non-exception  # an exception instance of the script
        return answer


def fake_client(*answers: Any) -> Client:
    client = Client(Configuration())
    client.pool = FakePool(*answers)
    client.retry = retry.RetryPolicy(budget=5, first=0.001, cap=0.002)
    return client


RESET = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))


class TestClient:
    def test_throttling_is_retried_and_counted(self) -> None:
        client = fake_client(FakeResponse(429, APF_BODY, {"Retry-After": "0"}), FakeResponse(200, {"items": []}))
        assert client.get("/api/v1/pods") == {"items": []}
        assert client.requests == 2

    def test_retry_after_is_read_from_the_header(self) -> None:
        client = fake_client(FakeResponse(403, {"message": "no"}, {"Retry-After": "7"}))
        with pytest.raises(ApiError) as refused:
            client.get("/api/v1/pods")
        assert refused.value.retry_after == 7.0 and client.requests == 1

    def test_a_budgets_refusal_is_answered_at_once(self) -> None:
        client = fake_client(FakeResponse(429, PDB_BODY), FakeResponse(201, {}))
        with pytest.raises(DisruptionBudgetRefusal):
            client.post("/api/v1/namespaces/ns/pods/p/eviction", {})
        assert client.requests == 1

    def test_a_restarted_servers_403_is_retried_but_a_403_alone_is_final(self) -> None:
        forbidden = FakeResponse(403, {"reason": "Forbidden", "message": "cannot list"})
        client = fake_client(RESET, forbidden, FakeResponse(200, {"items": []}))
        assert client.get("/x") == {"items": []} and client.requests == 3
        client = fake_client(forbidden, FakeResponse(200, {"items": []}))
        with pytest.raises(ApiError, match="cannot list"):
            client.get("/x")
        assert client.requests == 1

    def test_a_reset_create_that_finds_itself_says_so(self) -> None:
        client = fake_client(RESET, FakeResponse(409, {"reason": "AlreadyExists", "message": "exists"}))
        with pytest.raises(Conflict) as exists:
            client.post("/api/v1/namespaces", {})
        assert exists.value.attempts == 2

    def test_a_per_call_budget_and_the_time_budget_bound_the_retries(self) -> None:
        client = fake_client(*[RESET] * 1000)
        with pytest.raises(ApiError) as down:
            client.request("GET", "/x", budget=0.05)
        assert down.value.status == 0 and 1 < client.requests < 1000
        client.requests = 0
        with client.time_budget(0.0), pytest.raises(ApiError):
            client.get("/x")
        assert client.requests == 1


# -- events never fail a maintenance --------------------------------------------------------------------
NM = {"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance",
      "metadata": {"name": "maintenance-a", "uid": "u1"}}


def test_an_event_the_server_refuses_is_a_warning_not_a_failure() -> None:
    client = fake_client(*[FakeResponse(503, {"message": "down"})] * 1000)
    client.retry = retry.RetryPolicy(budget=0.01, first=0.001, cap=0.001)
    recorder = events.EventRecorder(client)
    assert recorder.record(NM, events.DRAIN_ERROR, "oops") is None
    assert recorder.recorded[0]["reason"] == events.DRAIN_ERROR
    (warning,) = recorder.warnings
    assert warning.startswith("event DrainError not recorded: API server answered 503")


def test_an_event_created_before_its_answer_was_lost_is_not_bumped() -> None:
    client = fake_client(RESET, FakeResponse(409, {"reason": "AlreadyExists", "message": "exists"}))
    recorder = events.EventRecorder(client)
    recorder.record(NM, events.BEGIN_MAINTENANCE)
    assert client.requests == 2 and recorder.warnings == []  # no GET, no PATCH


# -- watches survive the server ------------------------------------------------------------------------
def pod_event(etype: str, name: str, rv: str) -> Dict[str, Any]:
    return {"type": etype, "object": {"kind": "Pod", "metadata": {"namespace": "ns", "name": name,
                                                                  "resourceVersion": rv}}}


def wait_for_objects(watcher: waiter.Watcher, wanted: set, timeout: float = 5.0) -> None:
    def check() -> Optional[bool]:
        return True if set(watcher.objects) == wanted else None
    waiter.wait_until(watcher, check, timeout, lambda: f"objects {sorted(wanted)}, have {sorted(watcher.objects)}")


@pytest.fixture
def quick_reopen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiter, "REOPEN", retry.RetryPolicy(first=0.001, cap=0.01))


def test_a_watch_reopens_after_throttling_a_reset_and_a_restart(quick_reopen: None) -> None:
    client = fake_client(
        FakeResponse(429, APF_BODY, {"Retry-After": "0"}),
        RESET,
        FakeResponse(503, {"message": "starting"}),
        FakeResponse(200, lines=[pod_event("ADDED", "a", "11")]),
        FakeResponse(200, lines=[{"type": "ERROR", "object": STORAGE_BODY}]),
        FakeResponse(200, lines=[pod_event("ADDED", "b", "12")]),
        *[FakeResponse(200) for _n in range(1000)])
    watcher = waiter.Watcher(client, "/api/v1/pods", initial={"items": [], "metadata": {"resourceVersion": "10"}})
    with watcher:
        wait_for_objects(watcher, {"ns/a", "ns/b"})
    sent = client.pool.sent  # type: ignore[attr-defined]
    assert "resourceVersion=11" in sent[4] and "resourceVersion=11" in sent[5], sent[:6]


def test_a_watch_that_gets_410_lists_again(quick_reopen: None) -> None:
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    client = fake_client(
        FakeResponse(200, lines=[{"type": "ERROR", "object": gone}]),
        FakeResponse(200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "50"},
                           "items": [{"metadata": {"namespace": "ns", "name": "c"}}]}),
        *[FakeResponse(200) for _n in range(1000)])
    watcher = waiter.Watcher(client, "/api/v1/pods", initial={
        "items": [{"metadata": {"namespace": "ns", "name": "old"}}], "metadata": {"resourceVersion": "1"}})
    with watcher:
        wait_for_objects(watcher, {"ns/c"})
    assert "resourceVersion=50" in client.pool.sent[2]  # type: ignore[attr-defined]


def test_a_watch_streams_that_end_at_once_back_off(quick_reopen: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiter, "REOPEN", retry.RetryPolicy(first=0.05, cap=0.2, jitter=0))
    client = fake_client(*[FakeResponse(200) for _n in range(1000)])
    watcher = waiter.Watcher(client, "/api/v1/pods", initial={"items": [], "metadata": {"resourceVersion": "1"}})
    with watcher:
        threading.Event().wait(1.0)
    assert len(client.pool.sent) <= 10, "a server ending every watch at once must not get a request storm"  # type: ignore[attr-defined]


def test_a_watch_that_is_forbidden_fails_the_wait(quick_reopen: None) -> None:
    client = fake_client(FakeResponse(403, {"reason": "Forbidden", "message": "no watch for you"}))
    watcher = waiter.Watcher(client, "/api/v1/pods", initial={"items": [], "metadata": {"resourceVersion": "1"}})
    with watcher, pytest.raises(ApiError, match="no watch for you"):
        waiter.wait_until(watcher, lambda: None, 5, lambda: "never")


# -- creates and deletes whose first answer was lost ------------------------------------------------------
def test_a_nodemaintenance_created_before_its_answer_was_lost_is_ours() -> None:
    from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

    nm = {"metadata": {"name": "maintenance-a", "resourceVersion": "5"}, "spec": {"nodeName": "node-a"}}
    client = fake_client(
        FakeResponse(200, {"metadata": {"name": "node-a"}}),  # the node exists
        FakeResponse(200, {"items": []}),  # no NodeMaintenance names it
        RESET,  # the create (no read of the name first): applied, its answer lost
        FakeResponse(409, {"reason": "AlreadyExists", "message": "already exists"}),  # its retry
        FakeResponse(200, nm),  # read back: ours
        FakeResponse(200, {**nm, "status": {"phase": "Pending"}}))  # phase Pending
    made, created = maintenance.ensure(client, "node-a")
    assert created and made["status"]["phase"] == "Pending"


def test_a_delete_retried_after_a_reset_counts_as_done() -> None:
    from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

    client = fake_client(RESET, FakeResponse(404, {"reason": "NotFound", "message": "not found"}))
    assert maintenance.delete(client, {"metadata": {"name": "maintenance-a"}})
    client = fake_client(FakeResponse(404, {"reason": "NotFound", "message": "not found"}))
    assert not maintenance.delete(client, {"metadata": {"name": "maintenance-a"}})


def test_a_client_in_dry_run_plans_the_writes_and_sends_none() -> None:
    """The stores read the dry run from the client: the same answer as the write would give,
    and no request (the fake transport has no answer to give one)."""
    from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

    client = fake_client()
    client.dry_run = True
    nm = {"metadata": {"name": "maintenance-a"}, "status": {"phase": "Running"}}
    assert maintenance.delete(client, nm)
    planned, changed = maintenance.update_status(client, nm, {"phase": "Failed"})
    assert changed and planned["status"]["phase"] == "Failed" and nm["status"]["phase"] == "Running"
    assert client.requests == 0


# -- the pre-flight's dry runs ---------------------------------------------------------------------
def dry_run(*answers: Any) -> Any:
    from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import PodPlan
    from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import dry_run as evictions

    client = fake_client(*answers)
    client.retry = retry.RetryPolicy(budget=0.05, first=0.001, cap=0.002)
    plan = PodPlan(namespace="ns", name="p", uid="u1", action="evict", reason="")
    return evictions.dry_run_eviction(client, plan), client


def test_a_dry_run_refused_by_a_budget_is_a_refusal_asked_once() -> None:
    answer, client = dry_run(FakeResponse(429, PDB_BODY))
    assert (answer.answer, client.requests) == ("refused", 1)
    assert answer.causes == ("The disruption budget db needs 2 healthy pods and has 2 currently",)


def test_a_throttled_dry_run_is_asked_again_and_never_called_a_refusal() -> None:
    answer, client = dry_run(FakeResponse(429, APF_BODY), FakeResponse(201, {}))
    assert (answer.answer, client.requests) == ("allowed", 2)
    answer, _client = dry_run(*[FakeResponse(429, APF_BODY) for _n in range(1000)])
    assert answer.answer == "error" and "not a PodDisruptionBudget" in answer.message
