"""Pods that do not leave, named: why a pod the drain waits for is still there.

Three holds the drain cannot lift by retrying, each said in the operator's words
(docs/design.md §4.7.9):

- a finalizer: the pod is being deleted, its grace period is over (or its containers
  stopped), and it stays until whoever owns the finalizer removes it;
- a node without its kubelet (NotReady or unreachable): nobody stops the containers, so a
  deleted pod stays Terminating; the drain's option to stop waiting lets it go on;
- a budget that allows 0 disruptions because some of its pods are not Ready: the default
  ``unhealthyPodEvictionPolicy`` (IfHealthyBudget) waits for them; ``AlwaysAllow`` lets a
  pod that is not Ready be evicted.

Pure functions of the objects (time comes in as epoch seconds), so the drain, the
pre-flight and their unit tests say the same.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

from .drain_spec import SKIP_WAIT_OPTION
from .pod_filters import deletion_age, is_finished

Obj = Dict[str, Any]

ALWAYS_ALLOW = "AlwaysAllow"
# Finalizers Kubernetes' own controllers remove by themselves (the Job controller's, say):
# not worth a pre-flight warning before the eviction.
SYSTEM_FINALIZER = re.compile(r"^([a-z0-9.-]+\.)?(kubernetes\.io|k8s\.io)/")
_BUDGET_NAMED = re.compile(r"disruption budget (\S+) needs")


def finalizers(pod: Obj) -> List[str]:
    return [str(f) for f in pod.get("metadata", {}).get("finalizers") or []]


def own_finalizers(pod: Obj) -> List[str]:
    """The finalizers of the pod that no Kubernetes controller removes by itself."""
    return [f for f in finalizers(pod) if not SYSTEM_FINALIZER.match(f)]


def is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def containers_stopped(pod: Obj) -> bool:
    """Finished, or every container it reports terminated (the kubelet did its part)."""
    if is_finished(pod):
        return True
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("terminated" in (s.get("state") or {}) for s in statuses)


def finalizer_text(names: List[str]) -> str:
    return ("finalizer " if len(names) == 1 else "finalizers ") + ", ".join(names)


def held(pod: Optional[Obj], node: str, node_state: Optional[str], now: float) -> str:
    """Why a pod being deleted is still there, when it is for a reason retrying cannot fix;
    "" while it is simply on its way out (or not being deleted at all).

    ``node_state``: the node's ``marks.not_ready`` (None when it is Ready)."""
    if pod is None:
        return ""
    age = deletion_age(pod, now)
    if age is None:
        return ""
    names = finalizers(pod)
    if node_state is not None:
        text = (f"terminating on node {node}, which is {node_state}: the kubelet is not there to finish it "
                f"({SKIP_WAIT_OPTION} lets the drain go on without it)")
        return text + (f"; also held by {finalizer_text(names)}" if names else "")
    if names and (age >= 0 or containers_stopped(pod)):
        return (f"held by {finalizer_text(names)}: its containers are stopped or its grace period is over, and it "
                "stays until that finalizer is removed (by its controller, or by hand)")
    return ""


def budget_named(message: str) -> Optional[str]:
    """The budget an eviction's refusal names (``The disruption budget app needs 2 healthy ...``)."""
    found = _BUDGET_NAMED.search(message)
    return found.group(1) if found else None


def unhealthy_budget(pdb: Obj, pod_ready: bool) -> str:
    """Why ``pdb`` allows 0 disruptions when it is because some of its pods are not Ready
    (``N of M not Ready``), with what ``unhealthyPodEvictionPolicy`` could do for the pod
    (``pod_ready``: the refused pod is Ready); "" when that is not the reason."""
    status, spec = pdb.get("status") or {}, pdb.get("spec") or {}
    allowed, expected, healthy = (status.get(k) for k in ("disruptionsAllowed", "expectedPods", "currentHealthy"))
    if allowed != 0 or not isinstance(expected, int) or not isinstance(healthy, int) or healthy >= expected:
        return ""
    meta = pdb.get("metadata") or {}
    name = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    text = (f"PDB {name} allows 0 disruptions because {expected - healthy} of {expected} pod(s) are not Ready "
            f"(it needs {status.get('desiredHealthy', '?')} healthy, {healthy} are)")
    if spec.get("unhealthyPodEvictionPolicy") == ALWAYS_ALLOW:
        return text + f"; its unhealthyPodEvictionPolicy is {ALWAYS_ALLOW}, so this Ready pod waits for them"
    if not pod_ready:
        return (text + "; this pod is one of them: unhealthyPodEvictionPolicy: AlwaysAllow on the budget would let "
                "it be evicted")
    return (text + "; this pod is Ready and waits until they are (unhealthyPodEvictionPolicy: AlwaysAllow would let "
            "the not-Ready ones go, not this one)")
