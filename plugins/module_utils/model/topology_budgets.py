"""Topology budgets: at most so many nodes of a pool, of each zone or rack, or of the control
plane in maintenance at once, across every run (docs/design.md §5.6).

A budget is ``{selector: <node label selector>, max: <count or "N%">}`` (one domain: the nodes
the selector matches) or ``{topology_key: <label key>, max: ...}`` (one domain per value of the
label; a node without the label is under no domain of it). The control plane is a budget of
its own, built in: the nodes labelled ``node-role.kubernetes.io/control-plane`` (or ``master``),
at most ``control_plane_concurrency`` (1) at once. The global ``concurrency`` stays: the slots
``<prefix>-<i>`` are the one budget every node falls under.

Each domain's places are maintenance slots of their own family, ``<family>-<i>``, with the
slots' rules (model/leases.py): an index below the domain's limit is taken by a create or a
guarded update of an expired one, so two runs never hold one index, and every valid place
counts, also one taken beyond our limit by a run that allowed more. The family is named from
the budget and the domain value, never from ``max`` (two runs with different limits share
it): ``<prefix>-<slug>-<hash>``, the slug readable, the hash telling apart what the slug
cannot (a label value is not always a valid name). The control plane's is ``<prefix>-control-plane``.

The limit of a domain: ``max``, or ``ceil(nodes in the domain x N / 100)``; Karpenter's
arithmetic, where a node already disrupted counts: a node of the domain that is NotReady or
cordoned (by anyone: a quarantine, a failure kept, an administrator), holds a maintenance slot
or place of ours (any run, any budget), or (operator mode) has a NodeMaintenance, and holds no
place of this family, takes one of the limit's places (the lowest
indexes stay free for it: a node takes an index below ``limit - disrupted``).

Pure: the budgets as given come in, the families, limits and names go out.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from ..errors import InputError
from . import validation
from .marks import is_control_plane, is_ready
from .selectors import Requirement, parse_selector

KEYS = ("selector", "topology_key", "max")
OPTION = "budgets"
CONTROL_PLANE_OPTION = "control_plane_concurrency"
CONTROL_PLANE_FAMILY = "control-plane"
_SLUG = re.compile(r"[^a-z0-9]+")
SLUG_MAX = 24
HASH_LEN = 8


@dataclass(frozen=True)
class Budget:
    index: int  # its place in the list; -1: the control plane's, built in
    selector: Optional[str] = None
    topology_key: Optional[str] = None
    count: Optional[int] = None
    percent: Optional[int] = None

    @property
    def builtin(self) -> bool:
        return self.index < 0

    @property
    def limit_text(self) -> str:
        return f"{self.percent}%" if self.percent is not None else str(self.count)

    def describe(self) -> str:
        """``budgets[0] (topology.kubernetes.io/zone, max 1 a domain)``, for messages."""
        if self.builtin:
            return f"the control-plane budget (max {self.count}, {CONTROL_PLANE_OPTION})"
        if self.topology_key is not None:
            return f"{OPTION}[{self.index}] (topology_key {self.topology_key}, max {self.limit_text} a domain)"
        return f"{OPTION}[{self.index}] (selector {self.selector!r}, max {self.limit_text})"

    def requirements(self) -> List[Requirement]:
        return parse_selector(self.selector) if self.selector else []

    def domain_of(self, labels: Dict[str, str]) -> Optional[str]:
        """The domain value a node of these labels falls under ('' for a selector budget);
        None when it falls under none."""
        if self.builtin:
            return "" if is_control_plane({"metadata": {"labels": labels}}) else None
        if self.topology_key is not None:
            return labels.get(self.topology_key)
        return "" if all(req.matches(labels) for req in self.requirements()) else None

    def list_selector(self) -> str:
        """The label selector that lists the nodes this budget may cover (a superset for the
        control plane, whose two labels one selector cannot say: '' lists every node)."""
        if self.builtin:
            return ""
        return self.topology_key if self.topology_key is not None else (self.selector or "")


@dataclass(frozen=True)
class Domain:
    """A budget's domain a node falls under, and the family of slot leases counting it."""

    budget: Budget
    value: str
    family: str

    def describe(self) -> str:
        text = self.budget.describe()
        return f"{text}, domain {self.budget.topology_key}={self.value}" if self.budget.topology_key else text

    @property
    def needs_nodes(self) -> bool:
        """Its limit or its disrupted count needs the node list (not the control plane's: its
        limit is a count, and the etcd guard judges the members that are down)."""
        return not self.budget.builtin


def _max(value: Any, option: str) -> Tuple[Optional[int], Optional[int]]:
    """(count, percent) of a budget's ``max``: a whole number from 1, or "N%" from 1 to 100."""
    if isinstance(value, str) and value.strip().endswith("%"):
        digits = value.strip()[:-1].strip()
        if not digits.isdigit() or not 1 <= int(digits) <= 100:
            raise InputError(f"{option}: {value!r} is not a percentage of the nodes from 1% to 100%: give a whole "
                             "number of nodes (1 or more) or a percentage such as '25%'")
        return None, int(digits)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise InputError(f"{option}: {value!r} must be a whole number of nodes (1 or more) or a percentage "
                             "such as '25%'")
    if not 1 <= value <= validation.MAX_CONCURRENCY:
        why = " (a budget of 0 would never let a node go: leave the node out instead)" if value == 0 else ""
        raise InputError(f"{option}: {value!r} must be between 1 and {validation.MAX_CONCURRENCY} nodes{why}")
    return value, None


def parse(budgets: Any, control_plane_concurrency: Any = 1, option: str = OPTION,
          cp_option: str = CONTROL_PLANE_OPTION) -> List[Budget]:
    """The budgets as given, checked (InputError naming the entry and key), the control plane's
    last. Nothing is read or written: a bad budget is refused before the first request."""
    cp = control_plane_concurrency
    if isinstance(cp, str) and cp.strip().isdigit():
        cp = int(cp.strip())
    validation.number(cp, cp_option, 1, validation.MAX_CONCURRENCY, "nodes", integer=True)
    found: List[Budget] = []
    if budgets is None:
        budgets = []
    if not isinstance(budgets, (list, tuple)):
        raise InputError(f"{option}: {budgets!r} must be a list of budgets, each {{selector: ..., max: ...}} or "
                         "{topology_key: ..., max: ...}")
    for i, entry in enumerate(budgets):
        where = f"{option}[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where}: {entry!r} must be a dict with selector or topology_key, and max")
        unknown = sorted(str(k) for k in entry if k not in KEYS)
        if unknown:
            raise InputError(f"{where}: unknown key(s) {', '.join(unknown)}: a budget takes {', '.join(KEYS)}")
        selector, key = entry.get("selector"), entry.get("topology_key")
        if (selector is None) == (key is None):
            raise InputError(f"{where}: give exactly one of selector (one pool of nodes) or topology_key (one "
                             "domain per value of the label)")
        if "max" not in entry or entry["max"] is None:
            raise InputError(f"{where}.max: missing: how many nodes of the budget may be in maintenance at once")
        count, percent = _max(entry["max"], f"{where}.max")
        if selector is not None:
            validation.label_selector(selector, f"{where}.selector")
        else:
            validation.qualified_name(key, f"{where}.topology_key", "label key")
        found.append(Budget(i, selector=selector, topology_key=key, count=count, percent=percent))
    found.append(Budget(-1, count=int(cp)))
    return found


def slug(text: str) -> str:
    return _SLUG.sub("-", text.lower()).strip("-")[:SLUG_MAX].strip("-")


def family(prefix: str, budget: Budget, value: str) -> str:
    """The slot-lease family of one domain: ``<prefix>-<slug>-<hash>`` (its leases add ``-<i>``)."""
    if budget.builtin:
        return f"{prefix}-{CONTROL_PLANE_FAMILY}"
    what = f"topology\0{budget.topology_key}\0{value}" if budget.topology_key is not None \
        else f"selector\0{','.join(sorted(t.strip() for t in (budget.selector or '').split(',') if t.strip()))}"
    digest = hashlib.sha256(what.encode()).hexdigest()[:HASH_LEN]
    readable = slug(value) if budget.topology_key is not None else "pool"
    return f"{prefix}-{readable or 'domain'}-{digest}"


def domains(budgets: Sequence[Budget], labels: Dict[str, str], prefix: str) -> List[Domain]:
    """The domains a node of ``labels`` falls under, in the one order every run takes them
    (by family name, so two runs never wait on each other's half), one per family."""
    found: Dict[str, Domain] = {}
    for budget in budgets:
        value = budget.domain_of(labels)
        if value is None:
            continue
        name = family(prefix, budget, value)
        found.setdefault(name, Domain(budget, value, name))
    return [found[name] for name in sorted(found)]


def members(domain: Domain, nodes: Iterable[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [n for n in nodes if domain.budget.domain_of(n.get("metadata", {}).get("labels") or {}) == domain.value]


def limit(domain: Domain, total: int) -> int:
    """How many nodes of the domain may be disrupted at once: the count, or roundup(total x %)."""
    budget = domain.budget
    if budget.percent is None:
        return int(budget.count or 1)
    return max(1, math.ceil(total * budget.percent / 100))


def out_of_service(node: Dict[str, Any]) -> bool:
    """Whether a node gives its domain no capacity, whoever made it so: NotReady, or cordoned
    (``spec.unschedulable``: a maintenance, a quarantine, a failure kept, an administrator's
    cordon). The capacity a budget promises the domain's workloads is lost either way."""
    return bool((node.get("spec") or {}).get("unschedulable")) or not is_ready(node)


def disrupted(domain_nodes: Iterable[Dict[str, Any]], node: str, placed: Set[str], busy: Set[str]) -> List[str]:
    """The other nodes of the domain already disrupted without a place of its family: out of
    service (NotReady or cordoned, by anyone), or in ``busy`` (holding a slot or place of ours,
    or NMO maintaining them). ``placed``: the holders of the family's valid places."""
    out = []
    for n in domain_nodes:
        name = n.get("metadata", {}).get("name", "")
        if name == node or name in placed:
            continue
        if name in busy or out_of_service(n):
            out.append(name)
    return sorted(out)


def validate_names(prefix: str, budgets: Sequence[Budget]) -> None:
    """Every family name the budgets can make is a valid Lease name with its largest index."""
    longest = f"{prefix}-{'x' * SLUG_MAX}-{'0' * HASH_LEN}-{validation.MAX_CONCURRENCY - 1}"
    if any(not b.builtin for b in budgets):
        validation.derived_name(longest, "slot_prefix", prefix)
