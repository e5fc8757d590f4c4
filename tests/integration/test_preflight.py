"""nmo_preflight on the local control plane: the world of docs/design.md §12, capacity, no trace, the role's stop, cost."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest
from helpers import run_module, run_playbook
from topology import World, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.events import COMPONENT
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.preflight import PreflightOptions, preflight

from .maintenance_support import NM_API, leases_naming, node_clean, run, slot_prefix, write_inventory

pytestmark = pytest.mark.cluster

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."
EMPTYDIR = {"volumes": [{"name": "scratch", "emptyDir": {}}]}
SMALL = {"cpu": "100m", "memory": "128Mi"}


# -- the world of docs/design.md §12, built once: the pre-flight writes nothing, so its tests share it
@pytest.fixture(scope="module")
def seed(cluster: Any) -> Any:
    """worker-01 and -02 each hold a VM alone behind a minAvailable 1 PDB (docs/design.md
    §12.1 and §12.3); -03 and -04 run a Deployment behind a maxUnavailable 1 PDB, a
    Deployment with an emptyDir and (on -04) an unmanaged pod; a DaemonSet everywhere."""
    w = World(cluster.client)
    try:
        w.add_nodes(workers=4, cpu="8", memory="32Gi")
        n1, n2, n3, n4 = w.workers
        w.vm("vm-database-01", node=n1)
        w.vm("vm-order-processing", node=n2)
        with w.only_schedulable(n3, n4):
            w.deployment("web", 4, requests=SMALL)
            w.deployment("logs", 1, requests=SMALL, pod_extra=EMPTYDIR)
        w.pdb("web", "web", max_unavailable=1)
        w.pod("debug-shell", node=n4)
        w.daemonset("node-exporter")
        yield w
    finally:
        w.cleanup()


def by_node(result: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    assert not result.get("failed"), result.get("msg")
    return {n["node"]: n for n in result["nodes"]}


def names(entries: List[Dict[str, Any]]) -> List[str]:
    return sorted(e["name"] for e in entries)


def traces(cluster: Any, world: World) -> Dict[str, Any]:
    """What a write would change: the world's pods, its PDBs with their status, every event
    of its namespace, and our events in default about its nodes (the node controller's own
    RegisteredNode events arrive there whenever it gets to them)."""
    c = cluster.client
    pods = {p["metadata"]["name"]: (p["metadata"]["uid"], p["metadata"]["resourceVersion"])
            for p in world.pods(namespace=world.namespace)}
    pdbs = {b["metadata"]["name"]: (b["metadata"]["resourceVersion"], b["status"])
            for b in c.get(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets")["items"]}
    events = {e["metadata"]["name"]: e.get("count") for e in c.get(f"/api/v1/namespaces/{world.namespace}/events")["items"]}
    default = sorted(e["metadata"]["name"] for e in c.get("/api/v1/namespaces/default/events")["items"]
                     if world.id in (e.get("involvedObject") or {}).get("name", "")
                     and (e.get("source") or {}).get("component") == COMPONENT)
    return {"pods": pods, "pdbs": pdbs, "events": events, "default_events": default}


# -- issue 9 point 4 ---------------------------------------------------------------------------------
def test_vm_nodes_are_blocked_naming_pod_and_pdb_the_others_go_and_nothing_is_written(cluster, seed):
    n1, n2, n3, n4 = seed.workers
    before = traces(cluster, seed)
    result = run_module("nmo_preflight", {"nodes": seed.workers}, cluster.kubeconfig)
    nodes = by_node(result)
    assert result["changed"] is False and result["go"] is False
    assert result["blocked"] == [n1, n2]
    assert result["summary"] == f"no-go: 2 of 4 node(s) blocked: {n1}, {n2}"

    for node, vm in ((n1, "vm-database-01"), (n2, "vm-order-processing")):
        report = nodes[node]
        assert report["verdict"] == "no-go"
        pod, pdb = f"virt-launcher-{vm}", f"kubevirt-disruption-budget-{vm}"
        assert report["blockers"] == [
            f"{seed.namespace}/{pod} is refused by PDB {seed.namespace}/{pdb}, which can never allow it: "
            "minAvailable 1 with 1 pod(s) selected lets none go (move the workload away first, add replicas "
            "or relax the budget)"]
        [evict] = report["to_evict"]
        assert evict["name"] == pod and evict["dry_run"] == "refused"
        assert evict["message"].startswith(PDB_REFUSAL) and pdb in evict["message"]
        assert report["pdbs"] == [{"namespace": seed.namespace, "name": pdb, "budget": "minAvailable 1",
                                   "selected_pods": 1, "disruptions_allowed": 0, "never_allows": True,
                                   "why": report["pdbs"][0]["why"]}]
        assert [p["name"].split("-")[0] for p in report["skipped_pods"]] == ["node"]  # node-exporter
        assert "DaemonSet" in report["skipped_pods"][0]["reason"]

    for node in (n3, n4):
        report = nodes[node]
        assert report["verdict"] == "go", report["summary"]
        assert all(e["dry_run"] == "allowed" for e in report["to_evict"])
        assert report["capacity"]["fits"] and report["capacity"]["batch"] == [node]
        assert {p["node"] for p in report["capacity"]["placed"]} <= set(seed.workers) - {node}  # the world's selector
    evicted = {e["name"]: e for n in (n3, n4) for e in nodes[n]["to_evict"]}
    assert "no controller" in evicted["debug-shell"]["reason"]
    assert "emptyDir" in next(e for name, e in evicted.items() if name.startswith("logs-"))["reason"]
    assert sum(name.startswith("web-") for name in evicted) == 4
    assert [line.split()[:2] for line in result["table"][1:]] == [
        [n1, "no-go"], [n2, "no-go"], [n3, "go"], [n4, "go"]]

    checked = run_module("nmo_preflight", {"nodes": seed.workers}, cluster.kubeconfig, check=True)
    assert [(n["node"], n["verdict"]) for n in checked["nodes"]] == [(n["node"], n["verdict"]) for n in result["nodes"]]
    assert traces(cluster, seed) == before, "a dry-run eviction left a trace"


def test_options_that_are_off_name_the_pods_they_guard(cluster, seed):
    n3, n4 = seed.workers[2:]
    result = run_module("nmo_preflight", {"nodes": [n3, n4], "force": False, "delete_emptydir_data": False},
                        cluster.kubeconfig)
    nodes = by_node(result)
    refused = {p["name"]: p for n in (n3, n4) for p in nodes[n]["refused"]}
    assert refused["debug-shell"]["options"] == ["force"]
    assert f"{seed.namespace}/debug-shell needs force=true: no controller would recreate it" in nodes[n4]["blockers"]
    [logs] = [p for name, p in refused.items() if name.startswith("logs-")]
    assert logs["options"] == ["delete_emptydir_data"]
    assert nodes[n4]["verdict"] == "no-go" and "debug-shell" not in names(nodes[n4]["to_evict"])


def test_full_nodes_make_the_capacity_check_name_the_pods_that_would_stay_pending(cluster, world):
    world.add_nodes(workers=3, cpu="4", memory="8Gi")
    w1, w2, w3 = world.workers
    world.deployment("big", 3, requests={"cpu": "3", "memory": "1Gi"})  # one a node: two never fit on one
    [pod] = world.pods(node=w1, namespace=world.namespace)
    result = run_module("nmo_preflight", {"nodes": [w1]}, cluster.kubeconfig)
    report = by_node(result)[w1]
    assert report["verdict"] == "no-go" and not report["capacity"]["fits"]
    [pending] = report["capacity"]["pending"]
    assert pending["name"] == pod["metadata"]["name"] and pending["requests"] == "cpu 3, memory 1Gi"
    others = len(cluster.client.get("/api/v1/nodes")["items"]) - 3  # nodes of other worlds, running concurrently
    reason = pending["reason"]
    assert reason.startswith(f"0/{others + 3} nodes can take it: ")
    assert "2 insufficient cpu" in reason and "1 out for maintenance at the same time" in reason
    assert f"{world.namespace}/{pod['metadata']['name']} would stay Pending (cpu 3, memory 1Gi): " in report["blockers"][0]

    world.add_nodes(workers=1, cpu="4", memory="8Gi")  # room appears: the same pre-flight says go
    again = by_node(run_module("nmo_preflight", {"nodes": [w1]}, cluster.kubeconfig))[w1]
    assert again["verdict"] == "go" and again["capacity"]["placed"][0]["node"] == world.workers[3]


# -- the role: enforce stops before anything is touched; warn and off go on ------------------------------
def test_enforce_stops_the_play_with_no_node_touched(cluster, seed, user, tmp_path):
    """As a user bound only to the shipped ClusterRole: the pre-flight needs nothing more."""
    inventory = write_inventory(seed, tmp_path)
    played = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
    try:
        assert played.proc.returncode != 0, played.output[-3000:]
        checks = [r for r in played.records() if r["action"].endswith("nmo_preflight")]
        assert len(checks) == 1, "the pre-flight must run once for the whole run"
        assert [n["node"] for n in checks[0]["result"]["nodes"]] == seed.workers  # -l workers: all of them
        assert "Pre-flight no-go: 2 of 4 node(s) blocked" in played.output
        assert f"virt-launcher-vm-database-01 is refused by PDB {seed.namespace}/kubevirt" in played.output
        touched = [r["action"] for r in played.records()
                   if r["action"].split(".")[-1] in ("nmo_crd", "nmo_lease", "nmo_taint", "nmo_cordon", "nmo_drain")]
        assert touched == [], f"ran before the stop: {touched}"
    finally:
        played.close()
    assert [node_clean(cluster.client, n) for n in seed.workers] == [None] * 4
    nms = [nm["metadata"]["name"] for nm in (cluster.client.get_or_none(NM_API) or {}).get("items", [])
           if nm["spec"]["nodeName"] in seed.workers]
    assert nms == []
    assert leases_naming(cluster.client, seed.workers, slot_prefix(seed)) == []


def preflight_play(world: World, mode: str) -> List[Dict[str, Any]]:
    return [{"hosts": "workers", "gather_facts": False, "tasks": [
        {"name": "the role's pre-flight", "ansible.builtin.include_role": {
            "name": "nmo.maintenance.node_maintenance", "tasks_from": "preflight.yml"},
         "vars": {"node_maintenance_preflight": mode}},
        {"name": "went on", "ansible.builtin.debug": {"msg": "went on"}, "run_once": True}]}]


def inventory_file(world: World, tmp_path: Path) -> str:
    return write_inventory(world, tmp_path)


@pytest.mark.parametrize("mode", ["warn", "off"])
def test_warn_and_off_go_on(cluster, seed, tmp_path, mode):
    played = run_playbook(preflight_play(seed, mode), cluster.kubeconfig, inventory=inventory_file(seed, tmp_path))
    assert played.rc == 0, played.stdout[-3000:]
    assert "went on" in played.stdout
    checks = played.results("nmo_preflight")
    if mode == "off":
        assert checks and all(r.get("skip_reason") for r in checks), checks
    else:
        assert [r["go"] for r in checks] == [False]
        assert f"{seed.workers[0]}  no-go" in played.stdout


def test_transient_refusals_only_warn(cluster, world, tmp_path):
    """web's PDB allows no disruption while one of its two replicas is not Ready: evicting
    the Ready one is refused for now, and the drain would wait for it."""
    world.add_nodes(workers=2)
    world.deployment("web", 2)
    world.pdb("web", "web", max_unavailable=1)
    sick, healthy = world.pods(namespace=world.namespace, selector="app=web")
    world.set_pod_ready(world.namespace, sick["metadata"]["name"], False)
    wait_for(lambda: cluster.client.get(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/web")
             .get("status", {}).get("disruptionsAllowed") == 0, 30, "PDB web to allow no disruption")
    played = run_playbook(preflight_play(world, "enforce"), cluster.kubeconfig, inventory=inventory_file(world, tmp_path))
    assert played.rc == 0, played.stdout[-3000:]
    report = {n["node"]: n for n in played.last("nmo_preflight")["nodes"]}[healthy["spec"]["nodeName"]]
    assert report["verdict"] == "warn" and report["blockers"] == []
    assert any(w.startswith(f"{world.namespace}/{healthy['metadata']['name']} is refused now by PDB "
                            f"{world.namespace}/web (the drain waits for it): {PDB_REFUSAL}") for w in report["warnings"])
    assert report["pdbs"][0]["never_allows"] is False and report["pdbs"][0]["disruptions_allowed"] == 0


# -- issue 9 point 5: the cost over 25 nodes and about 150 pods --------------------------------------------
class RecordingClient(Client):
    """The real client, keeping the method and path of every request."""

    def __init__(self, configuration: Any, pool_size: int) -> None:
        super().__init__(configuration, pool_size)
        self.log: List[Tuple[str, str]] = []
        self.queries: List[Tuple[str, str, Dict[str, Any]]] = []

    def request(self, method: str, path: str, query: Optional[Dict[str, Any]] = None, body: Any = None,
                content_type: Optional[str] = None, timeout: float = 30.0) -> Dict[str, Any]:
        with self._lock:
            self.log.append((method, path))
            self.queries.append((method, path, dict(query or {})))
        return super().request(method, path, query, body, content_type, timeout)


def test_cost_over_25_nodes_and_150_pods(cluster, world):
    world.add_nodes(workers=25)
    for i in range(6):
        world.deployment(f"app-{i}", 25, requests=SMALL)
        world.pdb(f"app-{i}", f"app-{i}", max_unavailable=2)
    pods = list(world.pods(namespace=world.namespace))
    assert len(pods) == 150
    client = RecordingClient(cluster.client.configuration, pool_size=40)
    started = time.monotonic()
    result = preflight(client, PreflightOptions(nodes=tuple(world.workers)))
    seconds = time.monotonic() - started
    evictions = [p for m, p in client.log if m == "POST" and p.endswith("/eviction")]
    lists = sorted({p for m, p in client.log if m == "GET"})
    print(f"\npre-flight cost: {len(world.workers)} nodes, {len(pods)} pods to evict: {seconds:.2f} s, "
          f"{result['api_requests']} API requests ({len(evictions)} dry-run evictions, "
          f"{result['api_requests'] - len(evictions)} lists)")
    assert result["go"], result["summary"]
    assert len(evictions) == 150 and result["api_requests"] == len(client.log)
    gets = Counter(p for m, p in client.log if m == "GET")
    in_cluster = len(cluster.client.get("/api/v1/pods")["items"])
    assert gets["/api/v1/nodes"] == gets["/apis/policy/v1/poddisruptionbudgets"] == 1
    # 25 nodes judged of a cluster hardly larger: one paginated list of every pod is cheaper than 25
    assert result["reads"]["pods_of_judged_nodes"] == "whole list"
    assert gets["/api/v1/pods"] <= 1 + in_cluster // 500  # one list for all the nodes, in pages of 500
    namespace_lists = [q for m, p, q in client.queries if p == f"/api/v1/namespaces/{world.namespace}/pods"]
    assert sorted(q["labelSelector"] for q in namespace_lists) == [f"app=app-{i}" for i in range(6)]  # one a PDB
    assert set(lists) == {"/api/v1/nodes", "/api/v1/pods", "/apis/policy/v1/poddisruptionbudgets",
                          f"/api/v1/namespaces/{world.namespace}/pods"}
    assert result["reads"]["candidate_nodes_read"] == 0  # every node's pods were counted from the whole list
    assert sum(len(n["to_evict"]) for n in result["nodes"]) == 150

    # one node of the 25: its own pods, and the pods of just enough candidate homes, never the cluster's
    client = RecordingClient(cluster.client.configuration, pool_size=40)
    one = preflight(client, PreflightOptions(nodes=(world.workers[0],)))
    assert one["go"], one["summary"]
    assert one["reads"]["pods_of_judged_nodes"] == "per node"
    pod_lists = [q for m, p, q in client.queries if m == "GET" and p == "/api/v1/pods"]
    assert all("fieldSelector" in q for q in pod_lists)  # never a list of every pod
    assert pod_lists[0]["fieldSelector"] == f"spec.nodeName={world.workers[0]}"
    read = one["reads"]["candidate_nodes_read"]
    assert 1 <= read <= 16 and len(pod_lists) == 1 + read  # a first chunk of candidates was enough
    placed = {p["node"] for p in one["nodes"][0]["capacity"]["placed"]}
    assert placed and placed <= {q["fieldSelector"].split("=", 1)[1] for q in pod_lists[1:]}
    evicting = one["nodes"][0]["to_evict"]
    guarding = {b for e in evicting for b in e["pdbs"]}
    assert one["reads"]["every_node_listed"]  # replacements need a home: capacity is judged
    assert evicting and one["api_requests"] == 4 + read + len(guarding) + len(evicting)  # the node, its pods,
    # every node (replacements need a home), PDBs, the candidates, one count a guarding PDB, one dry run a pod


def test_status_shows_the_preflight_of_named_nodes_not_in_maintenance(cluster, seed):
    n1, n2, n3, n4 = seed.workers
    played = run_playbook(None, cluster.kubeconfig, args=["-e", f"nmo_nodes={n1},{n3}"],
                          playbook_path=str(Path(__file__).resolve().parents[2] / "playbooks" / "status.yml"))
    assert played.rc == 0, played.stdout[-3000:]
    answer = played.last("nmo_preflight")
    assert [(n["node"], n["verdict"]) for n in answer["nodes"]] == [(n1, "no-go"), (n3, "go")], answer["table"]
    assert f"{n1}  no-go    1 to evict; {seed.namespace}/virt-launcher-vm-database-01 is refused by PDB" in played.stdout
