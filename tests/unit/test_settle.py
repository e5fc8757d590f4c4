"""The settle's rule (model/settle.py): what the drain took, back as whole as it was before."""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from ansible_collections.nmo.maintenance.plugins.module_utils.model import settle


def deployment(replicas: int, ready: int, updated: Optional[int] = None, gone: bool = False) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": "web", "namespace": "ns", "generation": 1}
    if gone:
        meta["deletionTimestamp"] = "2026-12-03T10:00:00Z"
    return {"metadata": meta, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 1, "readyReplicas": ready,
                       "updatedReplicas": replicas if updated is None else updated}}


ENTRY = {"kind": "Deployment", "namespace": "ns", "name": "web", "replicaset": "web-abc"}


def test_a_workload_whole_before_waits_for_every_replica_again() -> None:
    assert settle.why_not("Deployment", deployment(3, 2), before=3) == "2 of 3 replicas ready (3 before the drain)"
    assert settle.why_not("Deployment", deployment(3, 3), before=3) is None
    assert settle.why_not("Deployment", deployment(3, 3, updated=2), before=3) == "2 of 3 replicas updated"


def test_a_workload_not_whole_before_is_done_at_its_count_then_not_more() -> None:
    assert settle.why_not("Deployment", deployment(3, 2), before=2) is None
    assert settle.why_not("Deployment", deployment(3, 1), before=2) == "1 of 3 replicas ready (2 before the drain)"
    # not held to a rollout it was not through before either
    assert settle.why_not("Deployment", deployment(3, 2, updated=2), before=2) is None
    assert settle.standing({**ENTRY, "ready": 2}, deployment(3, 2)) == "Deployment ns/web 2 of 3 Ready (2 before the drain)"


def test_scaled_down_or_deleted_during_the_maintenance() -> None:
    assert settle.why_not("Deployment", deployment(1, 1), before=3) is None  # wants 1 now
    assert settle.why_not("Deployment", deployment(2, 1), before=3) == "1 of 2 replicas ready (3 before the drain)"
    assert settle.why_not("Deployment", None, before=3) is None
    assert settle.why_not("Deployment", deployment(3, 0, gone=True), before=3) is None
    assert settle.standing(ENTRY, None) == "Deployment ns/web gone"


def test_a_snapshot_without_the_count_or_with_a_garbled_one_waits_for_every_replica() -> None:
    assert settle.why_not("Deployment", deployment(3, 2)) == "2 of 3 replicas ready"
    for garbled in ("2", -1, None, True, 1.5, [2]):
        snap = settle.decode(json.dumps({"workloads": [{**ENTRY, "ready": garbled}], "budgets": []}))
        assert snap is not None and snap["workloads"] == [ENTRY], garbled
    kept = settle.decode(json.dumps({"workloads": [{**ENTRY, "ready": 2}, {"kind": "Deployment"}, "x"]}))
    assert kept == {"workloads": [{**ENTRY, "ready": 2}], "budgets": []}
    assert settle.decode("{not json") is None and settle.decode(json.dumps([1])) is None


def test_the_count_is_taken_once_the_first_drain_wins() -> None:
    snap = {"workloads": [ENTRY, {"kind": "StatefulSet", "namespace": "ns", "name": "db"}], "budgets": []}
    counted = settle.with_ready(snap, {"Deployment/ns/web": deployment(3, 2)})
    assert counted["workloads"] == [{**ENTRY, "ready": 2}, {"kind": "StatefulSet", "namespace": "ns", "name": "db"}]
    rerun = settle.merge(counted, settle.with_ready(snap, {"Deployment/ns/web": deployment(3, 1)}))
    assert rerun["workloads"][0]["ready"] == 2
    assert settle.with_ready(counted, {"Deployment/ns/web": deployment(3, 0)})["workloads"][0]["ready"] == 2
    assert settle.decode(settle.encode(counted)) == counted


def test_the_progress_line_names_what_it_waits_for() -> None:
    line = settle.progress_line("w1", 12.4, [f"Deployment ns/d{i} 0 of 1 Ready (1 before the drain)" for i in range(7)],
                                ["StatefulSet ns/db 3 of 3 Ready (3 before the drain)"])
    assert line.startswith("w1: settling for 12 s, waiting for 7: Deployment ns/d0 0 of 1 Ready (1 before the drain); ")
    assert line.endswith("ns/d4 0 of 1 Ready (1 before the drain) (and 2 more); 1 whole again")
    assert settle.progress_line("w1", 0.2, [], ["Deployment ns/web 2 of 3 Ready (2 before the drain)"]) == \
        "w1: settled after 0 s: Deployment ns/web 2 of 3 Ready (2 before the drain)"
