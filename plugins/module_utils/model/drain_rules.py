"""Drain rules: which pods leave in which order batch, which stay, which are waited for to
complete, and which nothing may disrupt (docs/drain-rules.md, docs/design.md §4.7.7).

Pure: a rule list as the option gives it is checked and parsed once (``parse_rules``); a pod,
with the labels of its namespace when a rule needs them, gets one ``Verdict``. First the
pod's own label (``nmo.maintenance/drain``, or Cluster API's ``cluster.x-k8s.io/drain``):
``skip``, ``wait-completed``, ``drain`` or ``order-<n>`` (or the annotation of that key, where
``order=<n>`` fits too); then the first rule whose selectors
match; then the default, drained in order 0. A label value we cannot read is a verdict of its
own (``ERROR``), which the drain and the pre-flight turn into a per-pod refusal naming the pod.

``do_not_disrupt`` says whether a pod carries an annotation that forbids its eviction
(Karpenter's, or ours): such a pod is never evicted nor deleted by the drain, which waits for
it as for a PodDisruptionBudget that allows nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import InputError
from .selectors import Requirement, parse_selector

DRAIN, SKIP, WAIT_COMPLETED = "drain", "skip", "wait-completed"
ACTIONS = (DRAIN, SKIP, WAIT_COMPLETED)
ERROR = "error"  # a pod label value that is none of the above: the pod is refused, named
RULE_KEYS = ("name", "selector", "namespace_selector", "action", "order")
DRAIN_LABEL = "nmo.maintenance/drain"
CAPI_DRAIN_LABEL = "cluster.x-k8s.io/drain"  # Cluster API's; read after ours
LABELS = (DRAIN_LABEL, CAPI_DRAIN_LABEL)
DO_NOT_DISRUPT = ("karpenter.sh/do-not-disrupt", "nmo.maintenance/do-not-disrupt")
# int32, as Cluster API's MachineDrainRule order; far beyond any sensible batch number
ORDER_MIN, ORDER_MAX = -(2**31), 2**31 - 1
# order=<n> where a value may hold "=" (an annotation); order-<n> in a label, whose values
# may not ("order-10", "order--5")
_ORDER_VALUE = re.compile(r"order[=-](-?[0-9]{1,10})")


@dataclass(frozen=True)
class Rule:
    index: int
    action: str = DRAIN
    order: int = 0
    name: str = ""
    selector: str = ""
    namespace_selector: str = ""
    pod_requirements: Tuple[Requirement, ...] = ()
    namespace_requirements: Tuple[Requirement, ...] = ()

    @property
    def label(self) -> str:
        """How messages name it: ``rule 2 (storage-last)``, numbered from 1 as a reader counts."""
        return f"rule {self.index + 1}" + (f" ({self.name})" if self.name else "")

    def matches(self, labels: Mapping[str, str], namespace_labels: Optional[Mapping[str, str]]) -> bool:
        if not all(r.matches(dict(labels)) for r in self.pod_requirements):
            return False
        if not self.namespace_requirements:
            return True
        if namespace_labels is None:  # its namespace could not be read: the rule cannot match it
            return False
        return all(r.matches(dict(namespace_labels)) for r in self.namespace_requirements)


@dataclass(frozen=True)
class Verdict:
    action: str  # DRAIN, SKIP, WAIT_COMPLETED or ERROR
    order: int = 0
    source: str = ""  # "rule 1 (storage-last)", "label nmo.maintenance/drain=skip"; "" for the default

    def reason(self) -> str:
        """``skipped by rule 1 (x)``, ``wait-completed by label ...``, ``order 10 by rule 2``."""
        if self.action == ERROR:
            return self.source
        what = {SKIP: "skip", WAIT_COMPLETED: "wait-completed"}.get(self.action, f"order {self.order}")
        return f"{what} by {self.source}" if self.source else what


DEFAULT = Verdict(DRAIN, 0)


# -- the option ---------------------------------------------------------------------------------
def _selector(value: Any, where: str) -> Tuple[str, Tuple[Requirement, ...]]:
    if value is None or value == "":
        return "", ()
    if not isinstance(value, str):
        raise InputError(f"{where}: {value!r} must be a label selector string such as 'app=web,tier!=db' "
                         "or 'env in (a,b)'")
    try:
        return value, tuple(parse_selector(value))
    except InputError as exc:
        raise InputError(f"{where}: {value!r} is not a valid label selector: "
                         + exc.message.split(": ", 1)[-1]) from None


def _order(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"{where}: {value!r} must be a whole number (batches are drained lowest first)")
    if not ORDER_MIN <= value <= ORDER_MAX:
        raise InputError(f"{where}: {value} must be between {ORDER_MIN} and {ORDER_MAX}")
    return value


def parse_rule(index: int, value: Any, option: str = "rules") -> Rule:
    where = f"{option}[{index}]"
    if not isinstance(value, dict):
        raise InputError(f"{where}: {value!r} must be a dict with {', '.join(RULE_KEYS)}")
    problems: List[str] = []
    unknown = sorted(str(k) for k in value if k not in RULE_KEYS)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}; a rule has {', '.join(RULE_KEYS)}")
    action = value.get("action") if value.get("action") is not None else DRAIN
    if action not in ACTIONS:
        problems.append(f"{where}.action: {action!r} must be one of {', '.join(ACTIONS)}")
    order = 0
    try:
        order = _order(value.get("order") if value.get("order") is not None else 0, f"{where}.order")
    except InputError as exc:
        problems.append(exc.message)
    if action in (SKIP, WAIT_COMPLETED) and value.get("order") not in (None, 0):
        problems.append(f"{where}.order: only a rule with action drain has an order (its pods are not evicted)")
    name = value.get("name") if value.get("name") is not None else ""
    if not isinstance(name, str) or len(name) > 63:
        problems.append(f"{where}.name: {name!r} must be a short string (at most 63 characters)")
        name = ""
    parsed: Dict[str, Tuple[str, Tuple[Requirement, ...]]] = {}
    for key in ("selector", "namespace_selector"):
        try:
            parsed[key] = _selector(value.get(key), f"{where}.{key}")
        except InputError as exc:
            problems.append(exc.message)
            parsed[key] = ("", ())
    if problems:
        raise InputError("; ".join(problems))
    return Rule(index, action, order, name, parsed["selector"][0], parsed["namespace_selector"][0],
                parsed["selector"][1], parsed["namespace_selector"][1])


def parse_rules(value: Any, option: str = "rules") -> Tuple[Rule, ...]:
    """The rules as the option gives them (None or a list of dicts); InputError naming every problem."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise InputError(f"{option}: {value!r} must be a list of rules (dicts with {', '.join(RULE_KEYS)})")
    rules, problems = [], []
    for index, item in enumerate(value):
        try:
            rules.append(parse_rule(index, item, option))
        except InputError as exc:
            problems.append(exc.message)
    if problems:
        raise InputError("; ".join(problems))
    return tuple(rules)


def needs_namespaces(rules: Sequence[Rule]) -> bool:
    """Whether judging the rules needs the labels of the pods' namespaces (one read each)."""
    return any(rule.namespace_requirements for rule in rules)


# -- one pod ------------------------------------------------------------------------------------
def label_verdict(labels: Mapping[str, str], annotations: Optional[Mapping[str, str]] = None) -> Optional[Verdict]:
    """The pod's own say, when it has the label (or, for a value a label cannot hold, such as
    ``order=10``, the annotation of the same key): ours first, then Cluster API's."""
    said = [("label", key, labels[key]) for key in LABELS if key in labels]
    said += [("annotation", key, (annotations or {})[key]) for key in LABELS if key in (annotations or {})]
    for kind, key, raw in said[:1]:
        value = str(raw)
        source = f"{kind} {key}={value}"
        if value in (SKIP, WAIT_COMPLETED):
            return Verdict(value, 0, source)
        if value == DRAIN:
            return Verdict(DRAIN, 0, source)
        m = _ORDER_VALUE.fullmatch(value)
        if m and ORDER_MIN <= int(m.group(1)) <= ORDER_MAX:
            return Verdict(DRAIN, int(m.group(1)), source)
        return Verdict(ERROR, 0, f"{kind} {key}={value!r} is not one of skip, wait-completed, drain, order-<n> or "
                                 f"order=<n> (n a whole number): fix or remove the {kind}")
    return None


def has_say(pod: Dict[str, Any]) -> bool:
    """Whether the pod carries the drain label or annotation (else the rules alone decide)."""
    meta = pod.get("metadata", {})
    return any(key in (meta.get("labels") or {}) or key in (meta.get("annotations") or {}) for key in LABELS)


def judge(labels: Mapping[str, str], rules: Sequence[Rule],
          namespace_labels: Optional[Mapping[str, str]] = None,
          annotations: Optional[Mapping[str, str]] = None) -> Verdict:
    """The pod's label (or annotation), else the first rule that matches, else the default (drain, order 0)."""
    own = label_verdict(labels, annotations)
    if own is not None:
        return own
    for rule in rules:
        if rule.matches(labels, namespace_labels):
            return Verdict(rule.action, rule.order, rule.label)
    return DEFAULT


def do_not_disrupt(pod: Dict[str, Any]) -> Optional[str]:
    """``karpenter.sh/do-not-disrupt=true`` (or ours) when the pod carries it; else None."""
    annotations = pod.get("metadata", {}).get("annotations") or {}
    for key in DO_NOT_DISRUPT:
        if str(annotations.get(key, "")).lower() == "true":
            return f"{key}=true"
    return None


def blocked_message(key: str, annotation: str) -> str:
    """What the drain's lastError, progress and failure say about such a pod."""
    return (f"pod {key} is annotated {annotation}: never evicted, it blocks the drain as a PodDisruptionBudget "
            "that allows no disruption would; remove the annotation (or move the workload) to let it go")


# -- batches ---------------------------------------------------------------------------------------
def batch_text(orders: Sequence[int], current: int, pods: int) -> str:
    """``batch 2 of 3 (order 10): 4 pods``: the batch being drained, for status and progress."""
    ordered = sorted(set(orders) | {current})
    return f"batch {ordered.index(current) + 1} of {len(ordered)} (order {current}): {pods} pod(s)"
