"""Topology budgets, pure: what is accepted, the domains a node falls under and their family
names, the limits (Karpenter's arithmetic) and the places a node may take (docs/design.md §5.6)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils import role_inputs
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, validation
from ansible_collections.nmo.maintenance.plugins.module_utils.model import topology_budgets as tb
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption

NOW = datetime(2026, 12, 2, 3, 0, 0, tzinfo=timezone.utc)
ZONE = "topology.kubernetes.io/zone"
CP = {"node-role.kubernetes.io/control-plane": ""}


def node(name: str, ready: bool = True, **labels: str) -> Dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels)},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def place(name: str, holder: str, run: str = "") -> Dict[str, Any]:
    body = leases.new_lease(name, "medik8s-leases", holder, 3600, NOW, None, leases.SLOT_LABELS)
    return leases.with_run(body, run)


@pytest.mark.parametrize("budgets, said", [
    ([{"topology_key": ZONE, "max": 0}], "budgets[0].max: 0 must be between 1 and 1000 nodes (a budget of 0"),
    ([{"selector": "a=b", "max": "150%"}], "budgets[0].max: '150%' is not a percentage of the nodes from 1% to 100%"),
    ([{"selector": "a=b", "max": "0%"}], "budgets[0].max: '0%' is not a percentage"),
    ([{"selector": "a=b", "max": -2}], "budgets[0].max: -2 must be between 1 and 1000"),
    ([{"selector": "a=b", "max": 1.5}], "budgets[0].max: 1.5 must be a whole number"),
    ([{"selector": "a=b", "max": True}], "budgets[0].max: True must be a whole number"),
    ([{"selector": "a=b", "max": "many"}], "budgets[0].max: 'many' must be a whole number"),
    ([{"selector": "a=b"}], "budgets[0].max: missing"),
    ([{"selector": "a in (b", "max": 1}], "budgets[0].selector: 'a in (b' is not a valid label selector"),
    ([{"topology_key": "a zone", "max": 1}], "budgets[0].topology_key: 'a zone' is not a valid label key"),
    ([{"topology_key": ZONE, "selector": "a=b", "max": 1}], "budgets[0]: give exactly one of selector"),
    ([{"max": 1}], "budgets[0]: give exactly one of selector"),
    ([{"topology_key": ZONE, "max": 1, "schedule": "@daily"}], "budgets[0]: unknown key(s) schedule"),
    (["zone"], "budgets[0]: 'zone' must be a dict"),
    ({"topology_key": ZONE}, "budgets: {"),
])
def test_a_bad_budget_is_refused_naming_the_entry_and_key(budgets: Any, said: str) -> None:
    with pytest.raises(InputError) as exc:
        tb.parse(budgets)
    assert said in exc.value.message


@pytest.mark.parametrize("value", [0, -1, 1.5, "x", None, 1001])
def test_a_bad_control_plane_concurrency_is_refused(value: Any) -> None:
    with pytest.raises(InputError) as exc:
        tb.parse([], value)
    assert exc.value.message.startswith("control_plane_concurrency: ")


def test_good_budgets_and_the_control_plane_last() -> None:
    parsed = tb.parse([{"topology_key": ZONE, "max": 1}, {"selector": "pool=gpu", "max": "25%"},
                       {"selector": "pool=cpu", "max": "3"}], "2")
    assert [(b.topology_key, b.selector, b.count, b.percent) for b in parsed] == [
        (ZONE, None, 1, None), (None, "pool=gpu", None, 25), (None, "pool=cpu", 3, None), (None, None, 2, None)]
    assert parsed[-1].builtin and parsed[-1].describe().startswith("the control-plane budget (max 2")


def test_a_node_falls_under_the_domains_of_its_labels_in_one_order() -> None:
    parsed = tb.parse([{"topology_key": ZONE, "max": 1}, {"selector": "pool=gpu", "max": 2},
                       {"topology_key": "rack", "max": 1}])
    found = tb.domains(parsed, {ZONE: "Zone_A", "pool": "gpu", **CP}, "p")
    assert [d.value for d in found] == ["", "", "Zone_A"]  # the rack: no label, no domain
    names = [d.family for d in found]
    assert names == sorted(names) and "p-control-plane" in names
    zone = next(d for d in found if d.value == "Zone_A")
    assert zone.family.startswith("p-zone-a-") and zone.describe().endswith(f"domain {ZONE}=Zone_A")
    validation.dns_subdomain(tb.family("p", zone.budget, "Zone_A") + "-999", "name")
    # the same value under another key, or another value that slugs alike, is another family
    assert tb.family("p", zone.budget, "zone-a") != zone.family
    rack = tb.parse([{"topology_key": "rack", "max": 1}])[0]
    assert tb.family("p", rack, "Zone_A") != zone.family
    # max is not part of the name: runs with different limits count the same places
    assert tb.family("p", tb.parse([{"topology_key": ZONE, "max": 3}])[0], "Zone_A") == zone.family
    assert tb.domains(parsed, {"pool": "cpu"}, "p") == []


def test_a_percentage_rounds_up_and_notready_or_busy_nodes_count() -> None:
    pool = tb.domains(tb.parse([{"selector": "pool=gpu", "max": "30%"}]), {"pool": "gpu"}, "p")[0]
    nodes = [node(f"n{i}", ready=i != 3, pool="gpu") for i in range(10)] + [node("other", pool="cpu")]
    members = tb.members(pool, nodes)
    assert len(members) == 10 and tb.limit(pool, len(members)) == 3 and tb.limit(pool, 1) == 1
    assert tb.limit(pool, 11) == 4  # roundup(3.3)
    assert tb.disrupted(members, "n0", placed={"n1"}, busy={"n1", "n2"}) == ["n2", "n3"]


def test_places_left_for_disrupted_nodes_are_the_lowest_indexes() -> None:
    held = [place("f-2", "x")]
    plan = leases.plan_slot(held, "me", "f", 3, NOW, reserved=1)
    assert [name for name, _lease in plan.candidates] == ["f-0", "f-1"]
    assert leases.plan_slot(held, "me", "f", 3, NOW, reserved=2).blocked
    assert not leases.plan_slot([place("f-0", "me")], "me", "f", 1, NOW, reserved=0).blocked  # our own, resumed


def test_own_places_are_the_annotated_families_of_the_prefix_not_its_slots() -> None:
    seen = [place("p-0", "me"), place("p-zone-a-12345678-0", "me"), place("p-zone-a-12345678-1", "you"),
            place("q-zone-a-12345678-0", "me")]
    for lease in seen[1:]:
        lease["metadata"].setdefault("annotations", {})[leases.BUDGET_ANNOTATION] = "budgets[0]"
    assert [s["metadata"]["name"] for s in leases.own_places(seen, "me", "p")] == ["p-zone-a-12345678-0"]
    assert [s["metadata"]["name"] for s in leases.own_slots(seen, "me", "p")] == ["p-0"]


def test_the_request_takes_the_budgets_and_refuses_bad_ones() -> None:
    params = {"node": "w1", "concurrency": 2, "duration": 600, "slot_prefix": "p", "wait": False, "timeout": 30,
              "etcd_guard": "auto", "etcd_pod_selector": "component=etcd", "etcd_pod_namespace": "kube-system",
              "etcd_guard_namespace": "openshift-etcd", "run_id": None,
              "budgets": [{"topology_key": ZONE, "max": 1}], "control_plane_concurrency": 0}
    with pytest.raises(InputError, match="control_plane_concurrency: 0"):
        disruption.Request.from_params(params).validate()
    disruption.Request.from_params({**params, "control_plane_concurrency": None}).validate()


@pytest.mark.parametrize("given, said", [
    ({"node_maintenance_budgets": [{"topology_key": ZONE, "max": "200%"}]}, "node_maintenance_budgets[0].max"),
    ({"node_maintenance_control_plane_concurrency": 0}, "node_maintenance_control_plane_concurrency: 0"),
])
def test_the_role_names_its_own_variable(given: Dict[str, Any], said: str) -> None:
    spec: Dict[str, Dict[str, Optional[str]]] = {"node_maintenance_budgets": {"type": "list", "elements": "dict"},
                                                 "node_maintenance_control_plane_concurrency": {"type": "int"}}
    problems, _facts = role_inputs.check(spec, given)
    assert len(problems) == 1 and problems[0].startswith(said), problems


def test_a_cordoned_node_counts_whoever_cordoned_it() -> None:
    # a quarantine, a kept failure, an administrator: capacity lost all the same (issue 41)
    pool = tb.domains(tb.parse([{"selector": "pool=gpu", "max": 1}]), {"pool": "gpu"}, "p")[0]
    nodes = [node(f"n{i}", pool="gpu") for i in range(3)]
    nodes[2]["spec"] = {"unschedulable": True}
    assert tb.out_of_service(nodes[2]) and not tb.out_of_service(nodes[1])
    assert tb.disrupted(tb.members(pool, nodes), "n0", placed=set(), busy=set()) == ["n2"]
    assert tb.disrupted(tb.members(pool, nodes), "n2", placed=set(), busy=set()) == []  # itself: never
