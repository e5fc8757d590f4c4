"""Pure logic of the capacity check: quantities, requests, the scheduler's node filters, placement."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import placement as pl
from ansible_collections.nmo.maintenance.plugins.module_utils.model import quantity as q

GI = 2 ** 30


def node(name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110", labels: Optional[Dict[str, str]] = None,
         taints: Optional[List[Dict[str, str]]] = None, unschedulable: bool = False, ready: bool = True) -> Dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str = "p", cpu: Optional[str] = "1", memory: Optional[str] = "1Gi", phase: str = "Running",
        **spec: Any) -> Dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}], **spec},
            "status": {"phase": phase}}


def room(name: str = "n1", pods_on: Optional[List[Dict[str, Any]]] = None, **kwargs: Any) -> pl.NodeRoom:
    return pl.node_room(node(name, **kwargs), pods_on or [])


# -- quantities -------------------------------------------------------------------------------
@pytest.mark.parametrize("text,resource,expected", [
    ("500m", "cpu", 500), ("1", "cpu", 1000), ("1.5", "cpu", 1500), ("0.1", "cpu", 100), ("250u", "cpu", 1),
    ("128Mi", "memory", 128 * 2 ** 20), ("1Gi", "memory", GI), ("1G", "memory", 10 ** 9), ("1e3", "memory", 1000),
    ("1.5k", "memory", 1500), ("110", "pods", 110), (2, "cpu", 2000),
])
def test_quantities_are_read_in_base_units_rounded_up(text: Any, resource: str, expected: int) -> None:
    assert q.amount(resource, text) == expected


def test_a_malformed_quantity_names_the_value() -> None:
    with pytest.raises(InputError, match="'12 GB'"):
        q.amount("memory", "12 GB")


def test_quantities_are_shown_for_people() -> None:
    assert (q.show("cpu", 1500), q.show("cpu", 2000), q.show("memory", 3 * GI)) == ("1500m", "2", "3Gi")


# -- what a pod asks for ----------------------------------------------------------------------
def test_containers_add_up_and_a_pod_takes_one_slot() -> None:
    p = pod(cpu="500m", memory="1Gi")
    p["spec"]["containers"].append({"name": "b", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}})
    assert pl.pod_requests(p) == {"cpu": 750, "memory": GI + 512 * 2 ** 20, "pods": 1}


def test_an_init_container_only_needs_to_fit_alone_while_sidecars_add_up() -> None:
    p = pod(cpu="500m", memory=None, overhead={"cpu": "100m"}, initContainers=[
        {"name": "big-init", "resources": {"requests": {"cpu": "2"}}},
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"}}},
    ])
    assert pl.pod_requests(p)["cpu"] == 2000 + 100  # max(500 + 200, 2000) + overhead


def test_a_node_room_counts_running_pods_only() -> None:
    r = room(pods_on=[pod("a", cpu="1"), pod("b", cpu="2", phase="Succeeded")])
    assert (r.free("cpu"), r.free("pods")) == (3000, 109)


def test_cordoned_and_not_ready_nodes_take_nothing() -> None:
    assert room(unschedulable=True).unavailable == "cordoned"
    assert room(ready=False).unavailable == "not Ready"


# -- node selector and required node affinity ---------------------------------------------------
@pytest.mark.parametrize("operator,values,label,expected", [
    ("In", ["a", "b"], "a", True), ("In", ["a"], None, False),
    ("NotIn", ["a"], "b", True), ("NotIn", ["a"], None, True), ("NotIn", ["a"], "a", False),
    ("Exists", [], "x", True), ("Exists", [], None, False),
    ("DoesNotExist", [], None, True), ("DoesNotExist", [], "x", False),
    ("Gt", ["4"], "8", True), ("Gt", ["8"], "4", False), ("Lt", ["8"], "4", True), ("Gt", ["4"], "many", False),
])
def test_node_selector_operators(operator: str, values: List[str], label: Optional[str], expected: bool) -> None:
    assert pl.expression_matches({"key": "k", "operator": operator, "values": values}, label) is expected


def affinity(*terms: Dict[str, Any]) -> Dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def test_node_selector_needs_every_label() -> None:
    r = room(labels={"disk": "ssd", "zone": "a"})
    assert pl.selector_matches(pod(nodeSelector={"disk": "ssd"}), r)
    assert not pl.selector_matches(pod(nodeSelector={"disk": "ssd", "zone": "b"}), r)


def test_affinity_terms_are_ored_and_their_requirements_anded() -> None:
    r = room("n1", labels={"zone": "a", "gpu": "no"})
    term_gpu = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}]}
    term_zone = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                      {"key": "gpu", "operator": "Exists"}]}
    assert pl.selector_matches(pod(affinity=affinity(term_gpu, term_zone)), r)
    assert not pl.selector_matches(pod(affinity=affinity(term_gpu)), r)


def test_match_fields_compare_the_node_name() -> None:
    pinned = pod(affinity=affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}))
    assert pl.selector_matches(pinned, room("n1"))
    assert not pl.selector_matches(pinned, room("n2"))


def test_an_empty_term_matches_no_node() -> None:
    assert not pl.selector_matches(pod(affinity=affinity({})), room())


# -- taints and tolerations --------------------------------------------------------------------
@pytest.mark.parametrize("toleration,expected", [
    ({"operator": "Exists"}, True),
    ({"key": "k", "operator": "Exists"}, True),
    ({"key": "k", "operator": "Equal", "value": "v"}, True),
    ({"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "other"}, False),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
])
def test_tolerations(toleration: Dict[str, str], expected: bool) -> None:
    assert pl.tolerates(toleration, {"key": "k", "value": "v", "effect": "NoSchedule"}) is expected


def test_prefer_no_schedule_does_not_keep_a_pod_away() -> None:
    r = room(taints=[{"key": "soft", "effect": "PreferNoSchedule"}, {"key": "hard", "value": "1", "effect": "NoExecute"}])
    assert pl.taint_text(pl.untolerated_taint(pod(), r)) == "hard=1:NoExecute"
    assert pl.untolerated_taint(pod(tolerations=[{"key": "hard", "operator": "Exists"}]), r) is None


# -- placement ---------------------------------------------------------------------------------
def test_misfit_gives_the_schedulers_reasons() -> None:
    assert pl.misfit(pod(), {"cpu": 1000}, room("n1"), {"n1"}) == ["out for maintenance at the same time"]
    assert pl.misfit(pod(nodeSelector={"a": "b"}), {}, room(), set()) == ["do not match its node selector or affinity"]
    assert pl.misfit(pod(), {"cpu": 5000, "memory": 9 * GI, "pods": 1}, room(pods="0"), set()) == [
        "insufficient cpu", "insufficient memory", "too many pods"]
    assert pl.misfit(pod(), pl.pod_requests(pod()), room(), set()) == []


def test_replacements_go_to_the_least_allocated_node_and_use_up_its_room() -> None:
    rooms = [room("busy", pods_on=[pod("x", cpu="3")]), room("idle")]
    placed = pl.place([pod("a", cpu="2"), pod("b", cpu="2"), pod("c", cpu="1")], rooms, set())
    assert {p.name: p.node for p in placed} == {"a": "idle", "b": "idle", "c": "busy"}
    assert rooms[1].free("cpu") == 0


def test_a_pod_with_no_room_stays_pending_with_reasons_counted_per_node() -> None:
    w = {"pool": "w"}
    rooms = [room("out", labels=w), room("cordoned", unschedulable=True), room("small", cpu="1", labels=w),
             room("other", labels={"pool": "x"}),
             room("tainted", labels=w, taints=[{"key": "k", "effect": "NoSchedule"}])]
    [p] = pl.place([pod("a", cpu="2", nodeSelector=w)], rooms, {"out"})
    assert p.node is None
    assert p.reason.startswith("0/5 nodes can take it: ")
    for why in ("1 out for maintenance at the same time", "1 cordoned", "1 insufficient cpu",
                "1 have taint k:NoSchedule it does not tolerate", "1 do not match its node selector or affinity"):
        assert why in p.reason
    assert p.brief()["reason"] == p.reason


def test_pod_affinity_and_spread_are_named_as_not_judged() -> None:
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}},
            "topologySpreadConstraints": [{"maxSkew": 1}]}
    assert pl.unjudged(pod(**spec)) == ["required podAntiAffinity", "topologySpreadConstraints"]
    assert pl.unjudged(pod(topologySpreadConstraints=[{"whenUnsatisfiable": "ScheduleAnyway"}])) == []
