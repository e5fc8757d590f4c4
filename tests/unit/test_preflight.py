"""Pure logic of the pre-flight: options, verdicts from dry-run answers, capacity per batch, the table."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import DisruptionBudgetRefusal, InputError, api_error
from ansible_collections.nmo.maintenance.plugins.module_utils.model import budgets
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import SelectionOptions, classify
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import preflight as pf

REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def node(name: str, cpu: str = "4", labels: Optional[Dict[str, str]] = None, unschedulable: bool = False) -> Dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"pool": "w", **(labels or {})}},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, on: str, cpu: str = "1", owner: Optional[str] = "ReplicaSet",
        labels: Optional[Dict[str, str]] = None, **spec: Any) -> Dict[str, Any]:
    meta: Dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels or {"app": name}}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-rs", "controller": True}]
    return {"metadata": meta, "status": {"phase": "Running"},
            "spec": {"nodeName": on, "nodeSelector": {"pool": "w"},
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}], **spec}}


def pdb(name: str, app: str, **spec: Any) -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "generation": 1},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
            "status": {"observedGeneration": 1, "disruptionsAllowed": 0}}


def snapshot(nodes: List[Dict[str, Any]], pods: List[Dict[str, Any]], pdbs: Optional[List[Dict[str, Any]]] = None
             ) -> pf.Snapshot:
    by_node: Dict[str, List[Dict[str, Any]]] = {}
    for p in pods:
        by_node.setdefault(p["spec"]["nodeName"], []).append(p)
    return pf.Snapshot({n["metadata"]["name"]: n for n in nodes}, by_node, budgets.Budgets(pdbs or [], pods))


def reports_for(snap: pf.Snapshot, names: List[str], **selection: Any) -> tuple:
    reports, pods = [], {}
    for name in names:
        r = pf.NodeReport(name)
        for p in snap.pods_by_node.get(name, []):
            plan = classify(p, SelectionOptions(**selection))
            r.plans.append(plan)
            pods[plan.key] = p
        reports.append(r)
    return reports, pods


# -- options ------------------------------------------------------------------------------------
def test_options_take_the_drains_names_and_defaults() -> None:
    opts = pf.PreflightOptions.from_params({"nodes": ["a", "b"], "force": False, "pod_selector": None})
    assert opts.nodes == ("a", "b") and not opts.force and opts.delete_emptydir_data and opts.concurrency == 1


@pytest.mark.parametrize("params,message", [
    ({"nodes": []}, "non-empty list"),
    ({"nodes": ["a", "a"]}, "lists a node twice: a"),
    ({"nodes": ["a"], "concurrency": 0}, "concurrency: 0 must be between 1 and 1000"),
    ({"nodes": ["a"], "parallelism": 0}, "parallelism"),
    ({"nodes": ["a"], "pod_selector": "app in (a"}, "pod_selector"),
])
def test_bad_options_fail_before_any_request(params: Dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        pf.PreflightOptions.from_params(params).validate()


# -- pods guarded by options and budgets ----------------------------------------------------------
def test_a_pod_guarded_by_an_option_that_is_off_is_a_blocker_naming_the_option() -> None:
    snap = snapshot([node("n1")], [pod("lonely", "n1", owner=None)])
    [r], _changed = reports_for(snap, ["n1"], force=False)
    pf.judge_options(r)
    assert r.verdict == pf.NO_GO
    assert r.blockers == ["ns/lonely needs force=true: no controller would recreate it"]
    assert r.as_dict()["refused"][0]["options"] == ["force"]


def judged(answer: pf.DryRun, pdbs: List[Dict[str, Any]], pods: Optional[List[Dict[str, Any]]] = None) -> pf.NodeReport:
    pods = pods or [pod("vm", "n1", owner=None)]
    snap = snapshot([node("n1")], pods, pdbs)
    [r], by_key = reports_for(snap, ["n1"])
    plan = r.plans[0]
    pf.judge_eviction(r, plan, by_key[plan.key], answer, snap.budgets)
    return r


def test_a_refusal_by_a_budget_that_never_allows_is_a_blocker_naming_pod_and_budget() -> None:
    r = judged(pf.DryRun(pf.REFUSED, 429, REFUSAL), [pdb("vm-budget", "vm", minAvailable=1)])
    assert r.verdict == pf.NO_GO
    assert r.blockers[0].startswith("ns/vm is refused by PDB ns/vm-budget, which can never allow it: minAvailable 1")
    assert r.evictions[0]["dry_run"] == "refused" and r.evictions[0]["pdbs"] == ["ns/vm-budget"]
    assert r.as_dict()["pdbs"][0]["never_allows"] is True


def test_a_refusal_for_now_only_warns() -> None:
    pods = [pod("web-1", "n1", labels={"app": "web"}), pod("web-2", "n2", labels={"app": "web"})]
    r = judged(pf.DryRun(pf.REFUSED, 429, REFUSAL), [pdb("web", "web", maxUnavailable=1)], pods)
    assert r.verdict == pf.WARN and not r.blockers
    assert r.warnings[0].startswith("ns/web-1 is refused now by PDB ns/web (the drain waits for it)")


def test_the_budget_the_server_names_is_the_one_reported() -> None:
    pods = [pod("a", "n1", labels={"app": "a", "tier": "t"})]
    cause = ("The disruption budget strict needs 1 healthy pods and has 1 currently",)
    r = judged(pf.DryRun(pf.REFUSED, 429, REFUSAL, cause),
               [pdb("loose", "a", maxUnavailable=1),
                {**pdb("strict", "x", minAvailable=1),
                 "spec": {"selector": {"matchLabels": {"tier": "t"}}, "minAvailable": 1}}], pods)
    assert "PDB ns/strict" in r.blockers[0] and "loose" not in r.blockers[0]
    assert cause[0] in r.evictions[0]["message"]


def test_an_allowed_eviction_adds_nothing_and_a_failed_one_blocks() -> None:
    assert judged(pf.DryRun(pf.ALLOWED, 201), []).verdict == pf.GO
    r = judged(pf.DryRun(pf.FAILED, 500, "This pod has more than one PodDisruptionBudget"), [])
    assert r.blockers == ["ns/vm: the dry-run eviction failed with 500: This pod has more than one PodDisruptionBudget"]


# -- capacity, batch by batch ---------------------------------------------------------------------
def test_replacements_fit_on_the_nodes_left_and_unmanaged_pods_need_no_room() -> None:
    snap = snapshot([node("n1"), node("n2"), node("n3")],
                    [pod("a", "n1", cpu="3"), pod("solo", "n1", owner=None, cpu="3"), pod("b", "n2", cpu="3")])
    reports, pods = reports_for(snap, ["n1", "n2"])
    pf.judge_capacity(reports, pods, snap, concurrency=1)
    cap1 = reports[0].as_dict()["capacity"]
    assert (cap1["batch"], cap1["replacements"], cap1["fits"]) == (["n1"], 1, True)
    assert cap1["placed"][0]["node"] == "n3"  # n2 has 1 cpu left
    assert reports[1].as_dict()["capacity"]["placed"][0]["node"] == "n3"  # each batch from the cluster as it is


def test_with_concurrency_the_batch_is_out_together_and_what_does_not_fit_stays_pending() -> None:
    snap = snapshot([node("n1"), node("n2"), node("n3", cpu="3"), node("other", labels={"pool": "x"})],
                    [pod("a", "n1", cpu="2"), pod("b", "n2", cpu="2"), pod("c", "n3", cpu="1")])
    reports, pods = reports_for(snap, ["n1", "n2", "n3"])
    pf.judge_capacity(reports, pods, snap, concurrency=2)
    assert reports[0].as_dict()["capacity"]["batch"] == ["n1", "n2"]
    pending = [p for r in reports[:2] for p in r.as_dict()["capacity"]["pending"]]
    assert len(pending) == 1  # n3 has room for one of the two 2-cpu pods
    blocked = next(r for r in reports[:2] if r.blockers)
    assert "would stay Pending (cpu 2, memory 1Gi): 0/4 nodes can take it:" in blocked.blockers[0]
    assert "2 out for maintenance at the same time" in blocked.blockers[0]
    assert "1 do not match its node selector or affinity" in blocked.blockers[0]
    assert reports[2].as_dict()["capacity"]["fits"] is True


def test_cordoned_nodes_are_no_home() -> None:
    snap = snapshot([node("n1"), node("n2", unschedulable=True)], [pod("a", "n1")])
    reports, pods = reports_for(snap, ["n1"])
    pf.judge_capacity(reports, pods, snap, concurrency=1)
    assert "1 cordoned" in reports[0].blockers[0]


# -- lines ----------------------------------------------------------------------------------------
def test_one_line_per_node_with_verdict_and_first_reason() -> None:
    ok = pf.NodeReport("node-a")
    missing = pf.NodeReport("node-long-name", found=False, blockers=["node 'node-long-name' not found in cluster"])
    lines = pf.table([ok, missing])
    assert lines[0].split() == ["node", "verdict", "why"]
    assert lines[1] == "node-a          go       0 to evict"
    assert lines[2] == "node-long-name  no-go    node 'node-long-name' not found in cluster"
    two = pf.NodeReport("n", blockers=["first", "second"])
    assert two.line() == "0 to evict; first (+1 more)"


def test_a_budgets_429_is_told_from_the_api_servers_throttling() -> None:
    budget = api_error(429, "TooManyRequests", REFUSAL, body={"details": {"causes": [
        {"reason": "DisruptionBudget", "message": "The disruption budget b needs 1 healthy pods and has 1 currently"}]}})
    throttled = api_error(429, "TooManyRequests", "Too many requests, please try again later.")
    assert isinstance(budget, DisruptionBudgetRefusal) and not isinstance(throttled, DisruptionBudgetRefusal)


# -- workloads whose replacements come back ------------------------------------------------------
def test_a_workload_tolerating_the_maintenance_taints_is_a_no_go_once() -> None:
    everything = [{"operator": "Exists"}]
    snap = snapshot([node("a"), node("b")],
                    [pod("web-1", "a", tolerations=everything), pod("web-2", "a", tolerations=everything),
                     pod("db", "a", tolerations=[{"key": "medik8s.io/drain", "operator": "Exists"}]),
                     pod("agent", "a", owner="DaemonSet", tolerations=everything)])
    for p in snap.pods_by_node["a"][:2]:  # two replicas of one ReplicaSet
        p["metadata"]["ownerReferences"][0]["name"] = "web-rs"
    (report,), pods = reports_for(snap, ["a"])
    pf.judge_returning(report, pods)
    assert report.verdict == pf.NO_GO and len(report.blockers) == 1, report.blockers
    assert report.blockers[0].startswith("replacements of ns/web-1, ns/web-2 (ns/ReplicaSet/web-rs) would come back")
    assert ("tolerates medik8s.io/drain:NoSchedule and node.kubernetes.io/unschedulable:NoSchedule via "
            "{operator: Exists}") in report.blockers[0]


def test_the_reasons_name_every_node_that_is_not_a_plain_go_with_all_its_reasons():
    go = pf.NodeReport("node-a")
    blocked = pf.NodeReport("node-b", blockers=["b1", "b2"], warnings=["w1"])
    warned = pf.NodeReport("node-c", warnings=["w2"])
    migrating = pf.NodeReport("node-d", migrations=["vm pod"])
    assert pf.reasons([go, blocked, warned, migrating]) == {
        "node-b (no-go)": ["b1", "b2", "w1"], "node-c (warn)": ["w2"], "node-d (go (migrate))": ["vm pod"]}
    assert pf.reasons([go]) == {}


def test_the_names_the_begin_would_refuse_are_blockers_with_the_given_name_honoured() -> None:
    long = ".".join(["n" * 62] * 4)[:250]
    report = pf.NodeReport(long)
    pf.judge_names(report, None)
    assert [b.split(":")[0] for b in report.blockers] == ["its NodeMaintenance cannot be made",
                                                          "its node lease cannot be made"]
    assert "would be 262 characters" in report.blockers[0] and "would be 255 characters" in report.blockers[1]
    assert report.blockers[0].endswith("(the begin refuses it before any write)")
    given = pf.NodeReport(long)
    pf.judge_names(given, "fw-2026")
    assert len(given.blockers) == 1 and "maintenance-" not in given.blockers[0]
    fine = pf.NodeReport("w1")
    pf.judge_names(fine, None)
    assert fine.blockers == []


@pytest.mark.parametrize("status, said", [("False", "is NotReady (its Ready condition is False)"),
                                          ("Unknown", "is unreachable (its Ready condition is Unknown"),
                                          (None, "is not Ready (it has no Ready condition")])
def test_a_node_that_is_not_ready_is_a_no_go_or_a_warning_with_skip_wait(status: Optional[str], said: str) -> None:
    down = node("w1")
    down["status"]["conditions"] = [{"type": "Ready", "status": status}] if status else []
    report = pf.NodeReport("w1")
    pf.judge_readiness(report, down, pf.PreflightOptions())
    assert report.verdict == pf.NO_GO and said in report.blockers[0]
    assert "evictions there wait for a kubelet that is not there" in report.blockers[0]
    lenient = pf.NodeReport("w1")
    pf.judge_readiness(lenient, down, pf.PreflightOptions(skip_wait_for_delete_timeout=30))
    assert lenient.verdict == pf.WARN and "skip_wait_for_delete_timeout (30 s)" in lenient.warnings[0]
    ready = pf.NodeReport("w1")
    pf.judge_readiness(ready, node("w1"), pf.PreflightOptions())
    assert ready.verdict == pf.GO


def test_maintenance_names_and_the_etcd_options_are_read_from_the_params() -> None:
    opts = pf.PreflightOptions.from_params({"nodes": ["a", "b"], "maintenance_names": {"a": "fw-a", "b": ""},
                                            "etcd_guard": "kubeadm", "etcd_pod_selector": None})
    assert opts.maintenance_names == {"a": "fw-a"}
    assert (opts.etcd.flavour, opts.etcd.member_selector) == ("kubeadm", "component=etcd")
    with pytest.raises(InputError, match=r"maintenance_names\[a\]"):
        pf.PreflightOptions(nodes=("a",), maintenance_names={"a": "Not_A_Name"}).validate()
