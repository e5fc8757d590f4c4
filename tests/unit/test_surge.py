"""Surge-first's decision (model/surge.py): which refused pods a Deployment restart frees."""

from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import surge


def owned(kind: Optional[str], name: str = "web-5f6f7") -> Dict[str, Any]:
    refs = [{"kind": kind, "name": name, "controller": True}] if kind else []
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u1", "ownerReferences": refs}}


def deployment(replicas: int = 1, strategy: Optional[Dict[str, Any]] = None, paused: bool = False,
               generation: int = 2, observed: int = 2, updated: Optional[int] = None,
               total: Optional[int] = None) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"replicas": replicas}
    if strategy is not None:
        spec["strategy"] = strategy
    if paused:
        spec["paused"] = True
    return {"metadata": {"name": "web", "namespace": "ns", "generation": generation}, "spec": spec,
            "status": {"observedGeneration": observed, "updatedReplicas": replicas if updated is None else updated,
                       "replicas": replicas if total is None else total, "readyReplicas": replicas}}


RS = {"metadata": {"name": "web-5f6f7", "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]}}


def rolling(surge_value: Any = None, unavailable: Any = None) -> Dict[str, Any]:
    update = {}
    if surge_value is not None:
        update["maxSurge"] = surge_value
    if unavailable is not None:
        update["maxUnavailable"] = unavailable
    return {"type": "RollingUpdate", "rollingUpdate": update}


@pytest.mark.parametrize("case, pod, rs, dep, can, says", [
    ("defaults, one replica: 25% surge rounds up to 1, 25% unavailable down to 0",
     owned("ReplicaSet"), RS, deployment(1), True, "maxSurge 25%: 1 of 1"),
    ("maxSurge 1, maxUnavailable 0", owned("ReplicaSet"), RS, deployment(3, rolling(1, 0)), True, "restarted"),
    ("maxSurge 10% of 3 rounds up to 1", owned("ReplicaSet"), RS, deployment(3, rolling("10%", 0)), True, "1 of 3"),
    ("maxSurge 0", owned("ReplicaSet"), RS, deployment(2, rolling(0, 1)), False, "maxSurge 0"),
    ("maxUnavailable 1 may stop the old pod first", owned("ReplicaSet"), RS, deployment(1, rolling(1, 1)), False,
     "may stop the old pod before the new one is Ready"),
    ("25% unavailable of 4 is 1", owned("ReplicaSet"), RS, deployment(4), False, "maxUnavailable 25% (1 of 4"),
    ("Recreate", owned("ReplicaSet"), RS, deployment(1, {"type": "Recreate"}), False, "the Recreate strategy"),
    ("StatefulSet", owned("StatefulSet", "db"), None, None, False, "StatefulSet db makes a pod's replacement only"),
    ("bare pod", owned(None), None, None, False, "a bare pod"),
    ("a Job's pod", owned("Job", "backup"), None, None, False, "its controller is a Job (backup)"),
    ("a ReplicaSet of no Deployment", owned("ReplicaSet"), RS, None, False, "belongs to no Deployment"),
    ("paused", owned("ReplicaSet"), RS, deployment(1, paused=True), False, "is paused"),
    ("rolled out already", owned("ReplicaSet"), RS, deployment(2, updated=1, total=3), False,
     "being rolled out already (1 of 2 updated, 3 pods)"),
    ("a change not seen yet", owned("ReplicaSet"), RS, deployment(1, generation=3, observed=2), False,
     "has not seen its last change"),
])
def test_judge(case, pod, rs, dep, can, says):
    verdict = surge.judge(pod, rs, dep)
    assert verdict.can is can, (case, verdict)
    assert says in verdict.why, (case, verdict.why)
    assert verdict.why.startswith("surge: " if can else "surge cannot help"), verdict.why
    if can:
        assert verdict.deployment == "web"


@pytest.mark.parametrize("value, replicas, up, want", [
    ("25%", 1, True, 1), ("25%", 1, False, 0), ("25%", 4, False, 1), ("50%", 3, True, 2), ("50%", 3, False, 1),
    (2, 5, True, 2), ("0%", 10, True, 0),
])
def test_scaled_rounds_as_kubernetes(value, replicas, up, want):
    assert surge.scaled(value, replicas, up) == want


def test_restart_patch_is_kubectl_rollout_restart():
    assert surge.restart_patch("2026-12-03T16:00:00Z") == {
        "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-03T16:00:00Z"}}}}}


def test_unschedulable_replacement_is_named():
    old = {"metadata": {"name": "web-a", "uid": "old"}, "status": {"phase": "Running"}}
    pending = {"metadata": {"name": "web-b", "uid": "new"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available: 3 node(s) were unschedulable."}]}}
    starting = {"metadata": {"name": "web-c", "uid": "c"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}}
    assert surge.unschedulable([old, starting], "old") is None
    assert surge.unschedulable([old, pending], "old") == (
        "its replacement web-b cannot be scheduled: 0/3 nodes are available: 3 node(s) were unschedulable.")
