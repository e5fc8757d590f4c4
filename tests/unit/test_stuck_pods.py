"""Pods that do not leave, named (model/stuck_pods.py), and what the drain's bookkeeping says of them."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import stuck_pods
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import EVICT, PodPlan
from ansible_collections.nmo.maintenance.plugins.module_utils.model.tracking import (
    ACCEPTED,
    REFUSED,
    Outcome,
    Tracker,
)

NOW = 1_800_000_000.0
DELETED_AT = "2027-01-15T08:00:00Z"  # 1_800_000_000 is 2027-01-15T08:00:00Z
UID = "u1"


def pod(deleted: Optional[str] = None, finalizers: Optional[List[str]] = None, ready: bool = True,
        phase: str = "Running", terminated: bool = False, name: str = "p") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "ns", "uid": UID}
    if deleted:
        meta["deletionTimestamp"] = deleted
    if finalizers:
        meta["finalizers"] = finalizers
    status: Dict[str, Any] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
    if terminated:
        status["containerStatuses"] = [{"name": "c", "state": {"terminated": {"exitCode": 0}}}]
    return {"metadata": meta, "status": status}


def pdb(allowed: int, expected: int, healthy: int, desired: int, policy: Optional[str] = None) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"maxUnavailable": 1}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    return {"metadata": {"namespace": "w-p5", "name": "flaky"}, "spec": spec,
            "status": {"disruptionsAllowed": allowed, "expectedPods": expected, "currentHealthy": healthy,
                       "desiredHealthy": desired}}


@pytest.mark.parametrize("case, kwargs, state, now, says", [
    ("not being deleted", {}, None, NOW, ""),
    ("finalizer, grace not over", {"deleted": DELETED_AT, "finalizers": ["example.com/hold"]}, None, NOW - 5, ""),
    ("finalizer, grace over", {"deleted": DELETED_AT, "finalizers": ["example.com/hold"]}, None, NOW + 1,
     "held by finalizer example.com/hold"),
    ("finalizer, containers stopped", {"deleted": DELETED_AT, "finalizers": ["a/x", "b/y"], "terminated": True},
     None, NOW - 5, "held by finalizers a/x, b/y"),
    ("deleting, no finalizer", {"deleted": DELETED_AT}, None, NOW + 100, ""),
    ("node unreachable", {"deleted": DELETED_AT}, "unreachable (x)", NOW - 5,
     "terminating on node n1, which is unreachable (x): the kubelet is not there to finish it"),
    ("node unreachable and a finalizer", {"deleted": DELETED_AT, "finalizers": ["example.com/hold"]},
     "NotReady (y)", NOW, "also held by finalizer example.com/hold"),
    ("node NotReady, pod not deleted", {}, "NotReady (y)", NOW, ""),
])
def test_held(case: str, kwargs: Dict[str, Any], state: Optional[str], now: float, says: str) -> None:
    text = stuck_pods.held(pod(**kwargs), "n1", state, now)
    assert (says in text) if says else text == "", (case, text)


def test_held_names_skip_wait_on_a_node_without_kubelet() -> None:
    assert "skip_wait_for_delete_timeout" in stuck_pods.held(pod(deleted=DELETED_AT), "n1", "NotReady (y)", NOW)
    assert stuck_pods.held(None, "n1", "NotReady (y)", NOW) == ""


def test_own_finalizers_leave_out_kubernetes_own() -> None:
    p = pod(finalizers=["batch.kubernetes.io/job-tracking", "kubernetes.io/pvc-protection", "example.com/hold"])
    assert stuck_pods.own_finalizers(p) == ["example.com/hold"]


@pytest.mark.parametrize("case, budget, ready, says", [
    ("two of three not Ready, this one too", pdb(0, 3, 1, 2), False,
     ["allows 0 disruptions because 2 of 3 pod(s) are not Ready", "needs 2 healthy, 1 are",
      "this pod is one of them: unhealthyPodEvictionPolicy: AlwaysAllow"]),
    ("two of three not Ready, this one Ready", pdb(0, 3, 1, 2), True,
     ["2 of 3 pod(s) are not Ready", "this pod is Ready and waits", "AlwaysAllow would let the not-Ready"]),
    ("AlwaysAllow already", pdb(0, 3, 1, 2, "AlwaysAllow"), True, ["its unhealthyPodEvictionPolicy is AlwaysAllow"]),
    ("all healthy: not the reason", pdb(0, 1, 1, 1), True, []),
    ("allows one: not refused for that", pdb(1, 3, 2, 2), True, []),
    ("not computed yet", {"metadata": {"name": "b"}, "status": {"disruptionsAllowed": 0}}, True, []),
])
def test_unhealthy_budget(case: str, budget: Dict[str, Any], ready: bool, says: List[str]) -> None:
    text = stuck_pods.unhealthy_budget(budget, ready)
    assert all(s in text for s in says) if says else text == "", (case, text)
    if says:
        assert text.startswith("PDB w-p5/flaky ")


def test_budget_named_from_the_refusal() -> None:
    message = ("Cannot evict pod as it would violate the pod's disruption budget. "
               "(The disruption budget flaky needs 2 healthy pods and has 1 currently)")
    assert stuck_pods.budget_named(message) == "flaky"
    assert stuck_pods.budget_named("the API server is throttling requests") is None


# -- the drain's bookkeeping ---------------------------------------------------------------------
def plan(name: str) -> PodPlan:
    return PodPlan("ns", name, f"uid-{name}", EVICT, "has a controller")


def test_last_error_is_never_an_old_refusal_of_a_pod_that_left() -> None:
    tracker = Tracker.of([plan("a"), plan("held")])
    tracker.answer("ns/a", Outcome(REFUSED, "Cannot evict pod ... disruption budget app needs 1"), 0)
    tracker.answer("ns/held", Outcome(ACCEPTED), 0)
    assert "disruption budget app" in tracker.current_error()
    gone = {"ns/held": pod(deleted=DELETED_AT, finalizers=["example.com/hold"], name="held")}
    gone["ns/held"]["metadata"]["uid"] = "uid-held"
    tracker.settle(gone, NOW)  # a is gone (not in the view), held is still there
    assert list(tracker.pending) == ["ns/held"]
    assert tracker.current_error() == "", "the refusal of a pod that left is not the last error"
    tracker.pending["ns/held"].held = stuck_pods.held(gone["ns/held"], "n1", None, NOW + 1)
    assert "ns/held (held by finalizer example.com/hold" in tracker.current_error()
    assert "held by finalizer example.com/hold" in tracker.describe_pending()


def test_skip_wait_marks_the_pods_left_terminating() -> None:
    tracker = Tracker.of([plan("a"), plan("b")], skip_after=20)
    terminating = pod(deleted=DELETED_AT, name="a")
    terminating["metadata"]["uid"] = "uid-a"
    still = pod(name="b")
    still["metadata"]["uid"] = "uid-b"
    tracker.settle({"ns/a": terminating, "ns/b": still}, NOW + 10)
    assert tracker.left() == []
    tracker.settle({"ns/a": terminating, "ns/b": still}, NOW + 21)
    assert [p.key for p in tracker.left()] == ["ns/a"] and list(tracker.pending) == ["ns/b"]
    tracker.settle({}, NOW + 22)  # b deleted: gone, not left
    assert [p.key for p in tracker.left()] == ["ns/a"]


def test_held_pods_are_in_the_blocked_list() -> None:
    tracker = Tracker.of([plan("a")])
    tracker.pending["ns/a"].held, tracker.pending["ns/a"].held_since = "held by finalizer x/y: ...", NOW
    [entry] = tracker.blocked(0.0, NOW + 30)
    assert entry["reason"].startswith("held by finalizer x/y") and entry["seconds"] == 30 and entry["still_refused"]
