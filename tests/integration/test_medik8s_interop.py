"""Proven against the real medik8s code built here: medik8s/common's lease library (what Node
Health Check and Self Node Remediation use) and a running Node Maintenance Operator v0.17.0.

The lease library runs as ``leasetool`` (tests/medik8s.py); NMO runs beside the local
control plane with its own client identity and its validating webhook registered. The
playbooks run as the least-privilege user; a skewed controller is an ansible-playbook
process tree under libfaketime.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import run_module, run_playbook
from medik8s import NM_PATH, NMO_FINALIZER, NMO_HOLDER
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import QUARANTINED

from .blocked_support import DRAIN_TIMEOUT, block, errors, maintain, quarantine_of, report_nodes
from .maintenance_support import (
    DRAIN_TAINT,
    LABEL,
    LEASES,
    PLAYBOOKS,
    AvailabilityRecorder,
    NodeRecorder,
    Run,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    run,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .rollout_support import finished

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
NHC = "NodeHealthCheck-x"


def skewed(offset: str) -> Dict[str, str]:
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME": offset, "FAKETIME_DONT_RESET": "1"}


def bookkeeping(body: Any) -> bool:
    """A patch that only writes the settle's own annotations on the Node (docs/design.md §4.9.1),
    which the run keeps itself in operator mode too: not node work. A JSON patch's ``test``
    operations only guard the write (the node as the run last saw it)."""
    if isinstance(body, list):
        writes = [op for op in body if isinstance(op, dict) and op.get("op") != "test"]
        return bool(writes) and all(str(op.get("path", "")).startswith("/metadata/annotations/nmo.maintenance~1settle")
                                    for op in writes)
    if not isinstance(body, dict) or set(body) != {"metadata"} or set(body["metadata"] or {}) != {"annotations"}:
        return False
    keys = (body["metadata"]["annotations"] or {}).keys()
    return bool(keys) and all(k.startswith("nmo.maintenance/settle") for k in keys)


def node_patchers(cluster: Any, node: str) -> List[str]:
    """Who patched the node (taints, cordon, label), from the audit log; the settle's own
    annotations do not count (the cluster's audit policy keeps the body of a node patch)."""
    found = []
    for line in (Path(cluster.dir) / "audit.log").read_text().splitlines():
        if f'"{node}"' not in line:
            continue
        entry = json.loads(line)
        ref = entry.get("objectRef") or {}
        if entry.get("verb") == "patch" and ref.get("resource") == "nodes" and ref.get("name") == node \
                and not ref.get("subresource") and entry.get("stage") == "ResponseComplete" \
                and not bookkeeping(entry.get("requestObject")):
            found.append(entry.get("user", {}).get("username", ""))
    return found


def lease_args(world: Any, node: str, **extra: Any) -> Dict[str, Any]:
    return {"node": node, "slot_prefix": slot_prefix(world), **extra}


# -- the lease library, both ways, whatever our controller's clock ------------------------------
@pytest.mark.parametrize("offset", ["-60s", "-5s", "+0s", "+5s", "+60s"])
def test_lease_exclusion_with_the_real_library(medik8s_tools, cluster, world, offset):
    w1, w2 = world.add_nodes(workers=2)

    # NHC holds w1 (fresh): our controller, whatever its clock, waits for it
    assert medik8s_tools.lease("request", w1, NHC, 3600)["ok"]
    ours = run_module("nmo_lease", lease_args(world, w1), cluster.kubeconfig, env=skewed(offset))
    assert ours.get("failed") and NHC in ours["msg"], ours
    assert cluster.client.get(f"{LEASES}/node-{w1}")["spec"]["holderIdentity"] == NHC
    assert medik8s_tools.lease("invalidate", w1, NHC)["ok"]

    # we hold w2 (written by the skewed controller): the library does not take it
    held = run_module("nmo_lease", lease_args(world, w2), cluster.kubeconfig, env=skewed(offset))
    assert not held.get("failed"), held.get("msg")
    refused = medik8s_tools.lease("request", w2, NHC, 3600)
    assert not refused["ok"] and refused["alreadyHeld"], refused
    # nor does NMO's holder name: ours is not node-maintenance
    assert not medik8s_tools.lease("request", w2, NMO_HOLDER, 3600)["ok"]
    assert run_module("nmo_lease", {**lease_args(world, w2), "state": "released"}, cluster.kubeconfig).get(
        "released"), "our lease was not ours to release any more"


def test_lapsed_leases_are_taken_over_both_ways(medik8s_tools, cluster, world):
    w1, w2 = world.add_nodes(workers=2)
    # the library's lease lapses: we take it over
    assert medik8s_tools.lease("request", w1, NHC, 2)["ok"]
    wait_for(lambda: not medik8s_tools.lease("get", w1)["lease"]["validNow"], 15, "NHC's 2 s lease to lapse")
    # our view of the server's time comes from whole-second Date headers, up to a second early,
    # and so does the module's: wait until even a view a second early has the lease lapsed
    due = leases.expiry(cluster.client.get(f"{LEASES}/node-{w1}")) + timedelta(seconds=1)
    wait_for(lambda: cluster.client.server_now() > due, 15, "the lease to lapse by the server's Date")
    taken = run_module("nmo_lease", lease_args(world, w1), cluster.kubeconfig)
    assert not taken.get("failed"), taken.get("msg")
    spec = cluster.client.get(f"{LEASES}/node-{w1}")["spec"]
    assert spec["holderIdentity"] == "nmo.maintenance" and spec["leaseTransitions"] == 1
    assert run_module("nmo_lease", {**lease_args(world, w1), "state": "released"}, cluster.kubeconfig)["released"]
    # ours lapses: the library takes it over
    # the shortest lease the modules accept (renewal.MIN_LEASE_SECONDS): nothing renews it here
    ours = run_module("nmo_lease", lease_args(world, w2, duration=30), cluster.kubeconfig)
    assert not ours.get("failed"), ours.get("msg")
    wait_for(lambda: not medik8s_tools.lease("get", w2)["lease"]["validNow"], 45, "our 30 s lease to lapse")
    took = medik8s_tools.lease("request", w2, NHC, 3600)
    assert took["ok"], took
    assert medik8s_tools.lease("invalidate", w2, NHC)["ok"]
    run_module("nmo_lease", {**lease_args(world, w2), "state": "released"}, cluster.kubeconfig)  # our slot


# -- a running NMO ---------------------------------------------------------------------------------
def test_auto_mode_leaves_the_node_work_to_a_running_nmo(medik8s, cluster, world, user, tmp_path):
    world.add_nodes(workers=4)
    world.deployment("web", 4)
    world.pdb("web", "web", max_unavailable=1)
    inventory = write_inventory(world, tmp_path)

    with NodeRecorder(cluster.client, world) as nodes, AvailabilityRecorder(cluster.client, world.namespace) as pods:
        result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
    assert result.proc.returncode == 0, result.output[-5000:]
    assert "mode operator" in result.output, "auto did not find NMO"
    assert nodes.most_at_once == 1, f"more than one node in maintenance at once: {nodes.history}"
    assert sorted(nodes.order) == sorted(world.workers), nodes.history
    assert pods.fewest["web"] >= 3, f"the PodDisruptionBudget was violated: {pods.fewest}"
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.workers if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.workers, slot_prefix(world)) == []
    for node in world.workers:
        patchers = node_patchers(cluster, node)
        # NMO did the node work (taints, cordon, label and back), this run's user none of it
        assert medik8s.user in patchers and user.name not in patchers, (node, patchers)
        assert LABEL not in (cluster.client.get(f"/api/v1/nodes/{node}")["metadata"].get("labels") or {})
    begins = result.task("Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label")
    assert begins and all(b["result"].get("mode") == "operator" for b in begins), begins


def test_operator_mode_failure_rolls_back_through_nmo_and_stops_the_play(medik8s, cluster, world, user, tmp_path):
    """The rescue in operator mode (nmo_maintenance state=failed): the NodeMaintenance is deleted,
    which is how NMO is told to let the node go; the slot is released; the next node never starts."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    failing = tmp_path / "work.yml"
    failing.write_text("- name: Replace the memory\n  ansible.builtin.fail:\n    msg: DIMM slot 3 not detected\n"
                       f"  when: inventory_hostname == '{w1}'\n")
    inventory = write_inventory(world, tmp_path)
    # rollback asked for: under the default (auto) a failed work hook keeps the node out
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                 extra_vars={"node_maintenance_hooks_work": [str(failing)], "node_maintenance_failure_policy": "rollback"})
    assert result.proc.returncode != 0
    assert "mode operator" in result.output, "auto did not find NMO"
    assert f"maintenance of node {w1} failed" in result.output and "It was rolled back" in result.output
    wait_clean(cluster.client, [w1, w2])
    assert maintenance_of(cluster.client, w1) is None, "NMO was not told to let the node go"
    assert leases_naming(cluster.client, [w1, w2], slot_prefix(world)) == [], "the slot was kept"
    assert maintenance_of(cluster.client, w2) is None and reasons_of(cluster.client, nm_name(w2)) == [], \
        "the play went on after the failure"
    rescued = result.task("Failed | Record it on the NodeMaintenance, then roll back or keep")
    assert rescued and rescued[0]["result"].get("rolled_back") and rescued[0]["result"].get("deleted"), rescued


def test_a_nodemaintenance_made_by_kubectl_is_left_to_nmo_and_counts(medik8s, cluster, world, user, tmp_path):
    """worker-03 is put in maintenance with kubectl (NMO does it) while the role maintains
    workers 1 to 3 one at a time: the role leaves worker-03 alone and never has a node in
    maintenance beside it."""
    w1, w2, w3 = world.add_nodes(workers=3)
    inventory = write_inventory(world, tmp_path)
    cluster.kubectl("apply", "-f", "-", input=(
        '{"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance", '
        f'"metadata": {{"name": "by-hand-{world.id}"}}, "spec": {{"nodeName": "{w3}", "reason": "by hand"}}}}'))
    wait_for(lambda: ((maintenance_of(cluster.client, w3) or {}).get("status") or {}).get("phase") == "Succeeded",
             120, "NMO to put worker-03 in maintenance")
    with NodeRecorder(cluster.client, world) as nodes:
        playbook = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
        try:
            wait_for(lambda: "BlockedByNodeHealthCheck" in reasons_of(cluster.client, w1), 120,
                     "the role to wait while NMO maintains worker-03")
            assert node_clean(cluster.client, w1) is None and maintenance_of(cluster.client, w1) is None
            cluster.kubectl("delete", "nodemaintenance", f"by-hand-{world.id}")  # its owner ends it
            assert playbook.wait() == 0, playbook.output[-5000:]
        finally:
            if playbook.proc.poll() is None:
                playbook.kill()
            playbook.close()
    assert nodes.most_at_once == 1, nodes.history
    assert "made by someone else" in playbook.output or "did not make" in playbook.output \
        or w3 not in nodes.order[1:], playbook.output[-3000:]
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.workers if maintenance_of(cluster.client, n)] == []


def test_nmo_stopped_in_the_middle_then_back_the_run_finishes(medik8s, cluster, world, user, tmp_path):
    (w1,) = world.add_nodes(workers=1)
    world.vm("vm-web", node=w1)  # NMO's drain waits on the VM's PDB while NMO is stopped
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn")
    playbook = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    try:
        wait_for(lambda: ((maintenance_of(cluster.client, w1) or {}).get("status") or {}).get("phase") == "Running",
                 120, "NMO to start draining worker-01")
        # no status of ours came first: NMO set up its own (it does so only while the phase is empty)
        status = maintenance_of(cluster.client, w1)["status"]
        assert status.get("evictionPods") == 1 and status.get("totalpods", 0) >= 1, status
        assert not status.get("errorOnLeaseCount"), status
        with medik8s.nmo_stopped():
            assert playbook.proc.poll() is None, "the run ended while NMO was away"
            cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                                 "kubevirt-disruption-budget-vm-web", {"spec": {"minAvailable": 0}}, "merge")
        assert playbook.wait() == 0, playbook.output[-5000:]
    finally:
        if playbook.proc.poll() is None:
            playbook.kill()
        playbook.close()
    wait_clean(cluster.client, [w1])
    assert maintenance_of(cluster.client, w1) is None


def test_standalone_with_a_running_nmo_is_refused_before_anything_is_written(medik8s, cluster, world, user,
                                                                             tmp_path):
    (w1,) = world.add_nodes(workers=1)
    inventory = write_inventory(world, tmp_path, node_maintenance_mode="standalone")
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    assert result.proc.returncode != 0
    assert "a Node Maintenance Operator handles NodeMaintenance objects here" in result.output, result.output[-3000:]
    assert maintenance_of(cluster.client, w1) is None and node_clean(cluster.client, w1) is None
    assert cluster.client.get_or_none(f"{LEASES}/node-{w1}") is None


def test_nmo_webhook_answers_and_our_crd_is_not_replaced(medik8s, cluster, world):
    (w1,) = world.add_nodes(workers=1)
    made = run_module("nmo_crd", {"node": w1, "name": f"ours-{world.id}"}, cluster.kubeconfig)
    assert not made.get("failed"), made.get("msg")
    wait_for(lambda: NMO_FINALIZER in ((cluster.client.get_or_none(f"{NM_PATH}/ours-{world.id}") or {})
                                       .get("metadata", {}).get("finalizers") or []), 60, "NMO to take it")
    second = cluster.kubectl("apply", "-f", "-", check=False, input=(
        '{"apiVersion": "nodemaintenance.medik8s.io/v1beta1", "kind": "NodeMaintenance", '
        f'"metadata": {{"name": "second-{world.id}"}}, "spec": {{"nodeName": "{w1}"}}}}'))
    assert second.returncode != 0 and f"a NodeMaintenance for node {w1} already exists" in second.stderr, second.stderr
    gone = run_module("nmo_crd", {"node": w1, "state": "absent"}, cluster.kubeconfig)
    assert not gone.get("failed"), gone.get("msg")
    assert maintenance_of(cluster.client, w1) is None, "the end did not wait for NMO's finalizer"
    wait_clean(cluster.client, [w1])


def test_nmos_crd_installed_first_takes_our_objects(medik8s, cluster, world, user, tmp_path):
    """NMO's own CRD (no CEL rule, no printer columns of ours) installed before us: the role
    keeps it, and its objects work for both. Ours is put back afterwards for the other tests."""
    from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd

    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd.CRD_NAME}"
    assert not (cluster.client.get(NM_PATH) or {}).get("items"), "an earlier test left a NodeMaintenance"
    cluster.client.delete(crd_path)  # a cluster where NMO came first: its CRD, not ours
    wait_for(lambda: cluster.client.get_or_none(crd_path) is None, 120, "our CRD to go")
    medik8s.install_crd()
    try:
        assert crd.ensure(cluster.client)["state"] == "foreign", "NMO's CRD is not left alone"
        (w1,) = world.add_nodes(workers=1)
        inventory = write_inventory(world, tmp_path)
        result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
        assert result.proc.returncode == 0, result.output[-4000:]
        assert cluster.client.get(crd_path)["metadata"].get("labels", {}).get(crd.MANAGED_BY_LABEL) != crd.MANAGED_BY
        wait_clean(cluster.client, [w1])
        assert maintenance_of(cluster.client, w1) is None
    finally:
        cluster.client.delete(crd_path)  # no object is left: ours comes back on a clean slate
        wait_for(lambda: cluster.client.get_or_none(crd_path) is None, 120, "NMO's CRD to go")
        assert crd.ensure(cluster.client)["state"] == "created"


def test_operator_mode_resumes_after_a_killed_run(medik8s, cluster, world, user, tmp_path):
    """Killed while NMO drains (a PDB holds it): the heartbeat ends the run, NMO keeps the
    node in maintenance, and the rerun adopts the NodeMaintenance and finishes with NMO."""
    from .maintenance_support import run_of

    (w1,) = world.add_nodes(workers=1)
    world.vm("vm-db", node=w1)
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn")
    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    try:
        wait_for(lambda: ((maintenance_of(cluster.client, w1) or {}).get("status") or {}).get("phase") == "Running",
                 120, "NMO to start draining worker-01")
        wait_for(lambda: f"{w1}: drainProgress" in first.output, 60, "a progress line from NMO's status")
        killed = run_of(cluster.client, w1)
    finally:
        first.kill()
        first.close()
    wait_run_gone(cluster.client, killed)
    assert node_clean(cluster.client, w1) is not None, "NMO keeps the node in maintenance"
    cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                         "kubevirt-disruption-budget-vm-db", {"spec": {"minAvailable": 0}}, "merge")
    again = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    assert again.proc.returncode == 0, again.output[-4000:]
    assert "ResumeMaintenance" in reasons_of(cluster.client, f"maintenance-{w1.removeprefix('node-')}")
    wait_clean(cluster.client, [w1])
    assert maintenance_of(cluster.client, w1) is None
    assert leases_naming(cluster.client, [w1], slot_prefix(world)) == []


def test_operator_mode_quarantines_a_node_nmo_cannot_drain(medik8s, cluster, world, user, tmp_path):
    """Operator mode, node_maintenance_on_blocked quarantine (docs/design.md §18.4): NMO cannot
    evict the pod behind a PodDisruptionBudget that never allows it; when the drain's timeout
    ends our wait, NMO's pendingPods are the blocker. The NodeMaintenance is deleted (NMO
    uncordons as it lets go), the node is cordoned and tainted again as ours with the
    quarantine's marks, the other node finishes through NMO, rc 0; recover.yml lifts it."""
    blocked, free = world.add_nodes(workers=2)
    block(world, blocked, "db")
    inventory = write_inventory(world, tmp_path)
    run_id = f"o{world.id}"
    proc = maintain(inventory, user, tmp_path, run_id, 1, "quarantine", 1, "warn")
    code = finished(proc, 600)
    output = proc.output
    assert code == 0, errors(output) or output[-4000:]
    assert "mode operator" in output, "auto did not find NMO"
    assert (f"node {blocked} could not be drained (the Node Maintenance Operator's drain did not finish in "
            f"{DRAIN_TIMEOUT} s; pending: db-") in output, errors(output) or output[-4000:]
    wait_run_gone(cluster.client, run_id)

    node = cluster.client.get(f"/api/v1/nodes/{blocked}")
    assert node["metadata"]["labels"].get(QUARANTINED) == "true", node["metadata"]
    assert "did not finish" in quarantine_of(cluster, blocked)[QUARANTINED], node["metadata"]
    assert node["spec"].get("unschedulable") is True, "NMO's uncordon was not followed by ours"
    assert DRAIN_TAINT in [t["key"] for t in node["spec"].get("taints") or []], node["spec"]
    assert maintenance_of(cluster.client, blocked) is None, "the NodeMaintenance was left to NMO"
    wait_clean(cluster.client, [free])
    assert maintenance_of(cluster.client, free) is None
    assert leases_naming(cluster.client, world.workers, slot_prefix(world)) == [], "a slot or NMO's lease was kept"
    nodes = report_nodes(tmp_path, run_id)
    assert nodes[blocked]["outcome"] == "quarantined" and nodes[free]["outcome"] == "succeeded", nodes

    lifted = run_playbook(None, cluster.kubeconfig, args=["-e", f"nmo_nodes={blocked}"],
                          playbook_path=str(PLAYBOOKS / "recover.yml"))
    assert lifted.rc == 0, lifted.stdout[-3000:]
    wait_clean(cluster.client, [blocked])
    assert quarantine_of(cluster, blocked) == {}
