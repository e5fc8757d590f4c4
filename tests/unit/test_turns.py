"""Whose turn it is (model/turns.py): the earlier waiters of a run, and whether a node gives way."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.nmo.maintenance.plugins.module_utils.model import turns
from ansible_collections.nmo.maintenance.plugins.module_utils.model.leases import RUN_ANNOTATION
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.disruption import (
    BLOCKED_PREFIX,
    LEASE_HELD,
    OPERATOR_BUSY,
    waits_for_a_place,
)

RUN = "r1"


def nm(node: str, turn: Any, run: str = RUN, phase: str = "Pending", last_error: str = "",
       deleting: bool = False) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": f"maintenance-{node}", "annotations": {RUN_ANNOTATION: run}}
    if turn is not None:
        meta["annotations"][turns.TURN_ANNOTATION] = str(turn)
    if deleting:
        meta["deletionTimestamp"] = "2026-12-06T03:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase, "lastError": last_error}}


SLOT_WAIT = f"{BLOCKED_PREFIX} 2 of 2 maintenance slot(s) are held: w1 (nmo-slot-0), w2 (nmo-slot-1)."


def test_the_turn_is_read_back_and_garbage_is_none() -> None:
    assert turns.turn_of(nm("w1", 3)) == 3
    assert [turns.turn_of(nm("w1", t)) for t in (None, "x", "-1", "2.5")] == [None] * 4
    assert turns.turn_of(None) is None


def test_only_earlier_nodes_of_the_run_waiting_for_a_place_are_ahead() -> None:
    items: List[Dict[str, Any]] = [
        nm("w1", 0, last_error=SLOT_WAIT),  # waits for a slot: ahead
        nm("w2", 1),  # its begin is about to ask: ahead
        nm("w3", 2, last_error=SLOT_WAIT),  # holds a place (below): not waiting
        nm("w4", 3, run="other", last_error=SLOT_WAIT),  # another run's
        nm("w5", 4, last_error=f"{LEASE_HELD}medik8s-leases/node-w5 is held by nhc."),  # not a place
        nm("w6", 5, last_error="etcd quorum would be lost"),  # the etcd guard: not a place
        nm("w7", 6, phase="Running"),  # past its begin
        nm("w8", 7, deleting=True),  # ended
        nm("w9", None, last_error=SLOT_WAIT),  # no turn (the role without the playbook)
        nm("w11", 11, last_error=SLOT_WAIT),  # later than the node
        nm("w10", 10, last_error=SLOT_WAIT),  # the node itself
    ]
    found = turns.ahead(items, RUN, "w10", 10, {"w3"}, waits_for_a_place)
    assert found == [turns.Waiter("w1", 0), turns.Waiter("w2", 1)]


def test_what_a_wait_for_a_place_says() -> None:
    assert waits_for_a_place("") and waits_for_a_place(SLOT_WAIT)
    assert waits_for_a_place(f"{BLOCKED_PREFIX} w1 goes first: earlier in the run's order.")
    assert not waits_for_a_place(f"{LEASE_HELD}medik8s-leases/node-w1 is held by nhc.")
    assert not waits_for_a_place(f"{OPERATOR_BUSY} w3 for someone else")
    assert not waits_for_a_place("etcd quorum would be lost")


def families(table: Dict[str, List[str]]):
    return lambda node: table[node]


def test_an_earlier_waiter_that_fits_takes_the_last_place_first() -> None:
    waiting = [turns.Waiter("w1", 0)]
    room = {"slot": 1, "zone-a": 1}
    assert turns.yields_to(waiting, families({"w1": ["slot", "zone-a"]}), room.__getitem__, ["slot", "zone-a"]) == \
        {"slot": ["w1"], "zone-a": ["w1"]}


def test_places_enough_for_both_and_nobody_gives_way() -> None:
    waiting = [turns.Waiter("w1", 0)]
    room = {"slot": 2, "zone-a": 2}
    assert turns.yields_to(waiting, families({"w1": ["slot", "zone-a"]}), room.__getitem__, ["slot", "zone-a"]) == {}


def test_an_earlier_waiter_whose_own_zone_is_full_takes_nothing() -> None:
    # w1 (zone b) waits for its zone; the node (zone a) takes the last slot: no capacity is left unused
    waiting = [turns.Waiter("w1", 0)]
    room = {"slot": 1, "zone-a": 1, "zone-b": 0}
    assert turns.yields_to(waiting, families({"w1": ["slot", "zone-b"]}), room.__getitem__, ["slot", "zone-a"]) == {}


def test_the_earlier_waiters_are_served_in_their_order() -> None:
    # two places of the slots; w1 and w2 (zone b, room 1) and w3 (zone c): w1 and w3 take them
    waiting = [turns.Waiter("w1", 0), turns.Waiter("w2", 1), turns.Waiter("w3", 2)]
    table = {"w1": ["slot", "zone-b"], "w2": ["slot", "zone-b"], "w3": ["slot", "zone-c"]}
    room = {"slot": 2, "zone-a": 1, "zone-b": 1, "zone-c": 1}
    assert turns.yields_to(waiting, families(table), room.__getitem__, ["slot", "zone-a"]) == {"slot": ["w1", "w3"]}
    room3 = {**room, "slot": 3}
    assert turns.yields_to(waiting, families(table), room3.__getitem__, ["slot", "zone-a"]) == {}
