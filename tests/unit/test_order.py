"""The run's order (model/order.py) and the inventory plugin's hosts (model/inventory.py)."""

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils import role_inputs
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import inventory, order

ZONE = order.ZONE_KEY
NAMES = ["w1", "w2", "w3", "w4", "w5"]
LABELS = {"w1": {ZONE: "b"}, "w2": {ZONE: "a"}, "w3": {}, "w4": {ZONE: "b"}, "w5": {ZONE: "a"}}
CREATED = {"w1": "2026-01-03T00:00:00Z", "w2": "2026-01-05T00:00:00Z", "w3": "2026-01-01T00:00:00Z",
           "w4": "2026-01-01T00:00:00Z", "w5": "2026-01-02T00:00:00Z"}


def test_inventory_order_is_as_given_each_once():
    assert order.ordered(NAMES + ["w1"], LABELS, CREATED) == NAMES


def test_zone_takes_sorted_domains_one_after_the_other_unlabelled_last():
    assert order.ordered(NAMES, LABELS, CREATED, order.ZONE) == ["w2", "w5", "w1", "w4", "w3"]
    assert order.domains(NAMES, LABELS) == ["a", "b", ""]


def test_oldest_takes_the_same_domains_oldest_first_in_each():
    assert order.ordered(NAMES, LABELS, CREATED, order.OLDEST) == ["w5", "w2", "w4", "w1", "w3"]


def test_interleave_takes_one_node_of_each_domain_in_turn_unlabelled_last():
    assert order.ordered(NAMES, LABELS, CREATED, order.INTERLEAVE) == ["w2", "w1", "w3", "w5", "w4"]
    # 4 zones of 10, as inventory lists them (a zone's nodes together): a batch of 8 gets 2 a zone
    names = [f"{z}{i}" for z in "abcd" for i in range(10)]
    labels = {n: {ZONE: n[0]} for n in names}
    first = order.ordered(names, labels, {}, order.INTERLEAVE)[:8]
    assert sorted(n[0] for n in first) == list("aabbccdd")
    assert sorted(order.ordered(names, labels, {}, order.INTERLEAVE)) == sorted(names)


def test_auto_interleaves_by_the_first_topology_budget_else_keeps_the_inventory():
    zone_budget = [{"selector": "pool=gpu", "max": 1}, {"topology_key": "rack", "max": 2}]
    assert order.resolve(order.AUTO, ZONE, zone_budget) == (order.INTERLEAVE, "rack")
    assert order.resolve(order.AUTO, ZONE, [{"selector": "pool=gpu", "max": 1}]) == (order.INVENTORY, ZONE)
    assert order.resolve(order.AUTO, ZONE, None) == (order.INVENTORY, ZONE)
    assert order.resolve(order.ZONE, ZONE, zone_budget) == (order.ZONE, ZONE), "a chosen order is kept"
    assert order.ordered(NAMES, LABELS, CREATED, order.AUTO) == NAMES


def test_another_key_and_unknown_nodes():
    labels = {"w1": {"rack": "r2"}, "w2": {"rack": "r1"}}
    assert order.ordered(["w1", "gone", "w2"], labels, {}, order.ZONE, "rack") == ["w2", "w1", "gone"]


@pytest.mark.parametrize("how,key", [("random", ZONE), ("zone", "not a key!")])
def test_a_bad_order_or_key_is_refused(how, key):
    with pytest.raises(InputError):
        order.ordered(NAMES, LABELS, CREATED, how, key)


def test_the_roles_inputs_refuse_an_unknown_order_and_a_non_boolean_prefer():
    problems, _messages = role_inputs.check({}, {"node_maintenance_order": "random",
                                                 "node_maintenance_prefer_no_schedule": "maybe"})
    assert problems == ["node_maintenance_order: 'random' is not an order; give one of inventory, zone, oldest, "
                        "interleave, auto",
                        "node_maintenance_prefer_no_schedule: 'maybe' is not a boolean: give true or false"]
    assert role_inputs.check({}, {"node_maintenance_order": "zone",
                                  "node_maintenance_prefer_no_schedule": "true"})[0] == []


def test_a_node_as_a_host():
    node = {"metadata": {"name": "cp1", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": "", ZONE: "a"}},
            "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                     {"type": "Hostname", "address": "cp1.example"}]}}
    host = inventory.host(node)
    assert host["name"] == "cp1" and host["groups"] == [inventory.CONTROL_PLANE]
    assert host["vars"]["ansible_host"] == "10.0.0.1" and host["vars"]["node_maintenance_node"] == "cp1"
    assert host["vars"]["nmo_roles"] == ["control-plane"] and host["vars"]["nmo_labels"][ZONE] == "a"
    assert inventory.host(node, "hostname")["vars"]["ansible_host"] == "cp1.example"
    assert "ansible_host" not in inventory.host(node, "external_ip")["vars"], "no such address: reached by name"
    assert inventory.host({"metadata": {"name": "w1"}})["groups"] == [inventory.WORKERS]
    with pytest.raises(InputError):
        inventory.host(node, "public")
