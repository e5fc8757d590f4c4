"""Taint list arithmetic and the guarded taint patch (reading and writing a node: stores/nodes.py).

Taints match by key and effect. Adding puts the maintenance taints first and keeps every
other taint; removing drops exactly those. The taint part of a node's patch (node_state.py)
tests the list as read, so the API server refuses it if someone changed the taints since.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ..errors import UnprocessableEntity
from . import validation

Taint = Dict[str, Any]

UNSCHEDULABLE_TAINT: Taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
DRAIN_TAINT: Taint = {"key": "medik8s.io/drain", "effect": "NoSchedule"}
MAINTENANCE_TAINTS: List[Taint] = [UNSCHEDULABLE_TAINT, DRAIN_TAINT]
EFFECTS = validation.TAINT_EFFECTS
MAX_ATTEMPTS = 5
# A node of the run waiting its turn (docs/design.md §3.7): its value names the run. Kubernetes
# allows one taint a key and effect, so a node carries at most one run's.
WAITING_KEY = "nmo.maintenance/waiting"
WAITING_ANY: Taint = {"key": WAITING_KEY, "effect": "PreferNoSchedule"}


def waiting_taint(run_id: str) -> Taint:
    return {**WAITING_ANY, "value": run_id}


def waiting_run(taints: List[Taint]) -> Optional[str]:
    """The run whose waiting taint the node carries; None when it carries none."""
    found = next((t for t in taints if same_taint(t, WAITING_ANY)), None)
    return None if found is None else str(found.get("value") or "")


def same_taint(a: Taint, b: Taint) -> bool:
    return a.get("key") == b.get("key") and a.get("effect") == b.get("effect")


def _present(taint: Taint, current: List[Taint]) -> bool:
    """``taint`` is on the node as wanted: same key and effect, and the same value."""
    return any(same_taint(taint, t) and (t.get("value") or "") == (taint.get("value") or "") for t in current)


def with_taints(current: List[Taint], wanted: List[Taint]) -> List[Taint]:
    """The list after adding ``wanted``: them first, then every other existing taint."""
    if all(_present(w, current) for w in wanted):
        return list(current)
    added = []
    for w in wanted:
        kept = next((t for t in current if same_taint(t, w) and (t.get("value") or "") == (w.get("value") or "")), None)
        added.append(kept if kept is not None else {k: v for k, v in w.items() if v not in (None, "")})
    return added + [t for t in current if not any(same_taint(t, w) for w in wanted)]


def without_taints(current: List[Taint], unwanted: List[Taint]) -> List[Taint]:
    """The list after removing ``unwanted`` (by key and effect); user taints stay as they are."""
    return [t for t in current if not any(same_taint(t, u) for u in unwanted)]


def desired_taints(current: List[Taint], wanted: List[Taint], present: bool) -> List[Taint]:
    return with_taints(current, wanted) if present else without_taints(current, wanted)


def guarded_patch(current: Optional[List[Taint]], new: List[Taint]) -> List[Dict[str, Any]]:
    """The JSON Patch: test that the taints are still as read, then write the new list."""
    return [
        {"op": "test", "path": "/spec/taints", "value": current},
        {"op": "add" if current is None else "replace", "path": "/spec/taints", "value": new},
    ]


def validate_taints(taints: List[Taint]) -> None:
    validation.taints(taints)


# What kube-apiserver answers (422, no details) when a JSON Patch cannot be applied, as when
# its test operation fails. A refusal of the result names the object and the field, with causes.
PATCH_NOT_APPLIED = "the server rejected our request due to an error in our request"


def is_test_failure(exc: UnprocessableEntity) -> bool:
    """Whether a 422 answer to our JSON Patch is its ``test`` operation failing (someone else
    wrote the taints since we read them), and not the API server refusing what we wrote."""
    message = exc.server_message or ""
    if (exc.body.get("details") or {}).get("causes"):
        return False
    return message == PATCH_NOT_APPLIED or "test failed" in message or "testing value" in message
