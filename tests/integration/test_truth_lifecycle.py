"""Issue 23, the lifecycle's share: what a failed node is left with (the failure policy per
phase), what the node had before the maintenance (an administrator's cordon, a maintenance
taint), the dry run of the whole playbook, and the failed node's last line.

Every playbook runs as the least-privilege user; every claim of the output is checked
against the cluster afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
from topology import wait_for

from .maintenance_support import (
    DRAIN_TAINT,
    LABEL,
    AuditLog,
    RestrictedUser,
    events_of,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    run,
    slot_prefix,
    wait_clean,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FLASH_ERROR = "firmware tool exited 3: flash verify error"
REASON_ANNOTATION = "ops.example.com/cordon-reason"


def hook(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def failing_flash(tmp_path: Path) -> str:
    return hook(tmp_path, "flash.yml", f"- name: Flash the firmware\n  ansible.builtin.fail:\n    msg: '{FLASH_ERROR}'\n")


def last_line(result, node: str) -> str:
    """The message of the failed node's last task (Failed | Stop here)."""
    stopped = result.task("Failed | Stop here")
    assert stopped, f"no failure line: {result.output[-3000:]}"
    # the playbook fails the node in its last play; the role's own task is then skipped
    return next(r["result"]["msg"] for r in stopped if r["host"] == node and r["status"] == "failed")


SETTLE = "nmo.maintenance/settle"  # the drain's snapshot of what must be whole again (model/settle.py)


def annotations_of(cluster, node: str):
    return cluster.client.get(f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {}


def taint_keys(cluster, node: str):
    return [t["key"] for t in cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("taints") or []]


# -- 1. the failure policy per phase -----------------------------------------------------------------
def test_a_failed_work_hook_keeps_the_node_out_of_service_and_says_where_it_is(cluster, world, user, tmp_path):
    w1, w2 = world.add_nodes(workers=2)
    world.deployment("web", 2)
    # w1 surely has a pod to drain, whose replacement may go to w2 (the pre-flight finds it room)
    world.deployment("pinned", 1, pod_extra={"affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [w1]}]}}]}}})
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                 extra_vars={"node_maintenance_hooks_work": [failing_flash(tmp_path)]})
    assert result.proc.returncode != 0

    node = cluster.client.get(f"/api/v1/nodes/{w1}")
    assert node["spec"].get("unschedulable"), "a node whose flash failed is schedulable again"
    assert DRAIN_TAINT in taint_keys(cluster, w1)
    assert node["metadata"]["labels"].get(LABEL) == "true", "NHC must still leave it alone"
    nm = maintenance_of(cluster.client, w1)
    assert nm["status"]["phase"] == "Failed" and FLASH_ERROR in nm["status"]["lastError"], nm["status"]
    held = leases_naming(cluster.client, [w1], slot_prefix(world))
    assert any(h.startswith(f"node-{w1}") for h in held) and any(h.startswith(slot_prefix(world)) for h in held), \
        f"a kept node still counts against the limit: {held}"
    assert maintenance_of(cluster.client, w2) is None, "the play went on after the failure"

    said = last_line(result, w1)
    assert f"maintenance of node {w1} failed (work phase)" in said and FLASH_ERROR in said
    assert "kept out of service (policy auto: its work failed, in the work phase)" in said, said
    assert "rolled back" not in said and "back in service" not in said, said
    assert re.search(r"Now: cordoned, tainted .*medik8s.io/drain:NoSchedule, NodeMaintenance "
                     rf"{nm['metadata']['name']} Failed, holds node lease node-{w1} \(expires in \d+ s unless renewed\), "
                     rf"slot {slot_prefix(world)}-0 \(expires in \d+ s", said), said
    assert f"ansible-playbook playbooks/recover.yml -e nmo_nodes={w1}" in said and f"(-l {w1})" in said
    recorded = result.task("Failed | Record it on the NodeMaintenance, then roll back or keep")[0]["result"]
    assert recorded["kept"] and recorded["phase"] == "work" and recorded["policy"] == "auto"

    # recover.yml ends it and leaves none of our marks, the drain's settle snapshot included
    assert SETTLE in annotations_of(cluster, w1), "the drain of w1 wrote no settle snapshot: nothing to test"
    recovered = run("recover.yml", inventory, user.kubeconfig, extra_vars={"nmo_nodes": w1})
    assert recovered.proc.returncode == 0, recovered.output[-3000:]
    assert SETTLE not in annotations_of(cluster, w1), "recover.yml left the settle snapshot"


def test_a_failed_drain_is_rolled_back_as_before(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    world.vm("vm-pinned", node=w1)  # its PDB never lets it go
    world.deployment("pinned", 1, pod_extra={"nodeSelector": {"kubernetes.io/hostname": w1}})  # one the drain evicts
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn",
                                node_maintenance_drain_timeout=3)
    audit = AuditLog(cluster)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": [failing_flash(tmp_path)]})
    assert result.proc.returncode != 0
    wait_clean(cluster.client, [w1])
    assert leases_naming(cluster.client, [w1], slot_prefix(world)) == [], "the rollback keeps a lease"
    nm = maintenance_of(cluster.client, w1)
    assert nm["status"]["phase"] == "Failed" and "timed out" in nm["status"]["lastError"], nm["status"]
    said = last_line(result, w1)
    assert "It was rolled back (policy auto: it failed in the drain phase, before its work began): " \
           "the node is back in service" in said, said
    assert "Now: schedulable, no maintenance taint" in said, said
    # the drain wrote its settle snapshot on the node; the rollback took it away with our other marks
    written = [e for e in audit.settled().writes_of(user.name, "nodes") if SETTLE in json.dumps(e.get("requestObject"))]
    assert written, "the drain wrote no settle snapshot: nothing to test"
    assert SETTLE not in annotations_of(cluster, w1), "the rollback left the settle snapshot"


def test_a_gate_that_never_passes_keeps_the_node_out(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    gate = hook(tmp_path, "gate.yml", "- name: Storage health\n  ansible.builtin.fail:\n    msg: ceph HEALTH_ERR\n")
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_gate": gate, "node_maintenance_gate_timeout": 0,
                             "node_maintenance_gate_delay": 0})
    assert result.proc.returncode != 0
    assert node_clean(cluster.client, w1) is not None, "a node whose gate never passed returned to service"
    nm = maintenance_of(cluster.client, w1)
    assert nm["status"]["phase"] == "Failed" and "ceph HEALTH_ERR" in nm["status"]["lastError"], nm["status"]
    said = last_line(result, w1)
    assert "(gate phase)" in said and "kept out of service (policy auto: its work failed, in the gate phase)" in said


def test_an_explicit_rollback_returns_a_failed_work_node_to_service(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": [failing_flash(tmp_path)],
                             "node_maintenance_failure_policy": "rollback"})
    assert result.proc.returncode != 0
    wait_clean(cluster.client, [w1])
    assert leases_naming(cluster.client, [w1], slot_prefix(world)) == []
    assert maintenance_of(cluster.client, w1)["status"]["phase"] == "Failed"
    said = last_line(result, w1)
    assert "It was rolled back (policy rollback): the node is back in service" in said, said


# -- 4. a failure record that fails too --------------------------------------------------------------
def test_a_failure_that_cannot_be_recorded_still_says_what_is_left_and_what_to_run(cluster, world, tmp_path):
    """The work hook revokes the run's ClusterRole binding, then fails: the record is refused
    (403), and the last line says so, what the node is left with and what to run."""
    (w1,) = world.add_nodes(workers=1)
    with RestrictedUser(cluster, tmp_path) as revoked:
        binding = f"{revoked.name}-nmo-maintenance"
        revoke = hook(tmp_path, "revoke.yml",
                      "- name: Someone revokes the run's rights\n  ansible.builtin.command:\n"
                      f"    argv: [{cluster.bin}/kubectl, --kubeconfig, {cluster.kubeconfig}, delete,"
                      f" clusterrolebinding, {binding}]\n  changed_when: true\n"
                      f"- name: Flash the firmware\n  ansible.builtin.fail:\n    msg: '{FLASH_ERROR}'\n")
        inventory = write_inventory(world, tmp_path)
        result = run("maintenance.yml", inventory, revoked.kubeconfig, args=["-l", w1],
                     extra_vars={"node_maintenance_hooks_work": [revoke]})
    assert result.proc.returncode != 0
    said = last_line(result, w1)
    assert FLASH_ERROR in said and "could not be recorded either (API server answered 403" in said, said
    assert "so nothing was rolled back" in said
    assert "cordoned, tainted medik8s.io/drain:NoSchedule" in said and "lease and slot held" in said, said
    assert f"recover.yml -e nmo_nodes={w1}" in said
    assert node_clean(cluster.client, w1) is not None, "the line says cordoned: the cluster agrees"


# -- 3. the dry run --------------------------------------------------------------------------------
def demo_world(world) -> None:
    """examples/demo_world.py's world (3 control-plane nodes with etcd, 4 workers, web, db, cache)."""
    spec = importlib.util.spec_from_file_location("demo_world", ROOT / "examples" / "demo_world.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.up(world, workers=4, control_planes=3)


def test_check_diff_of_the_whole_playbook_writes_nothing_and_shows_the_plan(cluster, world, user, tmp_path):
    demo_world(world)
    w4 = world.workers[3]
    wait_for(lambda: len(cluster.client.get(f"/api/v1/namespaces/{world.namespace}/pods")["items"]) >= 13, 120,
             "the demo's pods")
    inventory = write_inventory(world, tmp_path)
    audit = AuditLog(cluster)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w4, "--check", "--diff"])
    writes = [f"{e['verb']} {e['requestURI']}" for e in audit.settled().writes_of(user.name)
              if "dryRun=All" not in e["requestURI"]]
    assert writes == [], f"the dry run wrote: {writes}"
    assert result.proc.returncode == 0, result.output[-5000:]
    assert "rolled back" not in result.output and "Failed |" not in result.output
    out = result.output
    assert nm_name(w4) in out, "the diff names the NodeMaintenance to create"
    assert f'"key": "{DRAIN_TAINT}"' in out and '+    "unschedulable": true' in out and '+    "label": true' in out
    assert slot_prefix(world) in out and f"node-{w4}" in out, "the diff names the leases and the slot"
    pods = cluster.client.get(f"/api/v1/namespaces/{world.namespace}/pods",
                              {"fieldSelector": f"spec.nodeName={w4}"})["items"]
    evictable = [p["metadata"]["name"] for p in pods if not any(
        o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or [])]
    assert evictable, "the demo world puts pods on worker-04"
    for name in evictable:
        assert re.search(rf'"{world.namespace}/{name}": "evict: (allowed now|refused now)', out), name
    assert maintenance_of(cluster.client, w4) is None and node_clean(cluster.client, w4) is None

    audit = AuditLog(cluster)
    recover = run("recover.yml", inventory, user.kubeconfig, args=["--check", "--diff"],
                  extra_vars={"nmo_nodes": w4})
    writes = [f"{e['verb']} {e['requestURI']}" for e in audit.settled().writes_of(user.name)]
    assert writes == [] and recover.proc.returncode == 0, (writes, recover.output[-3000:])


def test_a_refused_begin_does_not_claim_a_rollback(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_reason": "x" * 2000})
    assert result.proc.returncode != 0
    said = last_line(result, w1)
    assert "reason" in said and "Nothing was written for it: the node is as it was" in said, said
    assert "rolled back" not in said
    assert maintenance_of(cluster.client, w1) is None and node_clean(cluster.client, w1) is None


# -- 2. what was there before stays --------------------------------------------------------------------
def cordon_by_hand(cluster, node: str) -> None:
    cluster.client.patch(f"/api/v1/nodes/{node}", {
        "metadata": {"annotations": {REASON_ANNOTATION: "disk SMART warnings, waiting for a replacement"}},
        "spec": {"unschedulable": True}}, "merge")


def still_cordoned_by_hand(cluster, node: str) -> None:
    obj = cluster.client.get(f"/api/v1/nodes/{node}")
    assert obj["spec"].get("unschedulable"), f"{node}: the administrator's cordon was undone"
    assert obj["metadata"]["annotations"].get(REASON_ANNOTATION)
    assert LABEL not in obj["metadata"].get("labels", {})
    assert not [k for k in obj["metadata"]["annotations"] if k.startswith("nmo.maintenance/") and
                k != "nmo.maintenance/campaign"], obj["metadata"]["annotations"]
    wait_for(lambda: DRAIN_TAINT not in taint_keys(cluster, node), 30, f"{node}: our drain taint removed")


def test_an_administrators_cordon_stays_through_a_maintenance(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    cordon_by_hand(cluster, w1)
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    assert result.proc.returncode == 0, result.output[-4000:]
    still_cordoned_by_hand(cluster, w1)
    assert maintenance_of(cluster.client, w1) is None
    said = f"node {w1} was cordoned before the maintenance began: left cordoned"
    assert said in result.output, "the play says so"
    assert f"node {w1} was cordoned before the maintenance began: it stays cordoned after it" in result.output, \
        "the begin says so ahead"
    assert any(said.lower() == (e.get("message") or "").lower() for e in events_of(cluster.client, w1, "KeptAsFound")), \
        reasons_of(cluster.client, w1)
    assert "UncordonNode" not in reasons_of(cluster.client, w1), "an event says it was uncordoned"
    ended = result.task("End | Uncordon, remove the label and the taints, release the leases, delete the NodeMaintenance")
    assert ended[0]["result"]["left_as_found"] == [said]


def test_an_administrators_cordon_stays_through_a_rollback_and_through_recover(cluster, world, user, tmp_path):
    w1, w2 = world.add_nodes(workers=2)
    cordon_by_hand(cluster, w1)
    cordon_by_hand(cluster, w2)
    inventory = write_inventory(world, tmp_path)
    rolled = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                 extra_vars={"node_maintenance_hooks_work": [failing_flash(tmp_path)],
                             "node_maintenance_failure_policy": "rollback"})
    assert rolled.proc.returncode != 0
    still_cordoned_by_hand(cluster, w1)
    said = last_line(rolled, w1)
    assert f"node {w1} was cordoned before the maintenance began: left cordoned" in said, said
    assert "back in service" not in said

    kept = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w2],
               extra_vars={"node_maintenance_hooks_work": [failing_flash(tmp_path)]})
    assert kept.proc.returncode != 0 and DRAIN_TAINT in taint_keys(cluster, w2)
    status = run("status.yml", inventory, user.kubeconfig)
    assert "before the maintenance began: it stays cordoned after it" in status.output, status.output[-3000:]
    recovered = run("recover.yml", inventory, user.kubeconfig, extra_vars={"nmo_nodes": w2})
    assert recovered.proc.returncode == 0, recovered.output[-3000:]
    still_cordoned_by_hand(cluster, w2)
    assert maintenance_of(cluster.client, w2) is None
    assert f"node {w2} was cordoned before the maintenance began: left cordoned" in recovered.output


def test_a_drain_taint_set_by_hand_before_stays(cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    cluster.client.patch(f"/api/v1/nodes/{w1}", {"spec": {"taints": [{"key": DRAIN_TAINT, "effect": "NoSchedule"}]}},
                         "merge")
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    assert result.proc.returncode == 0, result.output[-4000:]
    obj = cluster.client.get(f"/api/v1/nodes/{w1}")
    assert not obj["spec"].get("unschedulable") and LABEL not in obj["metadata"].get("labels", {})
    assert DRAIN_TAINT in taint_keys(cluster, w1), "the taint set by hand was removed"
    assert f"node {w1} had the taint {DRAIN_TAINT}:NoSchedule before the maintenance began: left in place" \
        in result.output
