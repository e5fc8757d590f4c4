"""The pre-flight's bounded reads: what is read, and how the capacity answer errs when not all is."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.nmo.maintenance.plugins.module_utils.model import budgets
from ansible_collections.nmo.maintenance.plugins.module_utils.model import placement as pl
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import SelectionOptions, classify
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import preflight_reads as reads
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import preflight as pf


def node(name: str, cpu: str = "4", labels: Optional[Dict[str, str]] = None, unschedulable: bool = False) -> Dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"pool": "w", **(labels or {})}},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, on: str, cpu: str = "1", owner: Optional[str] = "ReplicaSet") -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"app": name}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-rs", "controller": True}]
    return {"metadata": meta, "status": {"phase": "Running"},
            "spec": {"nodeName": on, "nodeSelector": {"pool": "w"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def reports_for(snap: reads.Snapshot, names: List[str]) -> tuple:
    reports, pods = [], {}
    for name in names:
        r = pf.NodeReport(name)
        for p in snap.pods_by_node.get(name, []):
            plan = classify(p, SelectionOptions())
            r.plans.append(plan)
            pods[plan.key] = p
        reports.append(r)
    return reports, pods


def partial(nodes: List[Dict[str, Any]], pods: List[Dict[str, Any]], judged: List[str],
            limit: int = 0) -> reads.Snapshot:
    """A snapshot as Snapshot.read leaves it in per-node mode: only the judged nodes' pods
    are in; the others' are read on demand (recorded in ``asked``)."""
    by_node: Dict[str, List[Dict[str, Any]]] = {n: [] for n in judged}
    others: Dict[str, List[Dict[str, Any]]] = {}
    for p in pods:
        (by_node if p["spec"]["nodeName"] in judged else others).setdefault(p["spec"]["nodeName"], []).append(p)
    snap = reads.Snapshot({n["metadata"]["name"]: reads.slim_node(n) for n in nodes}, by_node,
                          budgets.Budgets([], pods), reader=lambda name: others.get(name, []), workers=2,
                          read_limit=limit)
    return snap


def test_per_node_lists_while_the_judged_nodes_are_few_one_whole_list_beyond() -> None:
    assert not reads.whole_list_is_cheaper(1, 50)
    assert not reads.whole_list_is_cheaper(20, 5000)
    assert reads.whole_list_is_cheaper(25, 30)
    assert reads.whole_list_is_cheaper(1300, 5000)


def test_candidate_reads_are_bounded_like_the_schedulers_share_of_nodes() -> None:
    assert reads.nodes_to_read(50) == 50
    assert reads.nodes_to_read(500) == 230  # 46 %
    assert reads.nodes_to_read(5000) == 500  # 10 %
    assert reads.nodes_to_read(100_000) == 5000  # 5 % at least


def test_a_node_is_kept_as_the_fields_placement_reads() -> None:
    full = node("n1", labels={"zone": "a"}, unschedulable=True)
    full["status"]["images"] = [{"names": ["x" * 100]}] * 50
    full["spec"]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    slim = reads.slim_node(full)
    assert "images" not in slim["status"]
    room, whole = pl.node_room(slim, []), pl.node_room(full, [])
    assert (room.labels, room.taints, room.allocatable, room.unavailable) == \
           (whole.labels, whole.taints, whole.allocatable, whole.unavailable)


def test_label_selectors_are_asked_of_the_server_as_kubectl_writes_them() -> None:
    selector = {"matchLabels": {"app": "a"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["x", "y"]}, {"key": "gone", "operator": "DoesNotExist"},
        {"key": "here", "operator": "Exists"}, {"key": "env", "operator": "NotIn", "values": ["dev"]}]}
    assert reads.label_selector(selector) == "app=a,tier in (x,y),!gone,here,env notin (dev)"
    assert reads.label_selector({}) == ""  # every pod of the namespace
    assert reads.label_selector(None) is None  # selects nothing: no request
    assert reads.label_selector({"matchExpressions": [{"key": "k", "operator": "Odd"}]}) is None


def test_unread_nodes_are_read_only_when_a_replacement_needs_a_home() -> None:
    nodes = [node(f"n{i}") for i in range(1, 41)]
    pods = [pod("a", "n1", cpu="1")] + [pod(f"f{i}", f"n{i}", cpu="4") for i in range(2, 30)]
    snap = partial(nodes, pods, ["n1"])
    reports, by_key = reports_for(snap, ["n1"])
    pf.judge_capacity(reports, by_key, snap, concurrency=1)
    assert reports[0].as_dict()["capacity"]["fits"] is True
    assert reports[0].as_dict()["capacity"]["placed"][0]["node"] == "n30"  # n2..n29 are full
    assert len(snap.reads) == 16 + 23  # a first chunk of 16 full nodes, then the next, up to every candidate


def test_no_read_when_nothing_needs_room() -> None:
    snap = partial([node("n1"), node("n2")], [pod("solo", "n1", owner=None)], ["n1"])
    reports, by_key = reports_for(snap, ["n1"])
    pf.judge_capacity(reports, by_key, snap, concurrency=1)
    assert snap.reads == [] and reports[0].verdict == "go"


def test_past_the_read_limit_the_answer_errs_towards_pending_and_says_so() -> None:
    nodes = [node(f"n{i:02d}") for i in range(1, 21)]
    pods = [pod("a", "n01", cpu="1")] + [pod(f"f{i}", f"n{i:02d}", cpu="4") for i in range(2, 16)]
    snap = partial(nodes, pods, ["n01"], limit=5)  # n16..n20 have room, but are never read
    reports, by_key = reports_for(snap, ["n01"])
    pf.judge_capacity(reports, by_key, snap, concurrency=1)
    report = reports[0]
    assert report.verdict == "no-go" and len(snap.reads) == 5
    assert "0/20 nodes can take it: 14 not judged (their pods were not read), 5 insufficient cpu, " \
           "1 out for maintenance at the same time" in report.blockers[0]


def test_a_budget_counts_what_it_selects_on_demand_only() -> None:
    asked: List[str] = []

    class Counting(reads.CountedBudgets):
        def selected(self, pdb: Dict[str, Any]) -> int:
            asked.append(pdb["metadata"]["name"])
            return 1

    guarded = {"metadata": {"name": "b", "namespace": "ns", "generation": 1},
               "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1},
               "status": {"observedGeneration": 1, "disruptionsAllowed": 0}}
    other = {**guarded, "metadata": {"name": "c", "namespace": "ns"}}
    known = Counting(None, [guarded, other])  # type: ignore[arg-type]
    view = known.view(known.guarding(pod("a", "n1"))[0])
    assert asked == ["b"] and view.selected == 1 and view.never
    known.view(guarded)
    assert asked == ["b"]  # once per budget


def test_requests_are_counted_by_kind_as_the_audit_log_names_them() -> None:
    from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import request_kind

    assert request_kind("GET", "/api/v1/pods", {"fieldSelector": "spec.nodeName=n"}) == "list pods"
    assert request_kind("GET", "/api/v1/nodes/n1") == "get nodes"
    assert request_kind("POST", "/api/v1/namespaces/ns/pods/p/eviction") == "create pods/eviction"
    assert request_kind("PATCH", "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/m/status") == \
        "patch nodemaintenances/status"
    assert request_kind("PUT", "/apis/coordination.k8s.io/v1/namespaces/x/leases/l") == "update leases"
    assert request_kind("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}) == "watch pods"
    assert request_kind("GET", "/api/v1/namespaces") == "list namespaces"
    assert request_kind("GET", "/api/v1/namespaces/default") == "get namespaces"
    assert request_kind("GET", "/version") == "get /version"


def paged(nodes: List[Dict[str, Any]], pods: List[Dict[str, Any]], judged: List[str], size: int,
          limit: int = 0) -> tuple:
    """As ``partial``, but the nodes not judged are listed ``size`` at a time, as a large
    cluster's would be (Snapshot.read: one judged node); ``asked`` records the list requests."""
    full = partial(nodes, pods, judged, limit)
    asked: List[Optional[str]] = []

    def fetch(_limit: int, token: Optional[str]) -> Dict[str, Any]:
        asked.append(token)
        start = int(token or 0)
        meta: Dict[str, Any] = {}
        if start + size < len(nodes):
            meta = {"continue": str(start + size), "remainingItemCount": len(nodes) - start - size}
        return {"items": nodes[start:start + size], "metadata": meta}

    snap = reads.Snapshot({n: full.nodes[n] for n in judged}, full.pods_by_node, full.budgets, reader=full.reader,
                          workers=2, read_limit=limit, node_pages=reads.NodePages(fetch))
    return snap, full, asked


def capacity(snap: reads.Snapshot, judged: List[str]) -> List[Dict[str, Any]]:
    reports, by_key = reports_for(snap, judged)
    pf.judge_capacity(reports, by_key, snap, concurrency=1)
    return [r.as_dict() for r in reports]


def test_nodes_are_listed_only_as_far_as_a_chunk_of_candidate_homes() -> None:
    nodes = [node(f"n{i:03d}") for i in range(1, 101)]
    pods = [pod("a", "n001", cpu="1")] + [pod(f"f{i}", f"n{i:03d}", cpu="4") for i in range(2, 10)]
    snap, full, asked = paged(nodes, pods, ["n001"], size=10)
    assert capacity(snap, ["n001"]) == capacity(full, ["n001"])  # the same verdict, placement and reads
    assert snap.reads == full.reads and len(snap.reads) == 16
    # 20 nodes listed: 19 candidates (full or not, unknown until read), the first 16 read, 8 of them free
    assert len(asked) == 2 and not snap.every_node_listed
    assert snap.nodes_known == 20 and snap.node_count() == 100


def test_a_pod_that_would_stay_pending_has_every_node_listed_and_counted() -> None:
    nodes = [node(f"n{i:02d}") for i in range(1, 21)]
    pods = [pod("a", "n01", cpu="1")] + [pod(f"f{i}", f"n{i:02d}", cpu="4") for i in range(2, 16)]
    snap, full, asked = paged(nodes, pods, ["n01"], size=3, limit=5)
    mine = capacity(snap, ["n01"])
    assert mine == capacity(full, ["n01"]) and mine[0]["verdict"] == "no-go"
    assert snap.every_node_listed and len(asked) == 7 and snap.reads == full.reads
    assert "0/20 nodes can take it: 14 not judged" in mine[0]["blockers"][0]


def test_nothing_is_listed_when_no_replacement_needs_a_home() -> None:
    snap, _full, asked = paged([node("n1"), node("n2")], [pod("solo", "n1", owner=None)], ["n1"], size=1)
    assert capacity(snap, ["n1"])[0]["verdict"] == "go" and asked == []
