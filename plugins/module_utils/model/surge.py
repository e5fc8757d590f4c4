"""Surge-first: when restarting a pod's Deployment frees a pod its budget keeps (docs/design.md §4.7.10).

A Deployment with a RollingUpdate strategy creates the new pod before it removes the old one
when its effective ``maxSurge`` is at least 1 and its effective ``maxUnavailable`` is 0: the
node is cordoned, so the new pod lands elsewhere, and the old one goes only once the new one
is Ready, so the budget is never broken. Restarting it (the pod template's
``kubectl.kubernetes.io/restartedAt`` annotation, as ``kubectl rollout restart`` does) is then
a way past a budget that allows 0 disruptions. Never for a Recreate Deployment, a StatefulSet,
a bare pod, a paused Deployment or one being rolled out already: those say why surge cannot help.

Pure functions of the objects; the drain and the pre-flight read them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .pod_filters import controller_of

Obj = Dict[str, Any]

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
DEFAULT_SURGE = "25%"  # Kubernetes' defaults for a RollingUpdate
DEFAULT_UNAVAILABLE = "25%"


@dataclass(frozen=True)
class Verdict:
    can: bool
    why: str  # what surge would do, or why it cannot help
    deployment: str = ""  # the Deployment's name (namespace of the pod)


def scaled(value: Any, replicas: int, round_up: bool) -> int:
    """An int-or-percent of ``replicas``: maxSurge rounds up, maxUnavailable down (as Kubernetes does)."""
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * replicas / 100
        return int(math.ceil(exact) if round_up else math.floor(exact))
    return int(value)


def owner_names(pod: Obj) -> Optional[Obj]:
    return controller_of(pod)


def rolling_out(deployment: Obj) -> Optional[str]:
    """Why the Deployment is being rolled out already (or None when it is settled)."""
    meta, spec, status = deployment.get("metadata", {}), deployment.get("spec", {}), deployment.get("status", {})
    replicas = int(spec.get("replicas", 1))
    if status.get("observedGeneration", 0) < meta.get("generation", 0):
        return "its controller has not seen its last change yet"
    if int(status.get("updatedReplicas", 0)) < replicas or int(status.get("replicas", 0)) > replicas:
        return (f"it is being rolled out already ({status.get('updatedReplicas', 0)} of {replicas} updated, "
                f"{status.get('replicas', 0)} pods)")
    return None


def judge(pod: Obj, replicaset: Optional[Obj], deployment: Optional[Obj]) -> Verdict:
    """Would restarting the pod's Deployment free it without breaking its budget?

    ``replicaset``: the pod's controller when it is a ReplicaSet (None otherwise or unread);
    ``deployment``: that ReplicaSet's controlling Deployment (None when it has none)."""
    ref = controller_of(pod)
    if ref is None:
        return Verdict(False, "surge cannot help: a bare pod (no controller) has nothing to make its replacement")
    kind = ref.get("kind", "")
    if kind == "StatefulSet":
        return Verdict(False, f"surge cannot help: StatefulSet {ref.get('name')} makes a pod's replacement only "
                              "after it is gone")
    if kind != "ReplicaSet":
        return Verdict(False, f"surge cannot help: its controller is a {kind or 'resource'} ({ref.get('name')}), "
                              "not a Deployment's ReplicaSet")
    if replicaset is None or deployment is None:
        return Verdict(False, f"surge cannot help: ReplicaSet {ref.get('name')} belongs to no Deployment")
    name = deployment.get("metadata", {}).get("name", "")
    spec = deployment.get("spec", {})
    strategy = spec.get("strategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return Verdict(False, f"surge cannot help: Deployment {name} uses the {strategy.get('type')} strategy, "
                              "which stops the old pods before it starts new ones", name)
    if spec.get("paused"):
        return Verdict(False, f"surge cannot help: Deployment {name} is paused", name)
    busy = rolling_out(deployment)
    if busy:
        return Verdict(False, f"surge cannot help now: Deployment {name}: {busy}", name)
    replicas = int(spec.get("replicas", 1))
    rolling = strategy.get("rollingUpdate") or {}
    surge_value = rolling.get("maxSurge", DEFAULT_SURGE)
    unavailable_value = rolling.get("maxUnavailable", DEFAULT_UNAVAILABLE)
    surge = scaled(surge_value, replicas, round_up=True)
    unavailable = scaled(unavailable_value, replicas, round_up=False)
    if surge < 1:
        return Verdict(False, f"surge cannot help: Deployment {name} has maxSurge {surge_value} "
                              f"({surge} of {replicas} replica(s)), so its rollout makes no pod before it stops one",
                       name)
    if unavailable > 0:
        return Verdict(False, f"surge cannot help: Deployment {name} has maxUnavailable {unavailable_value} "
                              f"({unavailable} of {replicas} replica(s)), so its rollout may stop the old pod before "
                              "the new one is Ready and break the budget", name)
    return Verdict(True, f"surge: Deployment {name} restarted (maxSurge {surge_value}: {surge} of {replicas}), its "
                         "new pod made elsewhere before the old one goes", name)


def restart_patch(now_iso: str) -> Obj:
    """The merge patch of ``kubectl rollout restart``: the pod template's restart annotation."""
    return {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: now_iso}}}}}


def unschedulable(pods: List[Obj], old_uid: str) -> Optional[str]:
    """Why the Deployment's new pod cannot be placed (Pending, PodScheduled False with reason
    Unschedulable), from its pods; None while none is stuck so."""
    for pod in pods:
        if pod.get("metadata", {}).get("uid") == old_uid or pod.get("metadata", {}).get("deletionTimestamp"):
            continue
        if pod.get("status", {}).get("phase") != "Pending":
            continue
        for cond in pod.get("status", {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and \
                    cond.get("reason") == "Unschedulable":
                return (f"its replacement {pod['metadata'].get('name')} cannot be scheduled: "
                        f"{cond.get('message') or 'Unschedulable'}")
    return None


def ready_replicas(deployment: Obj) -> str:
    status, spec = deployment.get("status", {}), deployment.get("spec", {})
    return f"{status.get('updatedReplicas', 0)} of {spec.get('replicas', 1)} updated, {status.get('readyReplicas', 0)} Ready"
