"""nmo_taint, nmo_cordon, nmo_crd and nmo_info run through Ansible against the local cluster."""

import re

import pytest
from helpers import run_module
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import marks
from ansible_collections.nmo.maintenance.plugins.module_utils.model import node_state as state
from ansible_collections.nmo.maintenance.plugins.module_utils.model.taints import (
    DRAIN_TAINT,
    MAINTENANCE_TAINTS,
    UNSCHEDULABLE_TAINT,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import nodes

from .maintenance_support import AuditLog

pytestmark = pytest.mark.cluster

USER_TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
NM_API = "/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances"
EXCLUDE = marks.EXCLUDE_FROM_REMEDIATION
ADMIN = "admin"  # the user of cluster.kubeconfig (hack/cluster's admin certificate)


def taints(cluster, node):
    return cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("taints") or []


def keys(taint_list):
    return [(t["key"], t["effect"]) for t in taint_list]


def set_taints(cluster, node, value):
    cluster.client.patch(f"/api/v1/nodes/{node}", {"spec": {"taints": value}}, "merge")


@pytest.fixture(scope="module")
def crd_installed(cluster):
    result = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    return result


def wait_taint_keys(cluster, node, wanted):
    return wait_for(lambda: keys(taints(cluster, node)) == keys(wanted), 30, f"taints {keys(wanted)} on {node}")


def test_taint_add_and_remove_keeps_user_taints(cluster, world):
    # The node-lifecycle controller keeps node.kubernetes.io/unschedulable in step with
    # spec.unschedulable, so the node is cordoned while it carries the maintenance taints,
    # as it is during a maintenance.
    (node,) = world.add_nodes(workers=1)
    set_taints(cluster, node, [USER_TAINT])
    world.cordon(node)
    wait_taint_keys(cluster, node, [USER_TAINT, UNSCHEDULABLE_TAINT])
    as_read = taints(cluster, node)

    checked = run_module("nmo_taint", {"node": node}, cluster.kubeconfig, check=True, diff=True)
    assert checked["changed"] and not checked.get("failed")
    assert taints(cluster, node) == as_read, "check mode wrote"
    assert keys(checked["diff"]["after"]["taints"]) == keys(MAINTENANCE_TAINTS + [USER_TAINT])

    first = run_module("nmo_taint", {"node": node}, cluster.kubeconfig, diff=True)
    assert first["changed"]
    assert first["taints_before"] == as_read
    assert keys(taints(cluster, node)) == keys(MAINTENANCE_TAINTS + [USER_TAINT])
    assert "medik8s.io/drain" in first["_stdout"], "diff not shown"
    audit = AuditLog(cluster)
    second = run_module("nmo_taint", {"node": node}, cluster.kubeconfig)
    assert not second["changed"]
    assert audit.settled().writes_of(ADMIN) == [], "nothing to change, yet something was written"

    world.cordon(node, False)
    wait_taint_keys(cluster, node, [DRAIN_TAINT, USER_TAINT])
    removed = run_module("nmo_taint", {"node": node, "state": "absent"}, cluster.kubeconfig)
    assert removed["changed"]
    assert taints(cluster, node) == [USER_TAINT]
    again = run_module("nmo_taint", {"node": node, "state": "absent"}, cluster.kubeconfig)
    assert not again["changed"]


def test_concurrent_writer_makes_the_test_fail_and_both_writes_survive(cluster, world):
    (node,) = world.add_nodes(workers=1)
    attempts = []

    def racing_writer(attempt):
        attempts.append(attempt)
        if attempt == 0:  # between our read and our write, someone adds a taint
            set_taints(cluster, node, [USER_TAINT])

    changed = nodes.apply(cluster.client, node, state.Wanted(add=[DRAIN_TAINT]), before_write=racing_writer).changed
    assert attempts == [0, 1], "the guarded patch did not fail and retry"
    assert changed
    assert keys(taints(cluster, node)) == keys([DRAIN_TAINT, USER_TAINT])


def test_a_begin_planned_from_an_old_read_is_planned_again_when_the_label_came_meanwhile(cluster, world):
    """The begin reads the node once, before its lease step, and patches from that read. An
    administrator's exclude-from-remediation label set in between must not be taken for
    ours (which the end would remove): the patch tests the label it sets, fails, and the
    begin is planned again from a new read."""
    (node,) = world.add_nodes(workers=1)
    old_read = cluster.client.get(f"/api/v1/nodes/{node}")
    attempts = []

    def administrator(attempt):
        attempts.append(attempt)
        if attempt == 0:
            cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {EXCLUDE: "true"}}}, "merge")

    done = nodes.apply(cluster.client, node, lambda n: marks.begin_wanted(n, EXCLUDE, "run-x"), node=old_read,
                       before_write=administrator)
    assert attempts == [0, 1], "the patch planned from the old read was not refused"
    assert done.changed
    after = cluster.client.get(f"/api/v1/nodes/{node}")
    notes = after["metadata"].get("annotations") or {}
    assert after["spec"].get("unschedulable") is True
    assert after["metadata"]["labels"][EXCLUDE] == "true"
    assert notes.get(marks.MAINTAINED_BY) == "run-x"
    assert marks.LABEL_ADDED not in notes, "the administrator's label was recorded as ours"


def test_taint_bad_input_changes_nothing(cluster, world):
    (node,) = world.add_nodes(workers=1)
    result = run_module("nmo_taint", {"node": node, "taints": [{"key": "x", "effect": "Never"}]}, cluster.kubeconfig)
    assert result["failed"] and "taints[0].effect: 'Never' must be one of" in result["msg"]
    missing = run_module("nmo_taint", {"node": "node-does-not-exist"}, cluster.kubeconfig)
    assert missing["failed"] and missing["msg"] == 'node "node-does-not-exist" not found in cluster'
    assert taints(cluster, node) == []


def test_cordon_and_label(cluster, world):
    (node,) = world.add_nodes(workers=1)
    label = "remediation.medik8s.io/exclude-from-remediation"
    checked = run_module("nmo_cordon", {"node": node}, cluster.kubeconfig, check=True, diff=True)
    assert checked["changed"] and checked["after"] == {"unschedulable": True, "label": True}
    n = world.node(node)
    assert not n["spec"].get("unschedulable") and label not in n["metadata"]["labels"]

    first = run_module("nmo_cordon", {"node": node}, cluster.kubeconfig)
    assert first["changed"] and first["before"] == {"unschedulable": False, "label": False}
    n = world.node(node)
    assert n["spec"]["unschedulable"] is True and n["metadata"]["labels"][label] == "true"
    assert not run_module("nmo_cordon", {"node": node}, cluster.kubeconfig)["changed"]

    back = run_module("nmo_cordon", {"node": node, "state": "uncordoned"}, cluster.kubeconfig)
    assert back["changed"]
    n = world.node(node)
    assert not n["spec"].get("unschedulable") and label not in n["metadata"]["labels"]
    assert not run_module("nmo_cordon", {"node": node, "state": "uncordoned"}, cluster.kubeconfig)["changed"]
    uncordon_events = cluster.kubectl("get", "events", "-n", "default", "--field-selector",
                                      f"involvedObject.name={node},reason=UncordonNode", "-o", "name").stdout
    assert uncordon_events.strip(), "no UncordonNode event on the node"


def test_cordon_only_without_label_and_custom_label_key(cluster, world):
    (node,) = world.add_nodes(workers=1)
    run_module("nmo_cordon", {"node": node, "label": False}, cluster.kubeconfig)
    assert "remediation.medik8s.io/exclude-from-remediation" not in world.node(node)["metadata"]["labels"]
    run_module("nmo_cordon", {"node": node, "label_key": "medik8s.io/exclude-from-remediation"}, cluster.kubeconfig)
    assert world.node(node)["metadata"]["labels"]["medik8s.io/exclude-from-remediation"] == "true"


def table(text):
    """kubectl's table output as dicts, cut at the header's column starts (values may hold spaces)."""
    header, *rows = text.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    bounds = list(zip(starts, starts[1:] + [None]))
    return [{header[a:b].strip(): row[a:b].strip() for a, b in bounds} for row in rows]


def test_crd_install_is_idempotent_and_kubectl_get_nm_prints_node_phase_progress_age(cluster, world, crd_installed):
    again = run_module("nmo_crd", {"object": "crd"}, cluster.kubeconfig)
    assert not again["changed"] and again["crd"]["state"] == "unchanged"
    (node,) = world.add_nodes(workers=1)
    created = run_module("nmo_crd", {"node": node, "reason": "disk swap",
                                     "status": {"phase": "Running", "drainProgress": 40}}, cluster.kubeconfig)
    name = created["maintenance"]["name"]

    shown = cluster.kubectl("get", "nm", name)  # the short name, as an operator types it
    assert shown.stdout.splitlines()[0].split() == ["NAME", "NODE", "PHASE", "PROGRESS", "AGE"]
    (row,) = table(shown.stdout)
    assert {k: row[k] for k in ("NAME", "NODE", "PHASE", "PROGRESS")} == \
        {"NAME": name, "NODE": node, "PHASE": "Running", "PROGRESS": "40"}
    assert re.fullmatch(r"\d+(s|m\d*s?|h\d*m?)", row["AGE"]), row["AGE"]
    (wide,) = table(cluster.kubectl("get", "nm", name, "-o", "wide").stdout)
    assert list(wide) == ["NAME", "NODE", "PHASE", "PROGRESS", "REASON", "AGE"] and wide["REASON"] == "disk swap"


def test_nodemaintenance_lifecycle_status_and_events(cluster, world, crd_installed):
    (node,) = world.add_nodes(workers=1)
    args = {"node": node, "reason": "Hardware memory upgrade"}
    checked = run_module("nmo_crd", args, cluster.kubeconfig, check=True)
    assert checked["changed"] and checked["created"]
    assert not [nm for nm in cluster.client.get(NM_API)["items"] if nm["spec"]["nodeName"] == node], "check mode created"

    created = run_module("nmo_crd", args, cluster.kubeconfig)
    name = created["maintenance"]["name"]
    assert created["changed"] and created["created"] and name == "maintenance-" + node.removeprefix("node-")
    nm = cluster.client.get(f"{NM_API}/{name}")
    assert nm["spec"] == {"nodeName": node, "reason": "Hardware memory upgrade"}
    assert nm["status"]["phase"] == "Pending"
    assert not run_module("nmo_crd", args, cluster.kubeconfig)["changed"]

    status = {"phase": "Running", "totalpods": 8, "evictionPods": 6, "drainProgress": 25,
              "pendingPods": ["virt-launcher-a"], "pendingPodsRefs": [{"namespace": "vms", "name": "virt-launcher-a"}]}
    updated = run_module("nmo_crd", dict(args, status=status), cluster.kubeconfig, diff=True)
    assert updated["changed"] and updated["diff"]["after"]["status"]["drainProgress"] == 25
    nm = cluster.client.get(f"{NM_API}/{name}")
    assert {k: nm["status"][k] for k in status} == status and nm["status"]["lastUpdate"]
    assert not run_module("nmo_crd", dict(args, status=status), cluster.kubeconfig)["changed"]

    table = cluster.kubectl("get", "nm", name).stdout
    assert "PHASE" in table and "PROGRESS" in table and "Running" in table and node in table

    run_module("nmo_crd", dict(args, events=[{"reason": "DrainError", "text": "Cannot evict pod"}]), cluster.kubeconfig)
    run_module("nmo_crd", dict(args, events=[{"reason": "DrainError", "text": "Cannot evict pod"}]), cluster.kubeconfig)
    listed = cluster.kubectl("get", "events", "-n", "default", "--field-selector", f"involvedObject.name={name}",
                             "-o", "custom-columns=REASON:.reason,COUNT:.count,MESSAGE:.message", "--no-headers").stdout
    assert "BeginMaintenance" in listed and "Begin a node maintenance" in listed
    drain_errors = [line for line in listed.splitlines() if line.startswith("DrainError")]
    assert len(drain_errors) == 1 and drain_errors[0].split()[1] == "2", listed

    gone = run_module("nmo_crd", {"node": node, "state": "absent"}, cluster.kubeconfig)
    assert gone["changed"] and gone["deleted"]
    assert cluster.client.get_or_none(f"{NM_API}/{name}") is None
    assert not run_module("nmo_crd", {"node": node, "state": "absent"}, cluster.kubeconfig)["changed"]
    listed = cluster.kubectl("get", "events", "-n", "default", "--field-selector", f"involvedObject.name={name}").stdout
    assert "RemovedMaintenance" in listed


def test_refusals_write_nothing(cluster, world, crd_installed):
    (node,) = world.add_nodes(workers=1)
    missing = run_module("nmo_crd", {"node": "node-that-does-not-exist"}, cluster.kubeconfig)
    assert missing["failed"] and missing["msg"] == 'node "node-that-does-not-exist" not found in cluster'
    assert not [nm for nm in cluster.client.get(NM_API)["items"]
                if nm["spec"]["nodeName"] == "node-that-does-not-exist"]

    run_module("nmo_crd", {"node": node, "name": f"first-{world.id}"}, cluster.kubeconfig)
    duplicate = run_module("nmo_crd", {"node": node, "name": f"second-{world.id}"}, cluster.kubeconfig)
    assert duplicate["failed"] and f"a NodeMaintenance for node {node} already exists" in duplicate["msg"]
    assert cluster.client.get_or_none(f"{NM_API}/second-{world.id}") is None
    resumed = run_module("nmo_crd", {"node": node}, cluster.kubeconfig)
    assert not resumed["changed"] and resumed["maintenance"]["name"] == f"first-{world.id}"


def test_node_name_is_immutable(cluster, world, crd_installed):
    first, second = world.add_nodes(workers=2)
    name = run_module("nmo_crd", {"node": first}, cluster.kubeconfig)["maintenance"]["name"]
    refused = cluster.kubectl("patch", "nodemaintenance", name, "--type=merge",
                              "-p", f'{{"spec":{{"nodeName":"{second}"}}}}', check=False)
    assert refused.returncode != 0
    assert "nodeName is immutable and cannot be changed after creation" in refused.stderr
    assert cluster.client.get(f"{NM_API}/{name}")["spec"]["nodeName"] == first


def test_info_reports_the_whole_picture(cluster, world, crd_installed):
    busy, idle = world.add_nodes(workers=2)
    run_module("nmo_crd", {"node": busy, "reason": "disk swap", "status": {"phase": "Running", "drainProgress": 50,
                                                                           "lastError": "Cannot evict pod"}},
               cluster.kubeconfig)
    run_module("nmo_cordon", {"node": busy}, cluster.kubeconfig)
    run_module("nmo_taint", {"node": busy}, cluster.kubeconfig)
    wait_taint_keys(cluster, busy, MAINTENANCE_TAINTS)
    info = run_module("nmo_info", {"node": busy}, cluster.kubeconfig, check=True)
    (report,) = info["nodes"]
    assert not info["changed"]
    assert report["unschedulable"] and report["excluded_from_remediation"]
    assert keys(report["maintenance_taints"]) == keys(MAINTENANCE_TAINTS)
    assert report["maintenance"]["phase"] == "Running" and report["maintenance"]["drainProgress"] == 50
    assert report["maintenance"]["lastError"] == "Cannot evict pod"
    assert "BeginMaintenance" in [e["reason"] for e in report["events"]]

    audit = AuditLog(cluster)
    listing = run_module("nmo_info", {"label_selector": f"nmo.test/world={world.id}", "only_in_maintenance": True},
                         cluster.kubeconfig)
    assert [r["node"] for r in listing["nodes"]] == [busy]

    chosen = run_module("nmo_info", {"nodes": [idle, busy, f"node-{world.id}-gone"], "events_limit": 0},
                        cluster.kubeconfig)
    assert [r["node"] for r in chosen["nodes"]] == sorted([busy, idle]), "only the nodes asked about"
    assert all(r["events"] == [] for r in chosen["nodes"]), "events_limit 0 returns no events"
    assert audit.settled().writes_of(ADMIN) == [], "nmo_info is read-only, yet it wrote"


def test_info_waits_for_ready_and_says_what_the_node_says_when_it_is_not(cluster, world):
    from topology import WORLD_LABEL

    from .maintenance_support import Background

    name = f"node-{world.id}-no-kubelet"  # no kwok annotation: nobody reports its status
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": name, "labels": {WORLD_LABEL: world.id}}})
    try:
        args = {"node": name, "wait_ready": True, "events_limit": 0}
        late = run_module("nmo_info", {**args, "ready_timeout": 2}, cluster.kubeconfig)
        assert late["failed"] and late["msg"].startswith("timed out after 2 s: node ") and \
            "reports no Ready condition" in late["msg"] and "kubelet" in late["msg"], late["msg"]

        waiting = Background(lambda: run_module("nmo_info", {**args, "ready_timeout": 120}, cluster.kubeconfig))
        now = "2026-12-01T10:00:00Z"
        cluster.client.patch(f"/api/v1/nodes/{name}/status", {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "back",
             "lastHeartbeatTime": now, "lastTransitionTime": now}]}}, "merge")
        ready = waiting.join(150)
        assert not ready.get("failed"), ready.get("msg")
        assert ready["nodes"][0]["ready"] is True and ready["waited"] < 60
        refused = run_module("nmo_info", {"wait_ready": True}, cluster.kubeconfig)
        assert refused["failed"] and refused["msg"] == "wait_ready needs node: it waits for one node"
    finally:
        cluster.client.delete(f"/api/v1/nodes/{name}")
