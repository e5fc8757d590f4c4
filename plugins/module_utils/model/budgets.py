"""PodDisruptionBudgets: which ones guard a pod, and which can never allow an eviction.

A budget that refuses an eviction now may allow it later, once a replica is healthy again:
the drain waits for that (transient). Some never will without outside help: a
``minAvailable`` as large as the number of pods it selects (docs/design.md §12.3: a VM alone behind
``minAvailable: 1``), a ``maxUnavailable`` of 0, a percentage that rounds to no disruption,
or a budget the disruption controller cannot compute. Those are blockers: the drain would
wait until its timeout with the node already cordoned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from .pod_filters import is_finished
from .selectors import Requirement

Obj = Dict[str, Any]
_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!exists"}


def requirements(selector: Optional[Obj]) -> Optional[List[Requirement]]:
    """A LabelSelector as requirements; None (no selector) selects nothing, {} everything."""
    if selector is None:
        return None
    reqs = [Requirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op = _OPERATORS.get(expr.get("operator", ""))
        if op is None:
            return None  # an operator we do not know: claim nothing rather than guess
        reqs.append(Requirement(expr.get("key", ""), op, tuple(expr.get("values") or ())))
    return reqs


def selects(pdb: Obj, pod: Obj) -> bool:
    if pdb["metadata"].get("namespace") != pod["metadata"].get("namespace"):
        return False
    reqs = requirements(pdb.get("spec", {}).get("selector"))
    labels = pod["metadata"].get("labels") or {}
    return reqs is not None and all(r.matches(labels) for r in reqs)


def key(pdb: Obj) -> str:
    return f"{pdb['metadata'].get('namespace', '')}/{pdb['metadata']['name']}"


def budget_text(pdb: Obj) -> str:
    spec = pdb.get("spec", {})
    if spec.get("maxUnavailable") is not None:
        return f"maxUnavailable {spec['maxUnavailable']}"
    return f"minAvailable {spec.get('minAvailable', 1)}"


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent against ``total``, rounded up as the disruption controller does."""
    if isinstance(value, str) and value.endswith("%"):
        return int(math.ceil(int(value[:-1]) * total / 100))
    return int(value)


def _sync_failure(pdb: Obj) -> Optional[str]:
    for cond in pdb.get("status", {}).get("conditions") or []:
        if cond.get("type") == "DisruptionAllowed" and cond.get("reason") == "SyncFailed":
            return cond.get("message") or "sync failed"
    return None


def never_allows(pdb: Obj, selected: int) -> Optional[str]:
    """Why ``pdb`` allows no eviction even with every pod it selects healthy; None if it can.

    ``selected``: the pods it selects now; the controller's ``expectedPods`` (the scale of
    the pods' controllers) is used when it has computed one."""
    failure = _sync_failure(pdb)
    if failure:
        return f"the disruption controller cannot compute it ({failure})"
    spec, status = pdb.get("spec", {}), pdb.get("status", {})
    observed = status.get("observedGeneration") == pdb["metadata"].get("generation")
    expected = int(status["expectedPods"]) if observed and status.get("expectedPods") is not None else selected
    if spec.get("maxUnavailable") is not None:
        if _scaled(spec["maxUnavailable"], expected) <= 0:
            return f"maxUnavailable {spec['maxUnavailable']} of {expected} pod(s) allows no disruption"
        return None
    minimum = spec.get("minAvailable", 1)
    if _scaled(minimum, expected) >= expected:
        return (f"minAvailable {minimum} with {expected} pod(s) selected lets none go "
                "(move the workload away first, add replicas or relax the budget)")
    return None


@dataclass(frozen=True)
class BudgetView:
    """One budget as a pre-flight reports it."""
    namespace: str
    name: str
    budget: str
    selected: int
    disruptions_allowed: Optional[int]
    never: Optional[str]

    def brief(self) -> Dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "budget": self.budget, "selected_pods": self.selected,
                "disruptions_allowed": self.disruptions_allowed, "never_allows": bool(self.never),
                "why": self.never or ""}


def view(pdb: Obj, pods_in_namespace: List[Obj]) -> BudgetView:
    selected = sum(1 for p in pods_in_namespace if not is_finished(p) and selects(pdb, p))
    allowed = pdb.get("status", {}).get("disruptionsAllowed")
    meta = pdb["metadata"]
    return BudgetView(meta.get("namespace", ""), meta["name"], budget_text(pdb), selected,
                      None if allowed is None else int(allowed), never_allows(pdb, selected))


class Budgets:
    """All budgets of the cluster, listed once, with the pods they select."""

    def __init__(self, pdbs: List[Obj], pods: List[Obj]) -> None:
        self.by_namespace: Dict[str, List[Obj]] = {}
        for pdb in pdbs:
            self.by_namespace.setdefault(pdb["metadata"].get("namespace", ""), []).append(pdb)
        self.pods_by_namespace: Dict[str, List[Obj]] = {}
        for pod in pods:
            self.pods_by_namespace.setdefault(pod["metadata"].get("namespace", ""), []).append(pod)
        self._views: Dict[str, BudgetView] = {}

    def guarding(self, pod: Obj) -> List[Obj]:
        return [b for b in self.by_namespace.get(pod["metadata"].get("namespace", ""), []) if selects(b, pod)]

    def view(self, pdb: Obj) -> BudgetView:
        k = key(pdb)
        if k not in self._views:
            self._views[k] = view(pdb, self.pods_by_namespace.get(pdb["metadata"].get("namespace", ""), []))
        return self._views[k]
