"""The Node's own lifecycle conditions (docs/design.md §4.11; KEP-5683, alpha in Kubernetes 1.37
behind the feature gate ``NodeLifecycleConditions``). Pure.

Whoever maintains a node may set, on the Node's status, ``MaintenanceInProgress`` (the node is
in maintenance), ``DrainInProgress`` (it is being drained) and ``Drained`` (its drain reached
the criteria chosen); each ``True`` while observed, set ``False`` or removed when not. Kubernetes
acts on none of them: they tell other tools and people. The begin sets the first, the drain the
other two, the end removes the three, each by a strategic merge patch of ``nodes/status``
(merged by ``type``, so the kubelet's own conditions are left alone).

An API server keeps any condition type on a Node whatever its version or gates, so whether
the server knows them cannot be read from a write: it is its version (1.37 or later) and the
gate (the ``kubernetes_feature_enabled`` metric of ``/metrics``). Where either says no, nothing
is written. Ours are told from another writer's by their message's prefix; only ours are
removed.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

GATE = "NodeLifecycleConditions"
FIRST = (1, 37)  # the first minor with the gate
MAINTENANCE = "MaintenanceInProgress"
DRAINING = "DrainInProgress"
DRAINED = "Drained"
TYPES = (MAINTENANCE, DRAINING, DRAINED)
REASON_MAINTENANCE = "MaintenanceWindow"
REASON_DRAINING = "DrainStarted"
REASON_DRAINED = "DrainCompleted"
PREFIX = "nmo.maintenance: "  # every message of ours begins so; another writer's are left alone
MAX_MESSAGE = 1024

_METRIC = re.compile(r'^kubernetes_feature_enabled\{([^}]*)\}\s+([0-9.eE+-]+)\s*$')


def gate_in_metrics(lines: Iterable[str]) -> Optional[bool]:
    """Whether ``/metrics`` says the gate is on; None when it does not name it."""
    for line in lines:
        found = _METRIC.match(line.strip())
        if found and f'name="{GATE}"' in found.group(1):
            try:
                return float(found.group(2)) == 1
            except ValueError:
                return None
    return None


def support(minor: Optional[Tuple[int, int]], gate: Optional[bool], metrics_error: str = "") -> Tuple[bool, str]:
    """(written?, why not) from the server's version and what ``/metrics`` said of the gate."""
    if minor is None:
        return False, "the API server's version could not be read"
    if minor < FIRST:
        return False, (f"Kubernetes {minor[0]}.{minor[1]} has no node lifecycle conditions "
                       f"(alpha from {FIRST[0]}.{FIRST[1]}, gate {GATE})")
    if metrics_error:
        return False, f"whether the API server's feature gate {GATE} is on cannot be read: {metrics_error}"
    if gate is None:
        return False, f"the API server does not name the feature gate {GATE} in its /metrics"
    if not gate:
        return False, f"the API server's feature gate {GATE} is off"
    return True, ""


# The begin's verdict, kept for the run on its run lease (workflows/run.py): the begins after
# the first read it there instead of reading /version and /metrics again.
SUPPORTED, UNSUPPORTED = "supported", "unsupported: "


def support_note(supported: bool, why_not: str) -> str:
    """The run lease annotation's value for a verdict of ``support``."""
    return SUPPORTED if supported else UNSUPPORTED + (why_not or "not said")


def support_of_note(note: Any) -> Optional[Tuple[bool, str]]:
    """The verdict a run lease annotation says; None when it says none (or garbage): read again."""
    if note == SUPPORTED:
        return True, ""
    if isinstance(note, str) and note.startswith(UNSUPPORTED) and len(note) > len(UNSUPPORTED):
        return False, note[len(UNSUPPORTED):]
    return None


def condition(kind: str, reason: str, message: str, now: str, status: str = "True") -> Dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": (PREFIX + message)[:MAX_MESSAGE],
            "lastTransitionTime": now, "lastHeartbeatTime": now}


def current(node: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The node's lifecycle conditions by type."""
    return {c.get("type", ""): c for c in (node.get("status") or {}).get("conditions") or []
            if isinstance(c, dict) and c.get("type") in TYPES}


def ours(node: Dict[str, Any]) -> List[str]:
    """The lifecycle condition types on the node that this collection wrote."""
    return [kind for kind, c in sorted(current(node).items()) if str(c.get("message") or "").startswith(PREFIX)]


def maintained(node: Dict[str, Any]) -> bool:
    """Whether the node carries our ``MaintenanceInProgress=True`` (the begin wrote it)."""
    c = current(node).get(MAINTENANCE) or {}
    return c.get("status") == "True" and MAINTENANCE in ours(node)


def patch(put: Iterable[Dict[str, Any]] = (), remove: Iterable[str] = ()) -> Dict[str, Any]:
    """A strategic merge patch of ``nodes/status``: conditions set (merged by type) and removed."""
    items = list(put) + [{"type": kind, "$patch": "delete"} for kind in remove]
    return {"status": {"conditions": items}}


def begin_message(reason: str, maintenance: str) -> str:
    text = f"in maintenance (NodeMaintenance {maintenance})"
    return text + (f": {reason}" if reason else "")


def drained_message(node: str, evicted: int, deleted: int, skipped: int) -> str:
    return f"drain of node {node} done: {evicted} evicted, {deleted} deleted, {skipped} skipped (left on the node)"
