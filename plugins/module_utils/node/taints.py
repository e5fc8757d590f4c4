"""Taint list arithmetic and the guarded write of a node's taints.

Taints match by key and effect. Adding puts the maintenance taints first and keeps every
other taint; removing drops exactly those. The write is one JSON Patch whose ``test``
operation makes the API server refuse it if someone changed the taints since we read
them; we then read again and retry, a bounded number of times.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from ..api.client import Client, path_segment
from ..errors import ApiError, ConcurrentUpdateError, NotFound, RefusedError, UnprocessableEntity

Taint = Dict[str, Any]

UNSCHEDULABLE_TAINT: Taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
DRAIN_TAINT: Taint = {"key": "medik8s.io/drain", "effect": "NoSchedule"}
MAINTENANCE_TAINTS: List[Taint] = [UNSCHEDULABLE_TAINT, DRAIN_TAINT]
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MAX_ATTEMPTS = 5


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
    from .. import validation

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


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{path_segment(name)}"


def read_node(client: Client, name: str) -> Dict[str, Any]:
    from .. import validation

    validation.node_name(name)  # '' or '..' would read another URL (/api/v1/nodes/, /api/v1)
    try:
        return client.get(node_path(name))
    except NotFound:
        raise RefusedError(f'node "{name}" not found in cluster') from None


def apply_taints(client: Client, name: str, wanted: List[Taint], present: bool, check_mode: bool = False,
                 node: Optional[Dict[str, Any]] = None,
                 before_write: Optional[Callable[[int], None]] = None,
                 also: Optional[Callable[[Dict[str, Any]], List[Dict[str, Any]]]] = None
                 ) -> Tuple[List[Taint], List[Taint], Dict[str, Any], bool]:
    """Make the node carry (or not) ``wanted``. Returns (before, after, node, changed).

    ``also`` gives, for the node as read, more JSON Patch operations to apply in the same
    request (cordon and label with the taints, so nothing sees one without the other).
    ``before_write`` is called before each write attempt (tests use it to race a writer).
    """
    validate_taints(wanted)
    node = node or read_node(client, name)
    first_before: Optional[List[Taint]] = None
    for attempt in range(MAX_ATTEMPTS):
        raw = node.get("spec", {}).get("taints")
        current = list(raw or [])
        if first_before is None:
            first_before = current
        new = desired_taints(current, wanted, present)
        more = also(node) if also else []
        if new == current and not more:
            return first_before, current, node, attempt > 0
        if check_mode:
            return first_before, new, node, True
        if before_write:
            before_write(attempt)
        try:
            node = client.patch(node_path(name), guarded_patch(raw, new) + more, "json")
            return first_before, new, node, True
        except UnprocessableEntity as exc:
            if not is_test_failure(exc):  # the API server refused the change itself: say why, as it did
                raise ApiError(exc.status, exc.reason, f"the API server refused the new taints of node {name}: "
                               f"{exc.server_message or exc.reason}", "PATCH", node_path(name), exc.body) from None
            node = read_node(client, name)  # someone else wrote the taints: start from theirs
    raise ConcurrentUpdateError(
        f"the taints of node {name} kept changing while we wrote them ({MAX_ATTEMPTS} attempts); "
        "another controller is writing them: find it, then run again")
