"""The node_maintenance role and its playbooks, end to end on the local control plane.

Every playbook runs as a user bound only to the shipped ClusterRole (meta/rbac), so a verb
missing there fails here. Watchers record the cluster while the runs go on.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from helpers import run_module
from topology import wait_for

from .maintenance_support import (
    LABEL,
    NM_API,
    AvailabilityRecorder,
    NodeRecorder,
    Run,
    events_of,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    run,
    run_of,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

STORY = ["BeginMaintenance", "LeaseAcquired", "Cordon", "SucceedMaintenance", "LeaseReleased", "RemovedMaintenance"]


def assert_nothing_left(cluster, world, nodes):
    wait_clean(cluster.client, nodes)
    left = [n for n in nodes if maintenance_of(cluster.client, n)]
    assert not left, f"NodeMaintenance left for {left}"
    assert leases_naming(cluster.client, nodes, slot_prefix(world)) == []


def hook(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def test_workers_one_at_a_time_without_breaking_a_pdb(cluster, world, user, tmp_path):
    world.add_nodes(workers=6, control_planes=3)
    world.daemonset("agent")
    world.deployment("web", 8)
    world.pdb("web", "web", max_unavailable=1)
    world.statefulset("db", 3)
    world.pdb("db", "db", min_available=2)
    inventory = write_inventory(world, tmp_path)
    # the control-plane nodes take pods too: every workload pod on a worker now must be evicted
    # (replacements mostly land on the emptied, uncordoned workers, so few are evicted twice)
    on_workers = [p["metadata"]["name"] for p in world.pods(namespace=world.namespace, selector="app in (web,db)")
                  if p["spec"].get("nodeName") in world.workers]

    with NodeRecorder(cluster.client, world) as nodes, AvailabilityRecorder(cluster.client, world.namespace) as pods:
        result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
    assert result.proc.returncode == 0, result.output[-4000:]

    assert nodes.most_at_once == 1, f"more than one node in maintenance at once: {nodes.history}"
    assert nodes.order == world.workers, "every worker, in inventory order, and no control-plane node"
    assert pods.fewest["web"] >= 7 and pods.fewest["db"] >= 2, f"a PodDisruptionBudget was violated: {pods.fewest}"
    assert pods.fewest["agent"] == len(world.nodes), "a DaemonSet pod was evicted"
    assert_nothing_left(cluster, world, world.nodes)
    for node in world.workers:
        story = reasons_of(cluster.client, nm_name(node))
        assert [r for r in STORY if r not in story] == [], f"{node}: events {story}"
        assert "UncordonNode" in reasons_of(cluster.client, node)
    drained = result.task("Drain | Evict the pods (PodDisruptionBudgets respected)")
    # evicted, or gone before an eviction was accepted (a retried request whose first one went through)
    left = {e["name"] for r in drained for how in ("evicted", "gone") for e in r["result"][how]}
    assert any(r["result"]["evicted"] for r in drained) and on_workers and set(on_workers) <= left, \
        f"the drains evicted the workloads' pods: {on_workers} {[r['result'] for r in drained]}"
    # the scheduler may have left a worker with only its DaemonSet pod: no drain there to record
    evicting = next(r for r in drained if r["result"]["evicted"])
    assert "Drain" in reasons_of(cluster.client, nm_name(evicting["host"]))
    assert_summary_from_the_record(result, world.workers)


def assert_summary_from_the_record(result, nodes):
    """The summary (set_stats) carries no begin's answer: the name and the lease wait come from
    the end, which read the node's progress record, and the request count is the begin's (kept
    in that record), the drain's, the Ready wait's and the end's, as each task returned them."""
    def ok(name):
        return {r["host"]: r["result"] for r in result.task(name) if r["status"] == "ok"}
    calls = [ok(name) for name in ("Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label",
                                   "Drain | Evict the pods (PodDisruptionBudgets respected)",
                                   "Ready | Wait for the node to be Ready",
                                   "End | Uncordon, remove the label and the taints, release the leases, delete the "
                                   "NodeMaintenance")]
    summaries = {node: said for r in result.task("Summary | Per-node result") if r["status"] == "ok"
                 for node, said in r["result"]["ansible_stats"]["data"]["nmo_maintenance"].items()}
    assert sorted(summaries) == sorted(nodes)
    for node, said in summaries.items():
        want: dict = {}
        for call in calls:
            for kind, count in call[node]["api_requests_by"].items():
                want[kind] = want.get(kind, 0) + count
        assert said["api_requests_by"] == want and said["api_requests"] == sum(want.values()), (node, said, want)
        begun = calls[0][node]
        assert said["maintenance"] == begun["maintenance"]["name"] == nm_name(node), said
        assert abs(said["waited_for_lease"] - begun["waited"]) < 0.01, (said, begun["waited"])


def test_concurrency_two_keeps_two_at_a_time(cluster, world, user, tmp_path):
    world.add_nodes(workers=4)
    world.deployment("web", 4)
    world.pdb("web", "web", max_unavailable=2)
    inventory = write_inventory(world, tmp_path)

    with NodeRecorder(cluster.client, world) as nodes:
        result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                     extra_vars={"node_maintenance_concurrency": 2})
    assert result.proc.returncode == 0, result.output[-4000:]
    assert nodes.most_at_once == 2, f"not two at a time: {nodes.history}"
    assert sorted(nodes.order) == world.workers
    assert_nothing_left(cluster, world, world.nodes)


def test_control_plane_waits_for_etcd_quorum_then_goes_on_by_itself(cluster, world, user, tmp_path):
    """cp-01's etcd member is down (its pod NotReady). cp-01 itself may go (quorum stays
    with cp-02 and cp-03); cp-02 then waits with the etcd event, and continues by itself
    once cp-01's member is Ready again."""
    world.add_nodes(control_planes=3)
    cp1, cp2, cp3 = world.control_planes
    world.etcd_members(ready={cp1: False})
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_timeout=300)

    with NodeRecorder(cluster.client, world) as nodes:
        playbook = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "control_plane"])
        try:
            blocked = f"etcd quorum would not be kept while node {cp2} is in maintenance"
            wait_for(lambda: any(blocked in (e.get("message") or "") for e in events_of(cluster.client, nm_name(cp2))),
                     240, "cp-02 to wait for etcd quorum")
            waiting = maintenance_of(cluster.client, cp2)
            assert waiting["status"]["phase"] == "Pending"
            assert node_clean(cluster.client, cp2) is None, "cp-02 was touched before the guard allowed it"
            assert maintenance_of(cluster.client, cp1) is None, "cp-01 was finished before cp-02 started"
            world.set_pod_ready("kube-system", f"etcd-{cp1}", True)
            assert playbook.wait() == 0, playbook.output[-4000:]
        finally:
            if playbook.proc.poll() is None:
                playbook.kill()
            playbook.close()
    assert nodes.order == [cp1, cp2, cp3] and nodes.most_at_once == 1, nodes.history
    assert_nothing_left(cluster, world, world.nodes)
    assert "EtcdQuorumNotMaintained" in reasons_of(cluster.client, nm_name(cp2))


def test_killed_during_a_drain_then_rerun_resumes_and_finishes(cluster, world, user, tmp_path):
    """worker-02 holds a VM behind a minAvailable 1 PDB: its drain waits. The run is killed
    (SIGKILL, the whole process group) during that drain; the PDB is then relaxed, as the
    VM's owner would after a live migration. The rerun resumes worker-02 first (it holds
    the only slot), then maintains worker-03, and leaves nothing behind."""
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    world.vm("vm-order-processing", node=w2)
    pod = "virt-launcher-vm-order-processing"
    # the pre-flight would rightly refuse to start with a PDB that can never allow an eviction
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_timeout=120, node_maintenance_preflight="warn")

    with NodeRecorder(cluster.client, world) as nodes:
        first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
        try:
            wait_for(lambda: f"{w2}: drainProgress 0%, 1 pending pod(s): {pod}" in first.output, 240,
                     "a progress line for worker-02")
            status = maintenance_of(cluster.client, w2)["status"]
            assert status["phase"] == "Running" and status["pendingPods"] == [pod], status
            assert "DrainError" in reasons_of(cluster.client, nm_name(w2))
            killed_run = run_of(cluster.client, w2)
        finally:
            first.kill()
            first.close()
        wait_run_gone(cluster.client, killed_run)  # the heartbeat saw ansible-playbook die
        assert maintenance_of(cluster.client, w2) is not None
        assert node_clean(cluster.client, w2) is not None, "killed mid-drain, worker-02 stays in maintenance"
        assert node_clean(cluster.client, w3) is None and maintenance_of(cluster.client, w3) is None

        cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                             "kubevirt-disruption-budget-vm-order-processing", {"spec": {"minAvailable": 0}}, "merge")
        again = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
        assert again.proc.returncode == 0, again.output[-4000:]
    resumed = [r["host"] for r in again.task("Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label")]
    assert resumed[0] == w2, f"the rerun did not resume worker-02 first: {resumed}"
    assert nodes.order[:2] == [w1, w2] and w3 in nodes.order and nodes.most_at_once == 1, nodes.history
    assert_nothing_left(cluster, world, world.nodes)
    begins = [e for e in events_of(cluster.client, nm_name(w2)) if e["reason"] == "BeginMaintenance"]
    assert [e.get("count", 1) for e in begins] == [1], "worker-02's NodeMaintenance was made twice, not resumed"


def test_recover_removes_what_a_deleted_nodemaintenance_left_behind(cluster, world, user, tmp_path):
    """failure_policy keep leaves worker-01 in maintenance; its NodeMaintenance is then
    deleted by hand (docs/design.md §12.4, "taints left behind"). recover.yml finds and ends it, and
    leaves alone a node cordoned by a person and a node whose maintenance is under way."""
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    broken = hook(tmp_path, "broken.yml", "- name: The firmware update fails\n  ansible.builtin.fail:\n"
                                          "    msg: firmware update failed\n")
    inventory = write_inventory(world, tmp_path)
    kept = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
               extra_vars={"node_maintenance_failure_policy": "keep", "node_maintenance_hooks_work": [broken]})
    assert kept.proc.returncode != 0
    nm = maintenance_of(cluster.client, w1)
    assert nm["status"]["phase"] == "Failed" and "firmware update failed" in nm["status"]["lastError"], nm["status"]
    assert "FailedMaintenance" in reasons_of(cluster.client, nm["metadata"]["name"])
    assert node_clean(cluster.client, w1) is not None, "failure policy keep must leave the node in maintenance"
    assert leases_naming(cluster.client, [w1], slot_prefix(world)), "keep holds the leases"

    cluster.kubectl("delete", "nodemaintenance", nm["metadata"]["name"])
    world.cordon(w2)  # a person's cordon: not ours to undo
    assert not run_module("nmo_crd", {"node": w3}, user.kubeconfig).get("failed")  # a run under way on w3
    status = run("status.yml", inventory, user.kubeconfig)
    assert status.proc.returncode == 0, status.output[-3000:]
    assert f"{w1}  Ready, SchedulingDisabled" in status.output and "medik8s.io/drain:NoSchedule" in status.output
    assert f"held by {w1}" in status.output, "status shows the slot's holder"

    recovered = run("recover.yml", inventory, user.kubeconfig,
                    extra_vars={"node_maintenance_slot_prefix": slot_prefix(world)})
    assert recovered.proc.returncode == 0, recovered.output[-3000:]
    wait_clean(cluster.client, [w1])
    assert leases_naming(cluster.client, [w1], slot_prefix(world)) == []
    assert cluster.client.get(f"/api/v1/nodes/{w2}")["spec"].get("unschedulable"), "a person's cordon was undone"
    assert maintenance_of(cluster.client, w3) is not None, "a maintenance under way was ended"

    named = run("recover.yml", inventory, user.kubeconfig, extra_vars={"nmo_nodes": w3})
    assert named.proc.returncode == 0, named.output[-3000:]
    assert maintenance_of(cluster.client, w3) is None
    assert "RemovedMaintenance" in reasons_of(cluster.client, nm_name(w3))


def test_failing_hook_rolls_back_that_node_and_stops_the_play(cluster, world, user, tmp_path):
    # rollback asked for: the default (auto) keeps a node whose work failed out of service
    # (test_truth_lifecycle.py)
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    world.deployment("web", 3)
    # the hook reads the node's progress record (docs/design.md §18.5) as its work runs
    failing = hook(tmp_path, "work.yml", "- name: Read the record\n  nmo.maintenance.nmo_progress:\n"
                                         "    node: '{{ node_maintenance_node }}'\n"
                                         "  delegate_to: localhost\n  register: seen\n"
                                         f"  when: inventory_hostname == '{w2}'\n"
                                         "- name: Replace the memory\n  ansible.builtin.fail:\n"
                                         "    msg: \"DIMM slot 3 not detected (record: {{ seen.record.phase }} "
                                         "{{ seen.record.held }} {{ seen.record.reached | join(',') }})\"\n"
                                         f"  when: inventory_hostname == '{w2}'\n")
    inventory = write_inventory(world, tmp_path)

    with NodeRecorder(cluster.client, world) as nodes:
        result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                     extra_vars={"node_maintenance_hooks_work": [failing], "node_maintenance_failure_policy": "rollback"})
    assert result.proc.returncode != 0
    assert f"maintenance of node {w2} failed" in result.output and "DIMM slot 3 not detected" in result.output
    assert nodes.order == [w1, w2], f"the play went on after the failure: {nodes.history}"
    wait_clean(cluster.client, [w1, w2, w3])
    nm = maintenance_of(cluster.client, w2)
    assert nm["status"]["phase"] == "Failed" and "DIMM slot 3 not detected" in nm["status"]["lastError"], result.output[-5000:]
    assert "(record: work all maintenance,lease,taints,cordon)" in result.output, "the record in the work hook"
    progress = nm["status"]["progress"]  # the CRD keeps it: an unknown status field would be pruned
    assert (progress["phase"], progress["failedPhase"], progress["run"]) == ("work", "work", nm["metadata"]["annotations"]
                                                                             ["nmo.maintenance/run"]), progress
    assert "DIMM slot 3 not detected" in progress["failure"] and progress["held"] == "all", progress
    assert progress["failedRun"] == progress["run"], "the CRD keeps the run it failed in (revision 7)"
    assert "FailedMaintenance" in reasons_of(cluster.client, nm["metadata"]["name"])
    assert leases_naming(cluster.client, [w1, w2, w3], slot_prefix(world)) == [], "rollback releases the leases"
    assert maintenance_of(cluster.client, w1) is None and maintenance_of(cluster.client, w3) is None
    assert reasons_of(cluster.client, nm_name(w3)) == [], "worker-03 was touched"
    labels = cluster.client.get(f"/api/v1/nodes/{w2}")["metadata"].get("labels", {})
    assert LABEL not in labels


def test_campaign_skips_finished_nodes_and_the_window_end_starts_none(cluster, world, user, tmp_path):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    inventory = write_inventory(world, tmp_path, node_maintenance_campaign=f"memory-{world.id}")
    first = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1])
    assert first.proc.returncode == 0, first.output[-3000:]
    annotations = cluster.client.get(f"/api/v1/nodes/{w1}")["metadata"]["annotations"]
    assert annotations["nmo.maintenance/campaign"] == f"memory-{world.id}"

    past = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    with NodeRecorder(cluster.client, world) as nodes:
        second = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                     extra_vars={"node_maintenance_window_end": past})
    assert second.proc.returncode == 0, second.output[-3000:]
    assert nodes.order == [], "a node was started"
    plans = {r["host"]: r["result"]["plan"]
             for r in second.task("Look | Decide what to do with the node")}
    assert plans == {w1: "skip-done", w2: "skip-window"}
    assert cluster.client.get_or_none(f"{NM_API}/{nm_name(w2)}") is None


def test_a_play_with_become_still_makes_its_api_calls_without_it(cluster, world, user, tmp_path):
    # No sudo on this machine: any task that took the play's become (to another user) would
    # fail. The hooks (none here) would run with it; the Kubernetes tasks say become: false.
    world.add_nodes(workers=2)
    world.deployment("web", 2)
    inventory = write_inventory(world, tmp_path)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers", "--become", "--become-user", "nobody"])
    assert result.proc.returncode == 0, result.output[-4000:]
    assert_nothing_left(cluster, world, world.nodes)
    assert all("Drain" in reasons_of(cluster.client, nm_name(w)) for w in world.workers)


def test_the_role_alone_in_batches_starts_one_run_and_checks_each_node_once(cluster, world, user, tmp_path):
    """Without the maintenance playbook (a play of its own, serial 1): the first batch starts the
    run, the second finds its id; each node's files are checked once, by its own batch."""
    world.add_nodes(workers=2)
    world.deployment("web", 2)
    inventory = write_inventory(world, tmp_path)
    play = tmp_path / "alone.yml"
    play.write_text(yaml.safe_dump([{"hosts": "workers", "gather_facts": False, "serial": 1,
                                     "roles": ["nmo.maintenance.node_maintenance"]}]))
    result = run(str(play), inventory, user.kubeconfig)
    assert result.proc.returncode == 0, result.output[-3000:]

    started = result.task("Run | Start this run (id, run lease, heartbeat on the controller)")
    assert [r["status"] for r in started] == ["ok", "skipped"], started
    given = [r["result"]["ansible_facts"]["node_maintenance_current_run"]
             for r in result.task("Run | Its id for every node of this play or batch")]
    assert given == [started[0]["result"]["run"]] * 2, given
    checked = result.task("Check files | The options as given, and the hook and gate files exist and load as task lists")
    assert [r["host"] for r in checked] == world.workers
    ended = result.task("End | Uncordon, remove the label and the taints, release the leases, delete the NodeMaintenance")
    assert [r["host"] for r in ended if r["status"] == "ok"] == world.workers
    assert_nothing_left(cluster, world, world.workers)
