"""nmo_drain on the local control plane: selection, PodDisruptionBudgets, waiting, status, scale."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import run_module
from topology import pod_ready, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import EVICT, PodPlan
from ansible_collections.nmo.maintenance.plugins.module_utils.model.tracking import ACCEPTED
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainFailed, DrainOptions, drain
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain_requests import send

from .maintenance_support import AvailabilityRecorder, Background, events_of, nm_status, start_maintenance

pytestmark = pytest.mark.cluster

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


# -- helpers --------------------------------------------------------------------------------------
def forced_closes(cluster: Any, resource: str, fields: str) -> int:
    """How often kube-apiserver's watch cache closed a watch of ``resource`` with this field
    selector because its reader fell behind (its log, at --v 1, names each one)."""
    needle = f'fields: "{fields}"'
    with open(Path(cluster.dir) / "kube-apiserver.log", errors="replace") as log:
        return sum(1 for line in log if "watcher close due to unresponsiveness" in line
                   and f"Forcing {resource}" in line and needle in line)


def own_client(cluster: Any) -> Client:
    """A client of its own, so the drain's request count is the drain's alone."""
    return Client(cluster.client.configuration, pool_size=40)


def core_drain(cluster: Any, **params: Any) -> Dict[str, Any]:
    return drain(own_client(cluster), DrainOptions(**params))


def pods_on(world: Any, node: str) -> List[Dict[str, Any]]:
    return world.pods(node=node)


def names(pods: List[Dict[str, Any]]) -> List[str]:
    return sorted(p["metadata"]["name"] if "metadata" in p else p["name"] for p in pods)


def uids(pods: List[Dict[str, Any]]) -> set:
    return {p["metadata"]["uid"] for p in pods}


# -- docs/design.md §12.2, a mixed node drained ----------------------------------------------------
def test_chapter3_node_daemonsets_stay_emptydir_and_unmanaged_go(cluster, world, crd_installed):
    a, b = world.add_nodes(workers=2)
    world.daemonset("node-exporter")
    world.daemonset("fluentd")
    with world.only_schedulable(a):
        world.deployment("web", 4)
        world.deployment("log-aggregator", 1, pod_extra={"volumes": [{"name": "logs", "emptyDir": {}}]})
    world.pod("debug-shell", node=a)
    before = pods_on(world, a)
    assert len(before) == 8
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]

    result = run_module("nmo_drain", {"node": a, "maintenance": name}, cluster.kubeconfig)

    assert not result.get("failed"), result.get("msg")
    assert result["changed"] and result["pods_found"] == 8
    left = pods_on(world, a)
    assert sorted(p["metadata"]["labels"]["app"] for p in left) == ["fluentd", "node-exporter"]
    assert uids(left) <= uids(before), "DaemonSet pods must stay untouched"
    skipped = {p["name"]: p["reason"] for p in result["skipped_pods"]}
    assert len(skipped) == 2 and all("DaemonSet" in r for r in skipped.values())
    evicted = {p["name"]: p["reason"] for p in result["evicted"]}
    assert len(evicted) == 6 and "debug-shell" in evicted
    assert "no controller" in evicted["debug-shell"]
    assert any("emptyDir" in r for n, r in evicted.items() if n.startswith("log-aggregator"))
    assert result["pending"] == [] and result["api_requests"] <= 6 + 15

    status = nm_status(cluster, name)
    assert status["phase"] == "Succeeded" and status["drainProgress"] == 100
    assert status["totalpods"] == 8 and status["evictionPods"] == 6
    assert status["pendingPods"] == [] and status["pendingPodsRefs"] == [] and status.get("lastUpdate")
    assert world.node(a)["spec"].get("unschedulable") is True, "the caller's cordon must stay"
    assert any(e["reason"] == "Drain" and e["type"] == "Normal" for e in events_of(cluster.client, name))
    world.wait_pods_ready("app=web", 4)
    assert all(p["spec"]["nodeName"] == b for p in world.pods(namespace=world.namespace, selector="app=web"))

    again = run_module("nmo_drain", {"node": a, "maintenance": name}, cluster.kubeconfig)
    assert not again.get("failed") and not again["changed"] and again["evicted"] == []


# -- docs/design.md §12.3: a PodDisruptionBudget with minAvailable equal to replicas -----------------
def test_chapter4_pdb_blocks_one_pod_until_relaxed(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 3)
    web_pods = names(pods_on(world, a))
    world.vm("order-processing", node=a)
    vm_pod = "virt-launcher-order-processing"
    pdb_path = f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/kubevirt-disruption-budget-order-processing"
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    nm_watch = Watcher(cluster.client, maintenance.API, {"fieldSelector": f"metadata.name={name}"}).start()

    running = Background(lambda: run_module("nmo_drain", {"node": a, "maintenance": name, "timeout": 120},
                                            cluster.kubeconfig))

    def blocked() -> bool:
        status = nm_status(cluster, name)
        refused = [e for e in events_of(cluster.client, name) if e["reason"] == "DrainError"]
        return (status.get("pendingPods") == [vm_pod] and status.get("drainProgress") == 75
                and bool(refused))
    wait_for(blocked, 60, "the VM pod pending behind its PDB with a DrainError event")
    (error,) = [e for e in events_of(cluster.client, name) if e["reason"] == "DrainError"]
    assert error["type"] == "Warning" and error["message"].startswith(PDB_REFUSAL)
    assert vm_pod in error["message"]
    status = nm_status(cluster, name)
    assert status["phase"] == "Running" and status["lastError"].startswith(PDB_REFUSAL)
    assert status["pendingPodsRefs"] == [{"namespace": world.namespace, "name": vm_pod}]
    assert running.thread.is_alive(), "the drain must keep waiting while the PDB refuses"
    assert [p["metadata"]["name"] for p in pods_on(world, a)] == [vm_pod]

    cluster.client.patch(pdb_path, {"spec": {"minAvailable": 0}}, "merge")  # the owner relaxes it
    result = running.join()

    assert not result.get("failed"), result.get("msg")
    assert names(result["evicted"]) == sorted(web_pods + [vm_pod])
    assert result["eviction_retries"] >= 1
    assert pods_on(world, a) == []
    status = nm_status(cluster, name)
    assert status["phase"] == "Succeeded" and status["drainProgress"] == 100 and status["lastError"] == ""
    # One DrainError per pod and message, however many retries.
    assert len([e for e in events_of(cluster.client, name) if e["reason"] == "DrainError"]) == 1
    progress = [obj["status"]["drainProgress"] for _etype, obj in nm_watch.drain_events(1)
                if "drainProgress" in obj.get("status", {})]
    nm_watch.close()
    assert progress == sorted(progress) and progress[-1] == 100 and 75 in progress, progress


def test_pdb_refusals_end_by_timeout_naming_the_pod_and_the_pdb_is_never_violated(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 2)
        world.deployment("db", 2)
    world.pdb("db", "db", min_available=2)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    with AvailabilityRecorder(own_client(cluster), world.namespace) as pods:
        result = run_module("nmo_drain", {"node": a, "maintenance": name, "timeout": 4, "retry_delay": 0.5},
                            cluster.kubeconfig)

    assert pods.fewest["db"] >= 2, "the PDB (minAvailable 2) was violated"
    assert result.get("failed")
    assert "timed out after 4 s" in result["msg"]
    db_pods = names(world.pods(namespace=world.namespace, selector="app=db"))
    assert all(f"{world.namespace}/{p}" in result["msg"] for p in db_pods)
    assert names(result["pending"]) == db_pods
    assert all(p["last_error"].startswith(PDB_REFUSAL) and "db" in p["last_error"] for p in result["pending"])
    assert result["eviction_retries"] >= 2 and len(result["evicted"]) == 2
    assert names(pods_on(world, a)) == db_pods
    status = nm_status(cluster, name)
    assert status["phase"] == "Running", "a failed drain leaves the phase to the caller"
    assert "timed out" in status["lastError"] and sorted(status["pendingPods"]) == db_pods
    assert status["drainProgress"] == 50
    reasons = [e["reason"] for e in events_of(cluster.client, name)]
    assert reasons.count("DrainError") == 3  # one refusal per db pod, one for the timeout


def test_pdb_waits_until_replicas_are_added_and_never_violates_it(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("db", 1)
    world.pdb("db", "db", min_available=1)
    name = start_maintenance(cluster, world, a)["metadata"]["name"]
    with AvailabilityRecorder(own_client(cluster), world.namespace) as pods:
        running = Background(lambda: core_drain(cluster, node=a, maintenance=name, timeout=60))
        wait_for(lambda: nm_status(cluster, name).get("lastError", "").startswith(PDB_REFUSAL), 30, "a PDB refusal")
        cluster.client.patch(f"/apis/apps/v1/namespaces/{world.namespace}/deployments/db",
                             {"spec": {"replicas": 2}}, "merge")
        result = running.join()

    assert pods.fewest["db"] >= 1, "the PDB (minAvailable 1) was violated"
    assert len(result["evicted"]) == 1 and result["eviction_retries"] >= 1
    assert pods_on(world, a) == []


# -- waiting for pods to be gone ------------------------------------------------------------------------
def test_pods_with_a_5s_grace_are_awaited_while_replacements_start_elsewhere(cluster, world):
    a, b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("slow", 3, grace=5, graceful=True)
    world.cordon(a)
    original = uids(pods_on(world, a))

    result = core_drain(cluster, node=a)

    still = [p for p in world.pods(namespace=world.namespace) if p["metadata"]["uid"] in original]
    assert still == [], "the drain returned before its pods were gone"
    assert result["elapsed"] >= 4, "a 5 s grace cannot be over sooner"
    replacements = world.pods(namespace=world.namespace, selector="app=slow")
    assert len(replacements) == 3 and all(p["spec"]["nodeName"] == b for p in replacements)
    assert all(pod_ready(p) for p in replacements), "replacements started while the old pods terminated"


def test_returns_only_when_the_pods_are_gone_not_when_evictions_are_accepted(cluster, world, crd_installed):
    (a,) = world.add_nodes(workers=1)
    ns = world.ensure_namespace()
    held = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "held", "labels": {"app": "held"}, "finalizers": ["nmo.test/hold"]},
            "spec": {"nodeName": a, "containers": [{"name": "app", "image": "registry.local/app:1"}]}}
    cluster.client.post(f"/api/v1/namespaces/{ns}/pods", held)
    world.wait_pods_ready("app=held", 1)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    pod_path = f"/api/v1/namespaces/{ns}/pods/held"
    try:
        running = Background(lambda: core_drain(cluster, node=a, maintenance=name))
        wait_for(lambda: cluster.client.get(pod_path)["metadata"].get("deletionTimestamp"), 30, "eviction accepted")
        wait_for(lambda: nm_status(cluster, name).get("pendingPods") == ["held"], 10, "status shows it pending")
    finally:
        released_at = time.monotonic()
        cluster.client.patch(pod_path, {"metadata": {"finalizers": None}}, "merge")
    result = running.join()

    assert running.returned_at is not None and running.returned_at >= released_at
    assert names(result["evicted"]) == ["held"]
    assert cluster.client.get_or_none(pod_path) is None
    assert nm_status(cluster, name)["phase"] == "Succeeded"


def test_statefulset_pod_recreated_under_the_same_name_counts_as_gone(cluster, world):
    a, b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.statefulset("db", 1)
    (old,) = world.pods(namespace=world.namespace, selector="app=db")
    world.cordon(a)

    result = core_drain(cluster, node=a, timeout=60)

    assert names(result["evicted"]) == ["db-0"]
    (new,) = world.wait_pods_ready("app=db", 1)
    assert new["metadata"]["name"] == "db-0" and new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["spec"]["nodeName"] == b


def test_statefulset_pod_back_on_the_same_uncordoned_node_counts_as_gone(cluster, world):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.statefulset("db", 1)
        (old,) = world.pods(namespace=world.namespace, selector="app=db")
        result = core_drain(cluster, node=a, timeout=60)
        (new,) = world.wait_pods_ready("app=db", 1)

    assert names(result["evicted"]) == ["db-0"]
    assert any("schedulable" in w for w in result["warnings"])
    assert new["spec"]["nodeName"] == a and new["metadata"]["uid"] != old["metadata"]["uid"]


# -- options and errors ------------------------------------------------------------------------------
def test_guarding_options_fail_before_anything_is_evicted(cluster, world):
    a, _b = world.add_nodes(workers=2)
    world.daemonset("agent")
    with world.only_schedulable(a):
        world.deployment("web", 2)
        world.deployment("cache", 1, pod_extra={"volumes": [{"name": "tmp", "emptyDir": {}}]})
    world.pod("loner", node=a)
    world.cordon(a)
    before = {p["metadata"]["uid"] for p in pods_on(world, a)}

    result = run_module("nmo_drain", {"node": a, "force": False, "delete_emptydir_data": False,
                                      "ignore_daemonsets": False}, cluster.kubeconfig)

    assert result.get("failed")
    refused = {p["name"].split("-")[0]: p["options"] for p in result["refused"]}
    assert refused == {"agent": ["ignore_daemonsets"], "cache": ["delete_emptydir_data"], "loner": ["force"]}
    for option in ("force=true", "delete_emptydir_data=true", "ignore_daemonsets=true"):
        assert option in result["msg"]
    assert "nothing was evicted" in result["msg"]
    now = pods_on(world, a)
    assert {p["metadata"]["uid"] for p in now} == before
    assert not any(p["metadata"].get("deletionTimestamp") for p in now)


def test_check_mode_evicts_nothing_and_says_what_it_would_do(cluster, world, crd_installed):
    a, _b = world.add_nodes(workers=2)
    world.daemonset("agent")
    with world.only_schedulable(a):
        world.deployment("web", 2)
    world.pod("loner", node=a)
    world.pod("job-done", node=a, phase="Succeeded")
    nm, _changed = maintenance.ensure(cluster.client, a, name=f"maintenance-{a}")
    before = {p["metadata"]["uid"] for p in pods_on(world, a)}

    result = run_module("nmo_drain", {"node": a, "maintenance": nm["metadata"]["name"]}, cluster.kubeconfig,
                        check=True)

    assert not result.get("failed"), result.get("msg")
    assert result["changed"]
    evict = {p["name"]: p["reason"] for p in result["would_evict"]}
    assert sorted(n.split("-")[0] for n in evict) == ["job", "loner", "web", "web"]
    assert "finished (Succeeded): evicted" in evict["job-done"] and result["would_delete"] == []
    assert [p["reason"] for p in result["skipped_pods"]] == ["managed by DaemonSet agent (it would come back)"]
    assert {p["metadata"]["uid"] for p in pods_on(world, a)} == before
    assert not any(p["metadata"].get("deletionTimestamp") for p in pods_on(world, a))
    assert nm_status(cluster, nm["metadata"]["name"]).get("totalpods") is None
    assert events_of(cluster.client, nm["metadata"]["name"]) == []


def test_pod_selector_finished_pods_and_disable_eviction(cluster, world):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 2)
        world.deployment("db", 1)
    world.pdb("db", "db", min_available=1)
    world.pod("job-done", node=a, phase="Succeeded")
    world.cordon(a)

    only_web = core_drain(cluster, node=a, pod_selector="app=web")
    assert len(only_web["evicted"]) == 2
    assert sorted(p["reason"] for p in only_web["skipped_pods"]) == ["does not match pod_selector 'app=web'"] * 2
    assert sorted(p["metadata"]["labels"]["app"] for p in pods_on(world, a)) == ["db", "job-done"]

    rest = core_drain(cluster, node=a, disable_eviction=True, timeout=30)
    deleted = {p["name"].split("-")[0]: p["reason"] for p in rest["deleted"]}
    assert set(deleted) == {"db", "job"} and "disable_eviction" in deleted["db"] and "finished" in deleted["job"]
    assert rest["eviction_retries"] == 0 and pods_on(world, a) == []


def test_delete_fallback_after_deletes_a_pod_its_pdb_keeps_refusing(cluster, world, crd_installed):
    (a,) = world.add_nodes(workers=1)
    world.vm("legacy", node=a)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]

    result = core_drain(cluster, node=a, maintenance=name, delete_fallback_after=1.5, retry_delay=0.5, timeout=30)

    (deleted,) = result["deleted"]
    assert deleted["name"] == "virt-launcher-legacy" and "delete_fallback_after" in deleted["reason"]
    assert result["eviction_retries"] >= 2 and pods_on(world, a) == []
    messages = [e["message"] for e in events_of(cluster.client, name) if e["reason"] == "Drain" and e["type"] == "Warning"]
    assert len(messages) == 1 and "delete_fallback_after" in messages[0]


def test_several_pdbs_for_one_pod_is_a_clear_error(cluster, world, crd_installed):
    (a,) = world.add_nodes(workers=1)
    with world.only_schedulable(a):
        world.deployment("api", 1)
    world.pdb("api-one", "api", max_unavailable=1)
    world.pdb("api-two", "api", max_unavailable=1)
    nm = start_maintenance(cluster, world, a)
    (pod,) = pods_on(world, a)
    pod_name = pod["metadata"]["name"]

    with pytest.raises(DrainFailed) as failed:
        core_drain(cluster, node=a, maintenance=nm["metadata"]["name"], timeout=30)

    message = failed.value.message
    assert f"{world.namespace}/{pod_name}" in message and "more than one PodDisruptionBudget" in message
    assert failed.value.details["pending"][0]["name"] == pod_name
    assert [p["metadata"]["uid"] for p in pods_on(world, a)] == [pod["metadata"]["uid"]]
    assert "more than one PodDisruptionBudget" in nm_status(cluster, nm["metadata"]["name"])["lastError"]


def test_eviction_of_a_pod_already_gone_counts_as_accepted(cluster, world):
    ns = world.ensure_namespace()
    plan = PodPlan(ns, "never-was", "0000", EVICT, "test")
    assert send(own_client(cluster), plan, EVICT, None).kind == ACCEPTED


# -- scale ------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_110_pod_node_drains_within_the_request_budget(cluster, world, crd_installed):
    a, b = world.add_nodes(workers=2, pods="250")
    with world.only_schedulable(a):
        for i in range(5):
            world.deployment(f"app{i}", 22, wait=False)
        wait_for(lambda: len([p for p in pods_on(world, a) if pod_ready(p)]) == 110, 120, "110 ready pods on the node")
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]

    result = run_module("nmo_drain", {"node": a, "maintenance": name}, cluster.kubeconfig)

    assert not result.get("failed"), result.get("msg")
    print(f"\n110-pod drain: {result['elapsed']:.2f} s, {result['api_requests']} API requests "
          f"({len(result['evicted'])} evictions, {result['eviction_retries']} retries, "
          f"{result['status_writes']} status writes): {result['api_requests_by']}")
    assert len(result["evicted"]) == 110 and pods_on(world, a) == []
    # One request a pod plus a fixed few: the node, the NodeMaintenance, the list, an event and
    # the three watches (pods, node, NodeMaintenance), retries of refused evictions, and status
    # writes throttled to one a second. A watch is opened again only where the API server closed
    # it: its watch cache drops a watcher that falls behind a burst of events (the 110 deletions,
    # on a loaded machine), and logs it; each such close costs one request more.
    by = result["api_requests_by"]
    reopened = {"pods": forced_closes(cluster, "pods", f"spec.nodeName={a}"),
                "nodes": forced_closes(cluster, "nodes", f"metadata.name={a}"),
                "nodemaintenances": forced_closes(cluster, "nodemaintenances", f"metadata.name={name}")}
    for resource, closes in reopened.items():
        assert by.get(f"watch {resource}", 0) <= 1 + closes, (resource, closes, by)
    assert by.get("create pods/eviction", 0) - result["eviction_retries"] == 110, by
    assert by.get("list pods") == 1 and by.get("get nodes") == 1 and by.get("get nodemaintenances") == 1, by
    fixed = result["api_requests"] - result["status_writes"] - result["eviction_retries"] - sum(reopened.values())
    assert fixed <= 110 + 8, (reopened, by)
    assert result["status_writes"] <= result["elapsed"] + 2
    status = nm_status(cluster, name)
    assert status["phase"] == "Succeeded" and status["evictionPods"] == 110 and status["drainProgress"] == 100
    wait_for(lambda: len([p for p in pods_on(world, b) if pod_ready(p)]) == 110, 120, "replacements on the other node")


def test_drain_stops_when_its_nodemaintenance_is_deleted(cluster, world, crd_installed):
    """recover.yml or `kubectl delete nm` ends the maintenance: a drain still running (for
    example one left behind by a killed run) stops instead of evicting from a node back in service."""
    a, _b = world.add_nodes(workers=2)
    world.vm("db", node=a)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    background = Background(lambda: core_drain(cluster, node=a, maintenance=name, timeout=120, retry_delay=0.5))
    wait_for(lambda: nm_status(cluster, name).get("pendingPods") == ["virt-launcher-db"], 30, "the drain blocked by the PDB")
    cluster.client.delete(f"{maintenance.API}/{name}")
    with pytest.raises(DrainFailed) as stopped:
        background.join(30)
    assert "its NodeMaintenance was deleted" in stopped.value.message
    assert f"{world.namespace}/virt-launcher-db" in stopped.value.message
    assert names(pods_on(world, a)) == ["virt-launcher-db"]
