"""Which pods a drain acts on: small named filters, each giving its reason.

A filter looks at one pod and returns ``None`` (no opinion) or a ``Decision``: keep the
pod (with why), skip it (with why), or refuse it (an option guards it and is off; the
decision names that option). ``classify`` runs them in order and says what the drain does
with the pod: evict it, delete it, wait for it, skip it, or refuse the whole drain.
The preflight module reuses them, so both agree on every pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from .selectors import Requirement, parse_selector
from .times import parse_time

Pod = Dict[str, Any]

KEEP, SKIP, REFUSE = "keep", "skip", "refuse"
EVICT, DELETE, WAIT = "evict", "delete", "wait"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Decision:
    verdict: str  # KEEP, SKIP or REFUSE
    reason: str
    option: Optional[str] = None  # the drain option that allows a guarded pod


@dataclass(frozen=True)
class SelectionOptions:
    force: bool = True
    delete_emptydir_data: bool = True
    ignore_daemonsets: bool = True
    pod_selector: str = ""
    skip_wait_for_delete_timeout: int = 0
    disable_eviction: bool = False
    now: Optional[float] = None  # epoch seconds; for terminating pods (tests pin it)
    selector: Tuple[Requirement, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "selector", tuple(parse_selector(self.pod_selector)))

    @classmethod
    def of(cls, options: Any, now: Optional[float] = None) -> SelectionOptions:
        """The selection part of a drain's or a pre-flight's options (same names there)."""
        return cls(force=options.force, delete_emptydir_data=options.delete_emptydir_data,
                   ignore_daemonsets=options.ignore_daemonsets, pod_selector=options.pod_selector or "",
                   skip_wait_for_delete_timeout=options.skip_wait_for_delete_timeout,
                   disable_eviction=options.disable_eviction, now=now)


@dataclass(frozen=True)
class PodPlan:
    """What the drain does with one pod, and why."""
    namespace: str
    name: str
    uid: str
    action: str  # EVICT, DELETE, WAIT, SKIP or REFUSE
    reason: str
    options: Tuple[str, ...] = ()  # for REFUSE: the options that would allow the pod

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def brief(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"namespace": self.namespace, "name": self.name, "reason": self.reason}
        if self.options:
            out["options"] = list(self.options)
        return out


# -- facts about a pod -------------------------------------------------------------------
def controller_of(pod: Pod) -> Optional[Dict[str, Any]]:
    for ref in pod.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref
    return None


def is_finished(pod: Pod) -> bool:
    return pod.get("status", {}).get("phase") in FINISHED_PHASES


def has_emptydir(pod: Pod) -> bool:
    return any("emptyDir" in v for v in pod.get("spec", {}).get("volumes") or [])


def deletion_age(pod: Pod, now: Optional[float]) -> Optional[float]:
    """Seconds since the pod's deletionTimestamp (negative while its grace runs), or None."""
    stamp = pod.get("metadata", {}).get("deletionTimestamp")
    if not stamp:
        return None
    deleted = parse_time(stamp)
    if deleted is None:  # the API server writes none such; no age rather than a crash of the drain
        return None
    when = deleted.timestamp()
    return (now if now is not None else datetime.now(timezone.utc).timestamp()) - when


# -- the filters, in the order they apply ----------------------------------------------------
def mirror_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    if MIRROR_ANNOTATION in (pod.get("metadata", {}).get("annotations") or {}):
        return Decision(SKIP, "mirror pod of a static pod (the kubelet owns it)")
    return None


def selector_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    labels = pod.get("metadata", {}).get("labels") or {}
    if opts.selector and not all(r.matches(labels) for r in opts.selector):
        return Decision(SKIP, f"does not match pod_selector {opts.pod_selector!r}")
    return None


def terminating_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    age = deletion_age(pod, opts.now)
    if age is None:
        return None
    limit = opts.skip_wait_for_delete_timeout
    if limit > 0 and age > limit:
        return Decision(SKIP, f"terminating for {age:.0f} s, more than skip_wait_for_delete_timeout ({limit} s)")
    return Decision(KEEP, "already terminating: waited for")


def daemonset_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    ref = controller_of(pod)
    if not ref or ref.get("kind") != "DaemonSet" or is_finished(pod):
        return None
    if opts.ignore_daemonsets:
        return Decision(SKIP, f"managed by DaemonSet {ref.get('name')} (it would come back)")
    return Decision(REFUSE, f"managed by DaemonSet {ref.get('name')}", "ignore_daemonsets")


def local_storage_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    if not has_emptydir(pod) or is_finished(pod):
        return None
    if opts.delete_emptydir_data:
        return Decision(KEEP, "emptyDir data is lost")
    return Decision(REFUSE, "has emptyDir data that would be lost", "delete_emptydir_data")


def unreplicated_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    if controller_of(pod) is not None or is_finished(pod):
        return None
    if opts.force:
        return Decision(KEEP, "no controller: it will not be recreated")
    return Decision(REFUSE, "no controller would recreate it", "force")


def finished_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    # Evicted like the others (as kubectl drain does), so the drain needs no pod delete
    # permission: the API server never asks a PodDisruptionBudget about a finished pod and
    # deletes it at once.
    if is_finished(pod):
        how = "deleted" if opts.disable_eviction else "evicted (no PodDisruptionBudget counts it)"
        return Decision(KEEP, f"finished ({pod['status']['phase']}): {how}")
    return None


PodFilter = Callable[[Pod, SelectionOptions], Optional[Decision]]
# A terminating pod stops the chain (waited for): it is leaving anyway, no option guards it.
FILTERS: Tuple[PodFilter, ...] = (mirror_filter, selector_filter, daemonset_filter, terminating_filter,
                                  local_storage_filter, unreplicated_filter, finished_filter)


def classify(pod: Pod, opts: SelectionOptions) -> PodPlan:
    meta = pod.get("metadata", {})
    kept: List[Decision] = []
    refused: List[Decision] = []
    for pod_filter in FILTERS:
        decision = pod_filter(pod, opts)
        if decision is None:
            continue
        if decision.verdict == SKIP:
            return _plan(meta, SKIP, decision.reason)
        if pod_filter is terminating_filter:
            return _plan(meta, WAIT, decision.reason)
        (refused if decision.verdict == REFUSE else kept).append(decision)
    if refused:
        return _plan(meta, REFUSE, "; ".join(d.reason for d in refused),
                     tuple(d.option for d in refused if d.option))
    if is_finished(pod):
        return _plan(meta, DELETE if opts.disable_eviction else EVICT, "; ".join(d.reason for d in kept))
    if opts.disable_eviction:
        return _plan(meta, DELETE, "; ".join([d.reason for d in kept] + ["disable_eviction: deleted"]))
    ref = controller_of(pod)
    owner = [f"managed by {ref.get('kind')} {ref.get('name')}"] if ref else []
    return _plan(meta, EVICT, "; ".join(owner + [d.reason for d in kept]))


def _plan(meta: Dict[str, Any], action: str, reason: str, options: Tuple[str, ...] = ()) -> PodPlan:
    return PodPlan(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""), action, reason, options)


def refusal_message(node: str, refused: List[PodPlan]) -> str:
    """One message naming every refused pod and the option that would allow it."""
    lines = [f"{p.key}: {p.reason} (allow with {' and '.join(o + '=true' for o in p.options)})" for p in refused]
    return (f"cannot drain node {node}: {len(refused)} pod(s) are guarded by drain options that are off; "
            "nothing was evicted. " + "; ".join(lines))
