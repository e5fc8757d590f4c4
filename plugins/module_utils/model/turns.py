"""Whose turn it is: the nodes of a run take free places in the run's order (docs/design.md §18.7).

Above concurrency 1 several nodes of a run wait for places at once, and a place that frees
wakes them all: who took it was whoever's create reached the API server first, and a node
that got its Ansible worker late (host_pinned, forks below the batch) could overtake nodes
that had been waiting for a long time. The run's order (``node_maintenance_order``: the
inventory's, auto's interleaved zones, resumed nodes first) said nothing about it.

Each node of a run above concurrency 1 gets its turn, its position in the run's order, on the
NodeMaintenance its begin makes (``TURN_ANNOTATION``). A node that could take its places first
asks whether a node of the same run earlier in the order is waiting for a place it would take
(``ahead``), and gives way (``yields_to``) when, the earlier waiters served first in their
order, one of its places would be gone. The rule is greedy by place family: an earlier node
that cannot go anyway (its own zone is full, it waits for something else than a place) takes
nothing from a later one, so the budget's capacity is never left unused for the order's sake.

Pure: what it reads is the NodeMaintenances and the leases as the caller read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from .leases import RUN_ANNOTATION

TURN_ANNOTATION = "nmo.maintenance/turn"


@dataclass(frozen=True)
class Waiter:
    """A node of the run earlier in its order, waiting for a place (or about to ask for one)."""

    node: str
    turn: int


def turn_of(nm: Optional[Dict[str, Any]]) -> Optional[int]:
    """The turn written on a NodeMaintenance; None when it has none (or not a whole number >= 0)."""
    text = (((nm or {}).get("metadata") or {}).get("annotations") or {}).get(TURN_ANNOTATION)
    try:
        value = int(str(text))
    except (TypeError, ValueError):
        return None
    return value if value >= 0 else None


def ahead(items: Iterable[Dict[str, Any]], run_id: str, node: str, turn: int, holding: Iterable[str],
          waits_for_a_place: Callable[[str], bool]) -> List[Waiter]:
    """The nodes of run ``run_id`` before ``turn`` that wait for a place, in their order: their
    NodeMaintenance (not being deleted) carries the run and a turn, they hold no place
    (``holding``: the nodes holding one), and what they last said is a wait for a place or
    nothing yet (``waits_for_a_place`` of the lastError)."""
    held = set(holding)
    found = []
    for nm in items:
        meta = nm.get("metadata") or {}
        other = (nm.get("spec") or {}).get("nodeName") or ""
        their_turn = turn_of(nm)
        if (not other or other == node or other in held or their_turn is None or their_turn >= turn
                or (meta.get("annotations") or {}).get(RUN_ANNOTATION) != run_id or meta.get("deletionTimestamp")):
            continue
        status = nm.get("status") or {}
        if status.get("phase") not in (None, "", "Pending") or not waits_for_a_place(str(status.get("lastError") or "")):
            continue
        found.append(Waiter(other, their_turn))
    return sorted(found, key=lambda w: (w.turn, w.node))


def yields_to(waiters: Sequence[Waiter], families_of: Callable[[str], Sequence[str]], room: Callable[[str], int],
              mine: Sequence[str]) -> Dict[str, List[str]]:
    """By family of ``mine`` (the families the node takes a place of) left without room, the
    earlier waiters that take its last free places, served greedily in their order: a waiter
    takes a place of each of its families (``families_of``) when every one of them still has
    room (``room``: free places as read, the node's own not taken), else nothing. Empty: the
    node may go."""
    left: Dict[str, int] = {}

    def free(family: str) -> int:
        if family not in left:
            left[family] = room(family)
        return left[family]

    takers: Dict[str, List[str]] = {}
    for waiter in waiters:
        families = list(dict.fromkeys(families_of(waiter.node)))
        if not families or any(free(f) <= 0 for f in families):
            continue
        for family in families:
            left[family] -= 1
            takers.setdefault(family, []).append(waiter.node)
    return {f: takers[f] for f in dict.fromkeys(mine) if free(f) <= 0 and takers.get(f)}
