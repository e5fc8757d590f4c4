"""Pods that come back: replacements scheduled onto the node that is being drained.

A cordoned node carries ``node.kubernetes.io/unschedulable:NoSchedule`` and
``medik8s.io/drain:NoSchedule`` (model/taints.py). The scheduler places a pod there only
when its tolerations admit both; a workload that tolerates every taint
(``tolerations: [{operator: Exists}]``) does, and as the drained node is the emptiest one,
its replacements tend to land right back on it. Evicting them again helps only a few
times: the drain bounds it (``returning_pod_evictions``) and then fails naming them, and the
pre-flight names such workloads before the node is touched.

Pure functions, no I/O: the drain and the pre-flight feed them the pods they have read.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from .pod_filters import controller_of
from .taints import MAINTENANCE_TAINTS, Taint

Pod = Dict[str, Any]
Toleration = Dict[str, Any]

# The taints the scheduler must see tolerated to put a pod on a node under maintenance, in
# the order a message names them (the drain taint is the one medik8s adds, and the telling one).
SHOWN_ORDER: Tuple[Taint, ...] = (MAINTENANCE_TAINTS[1], MAINTENANCE_TAINTS[0])
NAMES_SHOWN = 5


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' rule (core/v1 Toleration.ToleratesTaint): an empty effect matches every
    effect; an empty key with Exists matches every key; Equal (the default) compares values."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        return operator == "Exists"
    if key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def toleration_text(toleration: Toleration) -> str:
    """``{operator: Exists}``, ``{key: medik8s.io/drain, operator: Exists, effect: NoSchedule}``."""
    parts = [f"{k}: {toleration[k]}" for k in ("key", "operator", "value", "effect", "tolerationSeconds")
             if toleration.get(k) not in (None, "")]
    return "{" + ", ".join(parts or ["operator: Equal"]) + "}"


def taint_text(taint: Taint) -> str:
    return f"{taint['key']}:{taint['effect']}"


def admitting(pod: Pod, taints: Iterable[Taint] = SHOWN_ORDER) -> Optional[List[Tuple[Taint, Toleration]]]:
    """For each of ``taints``, the first toleration of the pod that admits it; None when one
    of them is not tolerated (the scheduler keeps the pod off a node under maintenance)."""
    tolerations = pod.get("spec", {}).get("tolerations") or []
    found = []
    for taint in taints:
        match = next((t for t in tolerations if tolerates(t, taint)), None)
        if match is None:
            return None
        found.append((taint, match))
    return found


def letting_in(pod: Pod) -> Optional[str]:
    """``tolerates medik8s.io/drain:NoSchedule and node.kubernetes.io/unschedulable:NoSchedule
    via {operator: Exists}``, or None when the pod does not tolerate the maintenance taints."""
    found = admitting(pod)
    if found is None:
        return None
    by_toleration: Dict[str, List[str]] = {}
    for taint, toleration in found:
        by_toleration.setdefault(toleration_text(toleration), []).append(taint_text(taint))
    return "tolerates " + "; ".join(f"{' and '.join(taints)} via {text}" for text, taints in by_toleration.items())


def why_here(pod: Pod) -> str:
    """Why a pod is on the node although the drain began: the toleration that let it in."""
    tolerated = letting_in(pod)
    if tolerated:
        return tolerated
    return ("does not tolerate the maintenance taints: placed there directly (spec.nodeName set by its creator, "
            "not by the scheduler), or the node was not cordoned")


def may_come_back(pod: Pod) -> bool:
    """Evicting it makes its controller create a replacement that the scheduler may put back
    on the node under maintenance (it tolerates both maintenance taints)."""
    ref = controller_of(pod)
    return ref is not None and ref.get("kind") != "DaemonSet" and admitting(pod) is not None


def workload(pod: Pod) -> str:
    """What the returning pods are counted by: the controller (its replacements are new pods
    of new names), or the pod itself when it has none."""
    meta = pod.get("metadata", {})
    ref = controller_of(pod)
    if ref is not None:
        return f"{meta.get('namespace', '')}/{ref.get('kind', '')}/{ref.get('name', '')}"
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def names_text(keys: List[str], shown: int = NAMES_SHOWN) -> str:
    """``a, b, c and 4 more``."""
    more = len(keys) - shown
    return ", ".join(keys[:shown]) + (f" and {more} more" if more > 0 else "")


def came_back_message(node: str, limit: int, returned: Dict[str, List[Tuple[str, str]]]) -> str:
    """The drain's failure: per workload, how often its pods came back, the pods, and why."""
    parts = []
    for name, pods in sorted(returned.items()):
        reasons: Dict[str, List[str]] = {}
        for key, why in pods:
            reasons.setdefault(why, []).append(key)
        said = "; ".join(f"{names_text(keys)} {why}" for why, keys in reasons.items())
        parts.append(f"{name}: {len(pods)} pod(s) came back ({said})")
    return (f"pods keep coming back to node {node} (evicted again at most {limit} time(s) per workload, "
            f"returning_pod_evictions): " + "; ".join(parts) + ". Keep such workloads off the node "
            "(their tolerations admit the maintenance taints), or scale them down, then run again")
