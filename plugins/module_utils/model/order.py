"""The order in which a run takes its nodes (``node_maintenance_order``; docs/design.md §3.6).

* ``inventory``: as the inventory lists them.
* ``zone``: one topology domain after the other (the value of the node label ``key``,
  ``topology.kubernetes.io/zone`` by default), the domains in sorted order and the nodes
  without the label last; within a domain, the inventory's order.
* ``oldest``: the same domains, and within each the oldest node first (its
  ``creationTimestamp``; equal times keep the inventory's order), as OpenShift's
  machine-config operator takes a pool.
* ``interleave``: one node of each domain in turn (the domains sorted, the unlabelled nodes as
  one more domain, last in each round; within a domain, the inventory's order). A batch of
  ``serial`` nodes then spreads over the domains, which is what a per-domain budget needs to
  use its places: in ``zone`` order a batch is one zone's nodes, and all but the budget's few
  wait (concurrency 8, 4 zones of 2 places: 2.2 nodes out at once on the average, issue 41).
* ``auto`` (the role's default): ``interleave`` by the first budget with a ``topology_key``
  (its key) when the run has one, else ``inventory`` (``resolve``).

With ``serial`` the batches then follow the domains: a batch holds nodes of two domains
only where one domain ends (``zone``, ``oldest``), or of every domain (``interleave``). Pure:
the nodes' labels and creation times come in, names out.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import InputError
from . import validation

INVENTORY, ZONE, OLDEST, INTERLEAVE, AUTO = "inventory", "zone", "oldest", "interleave", "auto"
ORDERS = (INVENTORY, ZONE, OLDEST, INTERLEAVE, AUTO)
ZONE_KEY = "topology.kubernetes.io/zone"


def validate(order: object, key: object, option: str = "order", key_option: str = "order_key") -> None:
    if order not in ORDERS:
        raise InputError(f"{option}: {order!r} is not an order; give one of {', '.join(ORDERS)}")
    validation.qualified_name(key, key_option)


def resolve(order: str, key: str, budgets: Any = None) -> Tuple[str, str]:
    """The order and key a run takes its nodes in: ``auto`` becomes ``interleave`` by the first
    budget with a ``topology_key`` (a domain a value: the budget's places are per domain),
    else ``inventory``; any other order is kept, with its key."""
    if order != AUTO:
        return order, key
    for budget in budgets or []:
        if isinstance(budget, dict) and isinstance(budget.get("topology_key"), str) and budget["topology_key"]:
            return INTERLEAVE, budget["topology_key"]
    return INVENTORY, key


def domain_of(labels: Dict[str, str], key: str) -> Tuple[int, str]:
    """The sort key of a node's domain: labelled domains by name, then the unlabelled."""
    value = labels.get(key)
    return (0, value) if value is not None else (1, "")


def ordered(names: List[str], labels: Dict[str, Dict[str, str]], created: Dict[str, str], order: str = INVENTORY,
            key: str = ZONE_KEY) -> List[str]:
    """``names`` (the inventory's order, each once) in ``order``. A name missing from
    ``labels`` (no such node) counts as unlabelled and, for ``oldest``, as newest."""
    validate(order, key)
    unique = list(dict.fromkeys(names))
    if order in (INVENTORY, AUTO):  # auto unresolved: no budget said otherwise
        return unique
    position = {name: i for i, name in enumerate(unique)}
    if order == INTERLEAVE:
        by_domain: Dict[Tuple[int, str], List[str]] = {}
        for name in unique:
            by_domain.setdefault(domain_of(labels.get(name) or {}, key), []).append(name)
        queues = [by_domain[d] for d in sorted(by_domain)]
        return [q[i] for i in range(max((len(q) for q in queues), default=0)) for q in queues if i < len(q)]

    def sort_key(name: str) -> Tuple[Tuple[int, str], Optional[str], int]:
        when = created.get(name) or "~"  # '~' sorts after every RFC 3339 time: unknown is newest
        return domain_of(labels.get(name) or {}, key), (when if order == OLDEST else None) or "", position[name]

    return sorted(unique, key=sort_key)


def domains(names: List[str], labels: Dict[str, Dict[str, str]], key: str = ZONE_KEY) -> List[str]:
    """The domains of ``names`` in the order they are taken ("" for the unlabelled)."""
    seen = {domain_of(labels.get(name) or {}, key) for name in names}
    return [value for _rank, value in sorted(seen)]
