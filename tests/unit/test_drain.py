"""Pure logic of the drain: pod filters, outcomes, bookkeeping, progress and throttles."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, api_error
from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking as dt
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import (
    DELETE,
    EVICT,
    REFUSE,
    SKIP,
    WAIT,
    SelectionOptions,
    classify,
    parse_selector,
    refusal_message,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions

NOW = 1_700_000_000.0  # epoch seconds the tests pin as "now"
STAMP_60S_AGO = "2023-11-14T22:12:20Z"  # NOW - 60 s


def pod(name: str = "p", owner: Optional[str] = "ReplicaSet", phase: str = "Running", emptydir: bool = False,
        mirror: bool = False, deleting: Optional[str] = None, labels: Optional[Dict[str, str]] = None,
        uid: str = "u1") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    if deleting:
        meta["deletionTimestamp"] = deleting
    spec: Dict[str, Any] = {"containers": [{"name": "c"}]}
    if emptydir:
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def opts(**kwargs: Any) -> SelectionOptions:
    return SelectionOptions(now=NOW, **kwargs)


# -- pod filters ------------------------------------------------------------------------------
class TestClassify:
    def test_replicated_pod_is_evicted_naming_its_controller(self) -> None:
        plan = classify(pod(), opts())
        assert plan.action == EVICT
        assert "ReplicaSet p-owner" in plan.reason

    def test_mirror_pod_is_skipped_even_without_a_controller(self) -> None:
        plan = classify(pod(owner=None, mirror=True), opts(force=False))
        assert plan.action == SKIP and "mirror" in plan.reason

    def test_daemonset_pod_is_skipped_by_default(self) -> None:
        plan = classify(pod(owner="DaemonSet"), opts())
        assert plan.action == SKIP and "DaemonSet" in plan.reason

    def test_daemonset_pod_is_refused_without_ignore_daemonsets(self) -> None:
        plan = classify(pod(owner="DaemonSet"), opts(ignore_daemonsets=False))
        assert plan.action == REFUSE and plan.options == ("ignore_daemonsets",)

    def test_finished_daemonset_pod_is_evicted(self) -> None:
        assert classify(pod(owner="DaemonSet", phase="Failed"), opts(ignore_daemonsets=False)).action == EVICT

    def test_emptydir_pod_is_evicted_by_default(self) -> None:
        plan = classify(pod(emptydir=True), opts())
        assert plan.action == EVICT and "emptyDir" in plan.reason

    def test_emptydir_pod_is_refused_without_delete_emptydir_data(self) -> None:
        plan = classify(pod(emptydir=True), opts(delete_emptydir_data=False))
        assert plan.action == REFUSE and plan.options == ("delete_emptydir_data",)

    def test_unmanaged_pod_is_evicted_with_force(self) -> None:
        plan = classify(pod(owner=None), opts())
        assert plan.action == EVICT and "no controller" in plan.reason

    def test_unmanaged_pod_is_refused_without_force(self) -> None:
        plan = classify(pod(owner=None), opts(force=False))
        assert plan.action == REFUSE and plan.options == ("force",)

    def test_every_guarding_option_is_named(self) -> None:
        plan = classify(pod(owner=None, emptydir=True), opts(force=False, delete_emptydir_data=False))
        assert plan.action == REFUSE
        assert set(plan.options) == {"force", "delete_emptydir_data"}

    @pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
    def test_finished_pods_are_evicted_whatever_the_options(self, phase: str) -> None:
        # evicted, not deleted: the shipped RBAC has no pod delete (docs/rbac.md)
        plan = classify(pod(owner=None, emptydir=True, phase=phase), opts(force=False, delete_emptydir_data=False))
        assert plan.action == EVICT and phase in plan.reason and "evicted" in plan.reason

    def test_finished_pods_are_deleted_with_disable_eviction(self) -> None:
        plan = classify(pod(phase="Succeeded"), opts(disable_eviction=True))
        assert plan.action == DELETE and "finished (Succeeded): deleted" in plan.reason

    def test_terminating_pod_is_waited_for_and_never_refused(self) -> None:
        plan = classify(pod(owner=None, deleting=STAMP_60S_AGO), opts(force=False))
        assert plan.action == WAIT

    def test_long_terminating_pod_is_skipped_past_skip_wait_for_delete_timeout(self) -> None:
        assert classify(pod(deleting=STAMP_60S_AGO), opts(skip_wait_for_delete_timeout=30)).action == SKIP
        assert classify(pod(deleting=STAMP_60S_AGO), opts(skip_wait_for_delete_timeout=120)).action == WAIT

    def test_terminating_daemonset_pod_is_still_skipped(self) -> None:
        assert classify(pod(owner="DaemonSet", deleting=STAMP_60S_AGO), opts()).action == SKIP

    def test_disable_eviction_deletes(self) -> None:
        plan = classify(pod(), opts(disable_eviction=True))
        assert plan.action == DELETE and "disable_eviction" in plan.reason

    def test_pod_selector_skips_pods_that_do_not_match(self) -> None:
        selection = opts(pod_selector="app=web")
        assert classify(pod(labels={"app": "web"}), selection).action == EVICT
        skipped = classify(pod(labels={"app": "db"}), selection)
        assert skipped.action == SKIP and "pod_selector" in skipped.reason

    def test_refusal_message_names_each_pod_and_option(self) -> None:
        refused = [classify(pod("a", owner=None), opts(force=False)),
                   classify(pod("b", owner="DaemonSet"), opts(ignore_daemonsets=False))]
        message = refusal_message("node-1", refused)
        assert "ns/a" in message and "force=true" in message
        assert "ns/b" in message and "ignore_daemonsets=true" in message
        assert "nothing was evicted" in message


class TestSelector:
    @pytest.mark.parametrize("selector,labels,matches", [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("env in (a, b)", {"env": "b"}, True),
        ("env notin (a,b)", {"env": "a"}, False),
        ("env notin (a,b)", {}, True),
        ("critical", {"critical": ""}, True),
        ("!critical", {"critical": "x"}, False),
        ("app=web,env in (a,b),!legacy", {"app": "web", "env": "a"}, True),
        ("app=web,env in (a,b),!legacy", {"app": "web", "env": "a", "legacy": "1"}, False),
        ("", {"x": "y"}, True),
    ])
    def test_matches(self, selector: str, labels: Dict[str, str], matches: bool) -> None:
        assert all(r.matches(labels) for r in parse_selector(selector)) is matches

    @pytest.mark.parametrize("bad", ["app=(web", "a b c", "app in a,b"])
    def test_malformed_selector_is_an_input_error(self, bad: str) -> None:
        with pytest.raises(InputError, match="^label selector: cannot parse"):
            parse_selector(bad)
        with pytest.raises(InputError, match="^pod_selector: cannot parse"):  # the caller's option, named
            parse_selector(bad, "pod_selector")


# -- what an answer means ---------------------------------------------------------------------
PDB_BODY = {"details": {"causes": [{"reason": "DisruptionBudget",
                                    "message": "The disruption budget db needs 2 healthy pods and has 2 currently"}]}}
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


class TestOutcome:
    def test_success_and_404_are_accepted(self) -> None:
        assert dt.outcome_of(None, "ns/p").kind == dt.ACCEPTED
        assert dt.outcome_of(api_error(404, "NotFound", "pods \"p\" not found"), "ns/p").kind == dt.ACCEPTED

    def test_a_budgets_429_is_a_refusal_carrying_the_server_message_and_the_budget(self) -> None:
        outcome = dt.outcome_of(api_error(429, "TooManyRequests", PDB_MESSAGE, body=PDB_BODY), "ns/p")
        assert outcome.kind == dt.REFUSED
        assert outcome.message.startswith(PDB_MESSAGE)
        assert "The disruption budget db needs 2 healthy pods" in outcome.message

    def test_500_for_several_budgets_is_fatal_and_names_the_pod(self) -> None:
        err = api_error(500, "InternalError", "This pod has more than one PodDisruptionBudget, which the "
                                              "eviction subresource does not support.")
        outcome = dt.outcome_of(err, "ns/p")
        assert outcome.kind == dt.FATAL
        assert "ns/p" in outcome.message and "more than one PodDisruptionBudget" in outcome.message

    @pytest.mark.parametrize("status", [0, 409, 500, 503])
    def test_transient_failures_are_retried(self, status: int) -> None:
        assert dt.outcome_of(api_error(status, "x", "try later"), "ns/p").kind == dt.RETRY

    def test_forbidden_is_fatal(self) -> None:
        assert dt.outcome_of(api_error(403, "Forbidden", "no"), "ns/p").kind == dt.FATAL


class TestIsGone:
    def test_deleted_or_replaced_is_gone(self) -> None:
        assert dt.is_gone("u1", None, NOW)
        assert dt.is_gone("u1", pod(uid="u2"), NOW)  # a StatefulSet's new pod of the same name

    def test_same_pod_still_there_is_not_gone_even_when_terminating(self) -> None:
        assert not dt.is_gone("u1", pod(uid="u1"), NOW)
        assert not dt.is_gone("u1", pod(uid="u1", deleting=STAMP_60S_AGO), NOW)

    def test_terminating_past_skip_after_counts_as_gone(self) -> None:
        assert dt.is_gone("u1", pod(uid="u1", deleting=STAMP_60S_AGO), NOW, skip_after=30)
        assert not dt.is_gone("u1", pod(uid="u1", deleting=STAMP_60S_AGO), NOW, skip_after=90)


# -- bookkeeping ----------------------------------------------------------------------------------
def tracker(*pods: Dict[str, Any], **kwargs: Any) -> dt.Tracker:
    return dt.Tracker.of([classify(p, opts()) for p in pods], **kwargs)


class TestTracker:
    def test_only_acted_on_pods_are_tracked_and_waited_pods_never_sent(self) -> None:
        t = tracker(pod("a"), pod("ds", owner="DaemonSet"), pod("t", deleting=STAMP_60S_AGO))
        assert set(t.pending) == {"ns/a", "ns/t"}
        assert [p.key for p in t.due(0)] == ["ns/a"]

    def test_a_pod_in_flight_is_not_sent_again(self) -> None:
        t = tracker(pod("a"))
        assert len(t.due(0)) == 1
        assert t.due(10) == []
        assert t.in_flight() == 1

    def test_refusal_is_retried_after_the_delay_and_counted(self) -> None:
        t = tracker(pod("a"), retry_delay=1.0)
        t.due(0)
        still = t.answer("ns/a", dt.Outcome(dt.REFUSED, PDB_MESSAGE), now=5.0)
        assert still is not None and still.last_error == PDB_MESSAGE and t.last_error == PDB_MESSAGE
        assert t.due(5.5) == []
        assert [p.key for p in t.due(6.0)] == ["ns/a"]
        assert t.retries == 1 and t.pending["ns/a"].attempts == 2

    def test_accepted_pod_is_not_sent_again_and_waits_for_the_watch(self) -> None:
        t = tracker(pod("a"))
        t.due(0)
        t.answer("ns/a", dt.Outcome(dt.ACCEPTED), 0.1)
        assert t.due(100) == [] and "ns/a" in t.pending
        gone = t.settle({}, NOW)
        assert [p.key for p in gone] == ["ns/a"] and not t.pending and t.done[0].accepted

    def test_settle_keeps_the_same_pod_and_drops_a_replacement(self) -> None:
        t = tracker(pod("a", uid="u1"), pod("b", uid="u1"))
        gone = t.settle({"ns/a": pod("a", uid="u1"), "ns/b": pod("b", uid="u9")}, NOW)
        assert [p.key for p in gone] == ["ns/b"] and list(t.pending) == ["ns/a"]

    def test_answer_for_a_pod_already_gone_is_ignored(self) -> None:
        t = tracker(pod("a"))
        t.due(0)
        t.settle({}, NOW)
        assert t.answer("ns/a", dt.Outcome(dt.REFUSED, "late"), 1.0) is None
        assert t.last_error == "" and not t.done[0].accepted

    def test_acceptance_that_arrives_after_the_watch_still_counts(self) -> None:
        t = tracker(pod("a"))
        t.due(0)
        t.settle({}, NOW)  # the DELETED event came before the eviction's answer
        assert t.answer("ns/a", dt.Outcome(dt.ACCEPTED), 1.0) is None
        assert t.done[0].accepted

    def test_delete_fallback_after_refusals(self) -> None:
        t = tracker(pod("a"), retry_delay=1.0, fallback_after=3.0)
        t.due(0)
        t.answer("ns/a", dt.Outcome(dt.REFUSED, PDB_MESSAGE), 0.0)
        for now in (1.0, 2.0):
            (p,) = t.due(now)
            assert p.action == EVICT
            t.answer("ns/a", dt.Outcome(dt.REFUSED, PDB_MESSAGE), now)
        (p,) = t.due(3.0)
        assert p.action == DELETE and p.fallback

    def test_no_fallback_by_default(self) -> None:
        t = tracker(pod("a"), retry_delay=1.0)
        t.due(0)
        t.answer("ns/a", dt.Outcome(dt.REFUSED, PDB_MESSAGE), 0.0)
        (p,) = t.due(10_000)
        assert p.action == EVICT and not p.fallback

    def test_fatal_stops_every_new_request(self) -> None:
        t = tracker(pod("a"), pod("b"))
        t.due(0)
        t.answer("ns/a", dt.Outcome(dt.FATAL, "pod ns/a: boom"), 0.0)
        t.answer("ns/b", dt.Outcome(dt.RETRY, "503"), 0.0)
        assert t.fatal == ["pod ns/a: boom"] and t.due(100) == []

    def test_describe_pending_names_pods_and_errors(self) -> None:
        t = tracker(pod("a"), pod("b"))
        t.due(0)
        t.answer("ns/a", dt.Outcome(dt.REFUSED, PDB_MESSAGE), 0.0)
        t.answer("ns/b", dt.Outcome(dt.ACCEPTED), 0.0)
        text = t.describe_pending()
        assert f"ns/a ({PDB_MESSAGE})" in text and "ns/b (deleting)" in text


# -- progress and status --------------------------------------------------------------------------
class TestStatus:
    def test_progress_arithmetic(self) -> None:
        t = tracker(*(pod(f"p{i}", uid=f"u{i}") for i in range(8)))
        assert dt.status_fields(10, 8, t.pending.values(), "")["drainProgress"] == 0
        t.settle({k: pod(k.split("/")[1], uid=f"u{k[-1]}") for k in ("ns/p0", "ns/p1")}, NOW)  # 6 gone
        fields = dt.status_fields(10, 8, t.pending.values(), "x")
        assert fields["drainProgress"] == 75  # (8 - 2) * 100 / 8
        assert fields["pendingPods"] == ["p0", "p1"]
        assert fields["pendingPodsRefs"] == [{"namespace": "ns", "name": "p0"}, {"namespace": "ns", "name": "p1"}]
        assert fields["phase"] == "Running" and fields["lastError"] == "x" and fields["totalpods"] == 10

    def test_finished_is_succeeded_100_and_clears_the_error(self) -> None:
        fields = dt.status_fields(8, 8, [], "old", finished=True)
        assert fields["phase"] == "Succeeded" and fields["drainProgress"] == 100 and fields["lastError"] == ""
        assert fields["pendingPods"] == [] and fields["pendingPodsRefs"] == []

    def test_nothing_to_evict_is_100(self) -> None:
        assert dt.status_fields(3, 0, [], "")["drainProgress"] == 100

    def test_initial_counts_fresh_and_resumed(self) -> None:
        assert dt.initial_counts({}, 6, 8) == (8, 6)
        assert dt.initial_counts({"phase": "Running"}, 6, 8) == (8, 6)
        resumed = {"phase": "Running", "evictionPods": 6, "totalpods": 8, "drainProgress": 66}
        assert dt.initial_counts(resumed, 2, 4) == (8, 6)
        assert dt.initial_counts(dict(resumed, drainProgress=100), 2, 4) == (4, 2)
        assert dt.initial_counts(dict(resumed, phase="Succeeded"), 2, 4) == (4, 2)
        assert dt.initial_counts(resumed, 9, 12) == (12, 9)  # more to do than counted: start over
        done = {"phase": "Succeeded", "evictionPods": 6, "totalpods": 8, "drainProgress": 100}
        assert dt.initial_counts(done, 0, 2) == (8, 6)  # a rerun with nothing to do changes nothing


class TestThrottles:
    def test_status_throttle_one_write_a_second_and_only_on_change(self) -> None:
        th = dt.Throttle(1.0)
        assert th.due({"a": 1}, 0.0)
        th.mark({"a": 1}, 0.0)
        assert not th.due({"a": 1}, 5.0)  # unchanged
        assert not th.due({"a": 2}, 0.5)  # changed, too soon
        assert th.due({"a": 2}, 0.5, force=True)
        assert th.due({"a": 2}, 1.0)

    def test_event_throttle_once_per_pod_and_message(self) -> None:
        ev = dt.EventThrottle(repeat_every=30.0)
        assert ev.due("ns/a", "m", 0.0)
        assert not ev.due("ns/a", "m", 1.0)
        assert not ev.due("ns/a", "m", 29.0)
        assert ev.due("ns/a", "other", 2.0)
        assert ev.due("ns/b", "m", 2.0)
        assert ev.due("ns/a", "m", 31.0)


class TestOptions:
    def test_from_params_keeps_defaults_for_unset(self) -> None:
        o = DrainOptions.from_params({"node": "n", "timeout": None, "parallelism": 4, "kubeconfig": "x"})
        assert o.timeout == 600 and o.parallelism == 4 and o.force is True

    @pytest.mark.parametrize("bad,word", [
        ({"timeout": 0}, "timeout"), ({"parallelism": 0}, "parallelism"), ({"retry_delay": 0}, "retry_delay"),
        ({"grace_period": -1}, "grace_period"), ({"delete_fallback_after": -1}, "delete_fallback_after"),
        ({"skip_wait_for_delete_timeout": -5}, "skip_wait_for_delete_timeout"), ({"node": ""}, "node"),
        ({"pod_selector": "a b"}, "pod_selector"),
    ])
    def test_bad_input_is_refused_before_any_request(self, bad: Dict[str, Any], word: str) -> None:
        with pytest.raises(InputError, match=word):
            DrainOptions(**{"node": "n", **bad}).validate()
