"""Which pods a drain acts on: small named filters, each giving its reason.

A filter looks at one pod and returns ``None`` (no opinion) or a ``Decision``: keep the
pod (with why), skip it (with why), or refuse it (an option guards it and is off; the
decision names that option). ``classify`` runs them in order and says what the drain does
with the pod: evict it, delete it, wait for it, skip it, or refuse the whole drain.
The preflight module reuses them, so both agree on every pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import drain_rules
from .drain_rules import Rule
from .drain_spec import PodSelection
from .selectors import Requirement, parse_selector
from .times import parse_time

Pod = Dict[str, Any]

KEEP, SKIP, REFUSE = "keep", "skip", "refuse"
EVICT, DELETE, WAIT = "evict", "delete", "wait"
COMPLETE = "complete"  # wait-completed (drain rules): not evicted, waited for until it finishes
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Decision:
    verdict: str  # KEEP, SKIP or REFUSE
    reason: str
    option: Optional[str] = None  # the drain option that allows a guarded pod


@dataclass(frozen=True)
class SelectionOptions(PodSelection):
    """The drain options that sort the pods (drain_spec.PodSelection, their fields and
    defaults), with what the filters need beside them."""
    now: Optional[float] = None  # epoch seconds; for terminating pods (tests pin it)
    selector: Tuple[Requirement, ...] = field(default=(), compare=False)
    rules: Tuple[Rule, ...] = ()  # the drain rules, parsed (model/drain_rules.py)
    # namespace -> its labels, read only when a rule has a namespace_selector (None: not read)
    namespace_labels: Optional[Dict[str, Dict[str, str]]] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pod_selector", self.pod_selector or "")  # unset: every pod
        object.__setattr__(self, "selector", tuple(parse_selector(self.pod_selector, "pod_selector")))

    @classmethod
    def of(cls, options: Any, now: Optional[float] = None) -> SelectionOptions:
        """The selection part of a drain's or a pre-flight's options (drain_spec.PodSelection's fields there)."""
        return cls(**{f.name: getattr(options, f.name) for f in fields(PodSelection)}, now=now,
                   rules=drain_rules.parse_rules(getattr(options, "rules", None)))

    def needs_namespaces(self) -> bool:
        return drain_rules.needs_namespaces(self.rules)


@dataclass(frozen=True)
class PodPlan:
    """What the drain does with one pod, and why."""
    namespace: str
    name: str
    uid: str
    action: str  # EVICT, DELETE, WAIT, COMPLETE, SKIP or REFUSE
    reason: str
    options: Tuple[str, ...] = ()  # for REFUSE: the options that would allow the pod
    order: int = 0  # its order batch (drain rules): lowest first
    blocked: str = ""  # EVICT/DELETE: the do-not-disrupt annotation that forbids it ("" when none)
    rule: str = ""  # the rule or label that decided it ("" for the default)

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


def rule_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    """A drain rule or the pod's drain label: skip, wait for it to complete, or refuse a bad label.
    ``drain`` (with its order) has no say here: the other filters decide how it goes."""
    if not opts.rules and not drain_rules.has_say(pod):
        return None
    verdict = rule_verdict(pod, opts)
    if verdict.action == drain_rules.SKIP:
        return Decision(SKIP, f"skipped by {verdict.source}: it stays on the node")
    if verdict.action == drain_rules.ERROR:
        return Decision(REFUSE, verdict.source)
    if verdict.action == drain_rules.WAIT_COMPLETED:
        if is_finished(pod):
            return Decision(SKIP, f"wait-completed by {verdict.source}: already finished ({pod['status']['phase']})")
        return Decision(KEEP, f"wait-completed by {verdict.source}: not evicted, waited for until it finishes")
    return None


def rule_verdict(pod: Pod, opts: SelectionOptions) -> drain_rules.Verdict:
    if not opts.rules and not drain_rules.has_say(pod):
        return drain_rules.DEFAULT
    meta = pod.get("metadata", {})
    namespaces = opts.namespace_labels or {}
    return drain_rules.judge(meta.get("labels") or {}, opts.rules, namespaces.get(meta.get("namespace", "")),
                             meta.get("annotations") or {})


def lets_terminating_go(opts: PodSelection) -> bool:
    """Whether the drain stops waiting for a pod still terminating after a while
    (skip_wait_for_delete_timeout above 0), so that it goes on without a kubelet to finish the
    pods: the readiness rule of the pre-flight and the begin (marks.not_ready), which refuse a
    node without its kubelet otherwise. The option may be as given (the role's, -e gives a
    string); one that is not a number lets nothing go (the drain's own check names it)."""
    try:
        return int(float(opts.skip_wait_for_delete_timeout or 0)) != 0
    except (TypeError, ValueError):
        return False


def letting_go(opts: PodSelection) -> str:
    """The option that lets a terminating pod go, with its value, as the messages quote it."""
    return f"skip_wait_for_delete_timeout ({opts.skip_wait_for_delete_timeout} s)"


def terminating_filter(pod: Pod, opts: SelectionOptions) -> Optional[Decision]:
    age = deletion_age(pod, opts.now)
    if age is None:
        return None
    limit = opts.skip_wait_for_delete_timeout
    if limit > 0 and age > limit:
        return Decision(SKIP, f"terminating for {age:.0f} s, more than {letting_go(opts)}")
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
# A rule's skip or wait-completed stops it too (the pod is not evicted, whatever guards it).
FILTERS: Tuple[PodFilter, ...] = (mirror_filter, selector_filter, rule_filter, daemonset_filter, terminating_filter,
                                  local_storage_filter, unreplicated_filter, finished_filter)


def classify(pod: Pod, opts: SelectionOptions) -> PodPlan:
    plan = _classify(pod, opts)
    if plan.action not in (EVICT, DELETE, WAIT):
        return plan
    # the order batch of a pod the drain acts on, and whether an annotation forbids disrupting it
    verdict = rule_verdict(pod, opts)
    blocked = drain_rules.do_not_disrupt(pod) if plan.action != WAIT and not is_finished(pod) else None
    if verdict.order == 0 and not verdict.source and blocked is None:
        return plan  # no rule, no label, no annotation: the plan as it always was
    reason = plan.reason
    if verdict.source:
        reason += f"; {verdict.reason()}"
    if blocked:
        reason += f"; annotated {blocked}: never evicted"
    return PodPlan(plan.namespace, plan.name, plan.uid, plan.action, reason, plan.options, verdict.order,
                   blocked or "", verdict.source)


def _classify(pod: Pod, opts: SelectionOptions) -> PodPlan:
    meta = pod.get("metadata", {})
    kept: List[Decision] = []
    refused: List[Decision] = []
    for pod_filter in FILTERS:
        decision = pod_filter(pod, opts)
        if decision is None:
            continue
        if decision.verdict == SKIP:
            return _plan(meta, SKIP, decision.reason, rule=rule_verdict(pod, opts).source
                         if pod_filter is rule_filter else "")
        if pod_filter is terminating_filter:
            return _plan(meta, WAIT, decision.reason)
        if pod_filter is rule_filter and decision.verdict == KEEP:  # wait-completed
            return _plan(meta, COMPLETE, decision.reason, rule=rule_verdict(pod, opts).source)
        if pod_filter is rule_filter:  # a label value we cannot read: this pod alone is refused
            return _plan(meta, REFUSE, decision.reason)
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


def _plan(meta: Dict[str, Any], action: str, reason: str, options: Tuple[str, ...] = (), rule: str = "") -> PodPlan:
    return PodPlan(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""), action, reason, options,
                   rule=rule)


def refusal_message(node: str, refused: List[PodPlan]) -> str:
    """One message naming every refused pod and the option that would allow it (or, for a
    drain label that cannot be read, what to fix)."""
    lines = [f"{p.key}: {p.reason}" + (f" (allow with {' and '.join(o + '=true' for o in p.options)})"
                                       if p.options else "") for p in refused]
    guarded = ("are guarded by drain options that are off" if all(p.options for p in refused)
               else "cannot be drained as they are")
    return f"cannot drain node {node}: {len(refused)} pod(s) {guarded}; nothing was evicted. " + "; ".join(lines)
