"""Issue 33: the settle waits for what the drain took, not more (docs/design.md §4.9.1), and the
Node's lifecycle conditions (§4.11), in one role run on the local control plane as the
least-privilege user. On Kubernetes 1.37 (hack/cluster turns the gate NodeLifecycleConditions on)
the conditions are on the Node during the work hook and gone after; on 1.31 (hack/test
k8s-oldest) none is written and nothing fails.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import pytest
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.module_utils.model import node_conditions as nc
from ansible_collections.nmo.maintenance.plugins.module_utils.model import settle as settle_model
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import settle as settle_flow

from .maintenance_support import run, write_inventory

pytestmark = [pytest.mark.cluster]


def conditions_of(node: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    return {c["type"]: c for c in node.get("status", {}).get("conditions") or [] if c.get("type") in nc.TYPES}


def result_of(r: Any, task: str, host: str) -> Dict[str, Any]:
    found = [x["result"] for x in r.task(task) if x["host"] == host]
    assert found, f"no result of {task!r} for {host}: {r.output[-3000:]}"
    return found[-1]


def test_an_unhealthy_deployment_settles_at_once_and_the_node_carries_its_conditions(cluster, world, user, tmp_path):
    """The issue's case 2: a Deployment of 3 behind maxUnavailable 1 with AlwaysAllow, two pods
    not Ready, one of them alone on the target. The drain evicts it; its replacement is Ready
    elsewhere, so the Deployment is at 2 of 3 Ready, more than the 1 before the drain: the
    settle ends at once and says so (it waited for 3 before, for ever)."""
    world.add_nodes(workers=2)
    ns = world.namespace
    world.deployment("flaky", 3)
    world.pdb("flaky", "flaky", max_unavailable=1)
    cluster.client.patch(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/flaky",
                         {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}}, "merge")
    by_node: Dict[str, List[str]] = {}
    for pod in world.pods(namespace=ns, selector="app=flaky"):
        by_node.setdefault(pod["spec"]["nodeName"], []).append(pod["metadata"]["name"])
    target = next(n for n, pods in by_node.items() if len(pods) == 1)
    other = next(n for n in by_node if n != target)
    sick = [by_node[target][0], by_node[other][0]]
    for name in sick:
        world.set_pod_ready(ns, name, False)
    wait_for(lambda: cluster.client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/flaky")
             .get("status", {}).get("readyReplicas") == 1, 60, "flaky at 1 of 3 Ready")

    # the progress line, read as the printer beside nmo_settle reads it, of a snapshot at 3 before
    snap = {"workloads": [{"kind": "Deployment", "namespace": ns, "name": "flaky", "ready": 3}], "budgets": []}
    cluster.client.patch(f"/api/v1/nodes/{target}", {"metadata": {"annotations": {
        settle_model.ANNOTATION: settle_model.encode(snap)}}}, "merge")
    line = settle_flow.progress(connect(ConnectionOptions(kubeconfig=user.kubeconfig), pool_size=1), target, 4.2)
    assert line == f"{target}: settling for 4 s, waiting for 1: Deployment {ns}/flaky 1 of 3 Ready (3 before the drain)"
    cluster.client.patch(f"/api/v1/nodes/{target}", {"metadata": {"annotations": {settle_model.ANNOTATION: None}}},
                         "merge")

    seen = tmp_path / "node-during-work.json"
    work = tmp_path / "work.yml"
    work.write_text(json.dumps([
        {"name": "the node as the work sees it", "ansible.builtin.command": {
            "argv": [f"{cluster.bin}/kubectl", "--kubeconfig", cluster.kubeconfig, "get", "node",
                     "{{ node_maintenance_node }}", "-o", "json"]},
         "register": "node_now", "changed_when": False},
        {"name": "kept for the test", "ansible.builtin.copy": {"dest": str(seen), "content": "{{ node_now.stdout }}"}}]))
    inventory = write_inventory(world, tmp_path, node_maintenance_hooks_work=[str(work)],
                                node_maintenance_preflight="off", node_maintenance_settle_timeout=120,
                                node_maintenance_progress_interval=1)
    played = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", target])
    assert played.proc.returncode == 0, played.output[-5000:]

    drained = result_of(played, "Drain | Evict the pods (PodDisruptionBudgets respected)", target)
    assert [p["name"] for p in drained["evicted"]] == [sick[0]], drained["evicted"]
    assert drained["settle"]["workloads"] == [{"kind": "Deployment", "namespace": ns, "name": "flaky",
                                               "replicaset": drained["settle"]["workloads"][0]["replicaset"],
                                               "ready": 1}]
    settled = result_of(played, "Settle | Wait until what the drain evicted is whole again", target)
    assert settled["settled"] and settled["elapsed"] < 20, settled
    assert settled["standing"] == [f"Deployment {ns}/flaky 2 of 3 Ready (1 before the drain)"], settled
    assert settled["line"].startswith(f"{target}: settled after "), settled["line"]

    during = conditions_of(json.loads(seen.read_text()))
    begun = result_of(played, "Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label", target)
    after = world.node(target)
    assert not conditions_of(after), after["status"]["conditions"]
    assert after["status"]["conditions"][0]["type"] == "Ready"  # kwok's own conditions untouched
    ended = result_of(played, "End | Uncordon, remove the label and the taints, release the leases, delete the "
                              "NodeMaintenance", target)
    version = cluster.client.get("/version")
    if (int(version["major"]), int(version["minor"].rstrip("+"))) >= nc.FIRST:
        assert begun["node_conditions"] == {"active": True, "changed": True, "set": ["MaintenanceInProgress"]}, begun
        assert set(during) == {"MaintenanceInProgress", "Drained"}, during  # DrainInProgress went at its end
        assert during["MaintenanceInProgress"]["status"] == "True"
        assert during["MaintenanceInProgress"]["reason"] == "MaintenanceWindow"
        assert during["Drained"]["status"] == "True" and during["Drained"]["reason"] == "DrainCompleted"
        assert during["Drained"]["message"] == (f"nmo.maintenance: drain of node {target} done: 1 evicted, "
                                                "0 deleted, 0 skipped (left on the node)")
        assert sorted(ended["node_conditions_removed"]) == ["Drained", "MaintenanceInProgress"], ended
    else:  # an older server: nothing written, nothing failed, and said why
        assert begun["node_conditions"]["active"] is False, begun
        assert "has no node lifecycle conditions" in begun["node_conditions"]["why_not"], begun
        assert during == {} and ended["node_conditions_removed"] == []
    assert not any("lifecycle condition" in w for r in (begun, drained, ended) for w in r.get("warnings") or [])
