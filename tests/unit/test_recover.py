"""Which nodes and leases recover.yml calls ours (module_utils/workflows/recover.py): the lease
module's own names, not copies of them."""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import recover


def report(node: str = "w1", lease_list: List[Dict[str, Any]] = (), **extra: Any) -> Dict[str, Any]:
    return {"node": node, "node_deleted": False, "maintenance": None, "run": None, "annotations": {},
            "leases": list(lease_list), **extra}


def lease(name: str, holder: str, slot: bool = False) -> Dict[str, Any]:
    return {"name": name, "holder": holder, "slot": slot}


def test_a_slots_prefix_is_the_one_it_was_named_with():
    assert recover.slot_prefix_of(leases.slot_name("t1-other", 3)) == "t1-other"
    assert recover.slot_prefix_of("no-index-x") is None
    seen = report(lease_list=[lease(leases.slot_name(leases.SLOT_PREFIX, 0), "w1", slot=True),
                              lease(leases.slot_name("t1-other", 1), "w1", slot=True),
                              lease(leases.slot_name("t1-theirs", 0), "w2", slot=True)])
    assert recover.other_slots(seen, leases.SLOT_PREFIX) == [{"node": "w1", "name": "t1-other-1", "prefix": "t1-other"}]


def test_what_is_still_held_and_the_message_name_each_lease():
    seen = report(lease_list=[lease("t1-x-0", "w1", slot=True), lease(leases.node_lease_name("w1"), "someone")])
    left = recover.still_held(seen)
    assert left == ["w1: lease t1-x-0 (holder w1)"]
    text = recover.message(["typo"], [], [], left, ["node-w1"])
    assert text == ("Unknown node name(s), not recovered: typo. Still held: w1: lease t1-x-0 (holder w1) (a slot of "
                    "another prefix: run again without node_maintenance_slot_prefix). Held by someone else, left in "
                    "place: node-w1.")
    assert recover.message([], [], [], [], ["node-w1"]) == ""


def test_what_a_node_whose_end_failed_holds_gets_no_hint_about_prefixes():
    failed = [{"node": "w1", "msg": "node w1 is in maintenance by run r1, which is alive"}]
    left = ["w1: lease node-w1 (holder nmo.maintenance)", "w1: lease t1-x-0 (holder w1)",
            "w2: lease t2-y-0 (holder w2)"]
    text = recover.message([], failed, [], left, [])
    assert text == ("Failed to end the maintenance of: w1 (node w1 is in maintenance by run r1, which is alive). "
                    "Still held: w2: lease t2-y-0 (holder w2) (a slot of another prefix: run again without "
                    "node_maintenance_slot_prefix). Still held, their end having failed: w1: lease node-w1 (holder "
                    "nmo.maintenance); w1: lease t1-x-0 (holder w1).")


def test_names_given_as_one_string_are_split_and_blanks_dropped():
    assert recover.RecoverOptions.from_params({"nodes": [" w1", "", "w2 "]}).nodes == ["w1", "w2"]
    assert recover.RecoverOptions.from_params({"nodes": [""]}).nodes is None
