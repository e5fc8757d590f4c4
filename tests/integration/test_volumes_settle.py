"""Volumes detached before the work, workloads whole again before the next node (issue 25;
docs/design.md §4.7.8, §4.9.1), on the local control plane, as the least-privilege user.

kwok has no attach/detach controller: the test makes the VolumeAttachments and the node's
``status.volumesAttached`` itself and removes them when it wants the wait to end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from topology import WORLD_LABEL, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError, NmoError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import settle as settle_model
from ansible_collections.nmo.maintenance.plugins.modules import nmo_drain, nmo_settle

from .maintenance_support import (
    AuditLog,
    Background,
    Contention,
    NodeRecorder,
    Run,
    events_of,
    maintenance_of,
    nm_name,
    nm_status,
    run,
    start_maintenance,
    throttled,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster]

VAS = "/apis/storage.k8s.io/v1/volumeattachments"
PVS = "/api/v1/persistentvolumes"
DRIVER = "test.csi.nmo"


def params(spec: Dict[str, Any], **given: Any) -> Dict[str, Any]:
    """A module's parameters as Ansible would hand them over: every option, defaults filled in."""
    return {**{name: option.get("default") for name, option in spec.items()}, **given}


def attach(cluster: Any, world: Any, node: str, name: str, pv: str, handle: str) -> None:
    """What the attach/detach controller and the kubelet would show for one CSI volume."""
    cluster.client.post(VAS, {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
                              "metadata": {"name": name, "labels": {WORLD_LABEL: world.id}},
                              "spec": {"attacher": DRIVER, "nodeName": node, "source": {"persistentVolumeName": pv}}})
    attached = world.node(node).get("status", {}).get("volumesAttached") or []
    attached.append({"name": f"kubernetes.io/csi/{DRIVER}^{handle}", "devicePath": ""})
    cluster.client.patch(f"/api/v1/nodes/{node}/status", {"status": {"volumesAttached": attached}}, "merge")


def detach(cluster: Any, world: Any, node: str, name: str, handle: str) -> float:
    """The volume gone from the node; when (monotonic) the request that removes the last of it
    was about to be sent: a wait watching the node may see it before this request returns."""
    cluster.client.delete(f"{VAS}/{name}")
    attached = [v for v in world.node(node).get("status", {}).get("volumesAttached") or []
                if not v["name"].endswith("^" + handle)]
    sent_at = time.monotonic()
    cluster.client.patch(f"/api/v1/nodes/{node}/status", {"status": {"volumesAttached": attached or None}}, "merge")
    return sent_at


def clean_volumes(cluster: Any, world: Any) -> None:
    """The test's VolumeAttachments and PVs, and the protection finalizers of its claims and PVs
    (no controller here removes them: the namespace would never go)."""
    ns = world.namespace
    for pvc in cluster.client.get(f"/api/v1/namespaces/{ns}/persistentvolumeclaims").get("items", []):
        cluster.client.patch(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{pvc['metadata']['name']}",
                             {"metadata": {"finalizers": None}}, "merge")
    for path in (VAS, PVS):
        for item in cluster.client.get(path, {"labelSelector": f"{WORLD_LABEL}={world.id}"}).get("items", []):
            name = item["metadata"]["name"]
            cluster.client.patch(f"{path}/{name}", {"metadata": {"finalizers": None}}, "merge")
            if cluster.client.get_or_none(f"{path}/{name}") is not None:
                cluster.client.delete(f"{path}/{name}")


def agent_with_a_volume(cluster: Any, world: Any) -> None:
    """A DaemonSet whose pods mount a claim bound to PV pv-agent: it stays on the drained node,
    and so does its volume (the wait must not wait for it)."""
    ns = world.ensure_namespace()
    cluster.client.post(PVS, {"apiVersion": "v1", "kind": "PersistentVolume",
                              "metadata": {"name": f"pv-agent-{world.id}", "labels": {WORLD_LABEL: world.id}},
                              "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                                       "csi": {"driver": DRIVER, "volumeHandle": "h-agent"},
                                       "claimRef": {"namespace": ns, "name": "agent-data"}}})
    cluster.client.post(f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "agent-data", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeName": f"pv-agent-{world.id}", "storageClassName": ""}})
    # no persistent-volume controller here: bound as it would bind them, for the scheduler
    cluster.client.patch(f"{PVS}/pv-agent-{world.id}/status", {"status": {"phase": "Bound"}}, "merge")
    cluster.client.patch(f"/api/v1/namespaces/{ns}/persistentvolumeclaims/agent-data/status",
                         {"status": {"phase": "Bound", "accessModes": ["ReadWriteMany"],
                                     "capacity": {"storage": "1Gi"}}}, "merge")
    spec = world._pod_spec(extra={"tolerations": [{"operator": "Exists"}],
                                  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "agent-data"}}]})
    cluster.client.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": spec}}})
    world.wait_pods_ready("app=agent", len(world.nodes))


def test_the_volume_wait_holds_until_detached_names_them_and_survives_an_api_server_restart(cluster, world, user):
    """A timeout first (the volume named, nothing of the agent's), then a wait across a restart of
    kube-apiserver that ends only after the test removed the volume; the snapshot for the settle
    is on the Node. Module calls, as the least-privilege user."""
    world.add_nodes(workers=2)
    w1, _w2 = world.workers
    client = connect(ConnectionOptions(kubeconfig=user.kubeconfig), pool_size=8)
    try:
        agent_with_a_volume(cluster, world)
        with world.only_schedulable(w1):
            world.deployment("web", 2)
        world.pdb("web", "web", max_unavailable=1)
        attach(cluster, world, w1, f"va-agent-{world.id}", f"pv-agent-{world.id}", "h-agent")
        attach(cluster, world, w1, f"va-data-{world.id}", f"pv-data-{world.id}", "h-data")
        nm = start_maintenance(cluster, world, w1)
        name = nm["metadata"]["name"]
        drain_args = params(nmo_drain.ARGUMENT_SPEC, node=w1, maintenance=name, settle=True)

        with pytest.raises(NmoError) as timed_out:
            nmo_drain.core(client, {**drain_args, "volume_detach_timeout": 2})
        message = timed_out.value.message
        assert f"volumes still attached to node {w1} after 2 s (volume_detach_timeout)" in message, message
        assert f"VolumeAttachment va-data-{world.id} (PV pv-data-{world.id})" in message, message
        assert f"kubernetes.io/csi/{DRIVER}^h-data" in message, message
        assert "agent" not in message, f"the DaemonSet's volume stays with it, not waited for: {message}"
        assert nm_status(cluster, name)["lastError"] == message
        assert any(e["reason"] == "DrainError" and "volumes still attached" in e["message"]
                   for e in events_of(cluster.client, name))
        snap = settle_model.decode(world.node(w1)["metadata"]["annotations"][settle_model.ANNOTATION])
        assert {(w["kind"], w["name"]) for w in snap["workloads"]} == {("Deployment", "web")}, snap
        assert [(b["name"], b["allowed"]) for b in snap["budgets"]] == [("web", 1)], snap

        waiting = Background(lambda: nmo_drain.core(client, {**drain_args, "volume_detach_timeout": 120}))
        wait_for(lambda: nm_status(cluster, name).get("lastError", "").startswith(
            f"waiting for volumes to detach from node {w1}"), 30, "the wait's progress in the status")
        cluster.restart("kube-apiserver")  # under the running wait: its watches must reopen
        assert waiting.returned_at is None, "the wait ended while the volume was still attached"
        detached_at = detach(cluster, world, w1, f"va-data-{world.id}", "h-data")
        done = waiting.join(60)
        assert waiting.returned_at >= detached_at
        assert done["volumes"]["waited"] and done["volumes"]["attached"] == []
        assert done["volumes"]["was_attached"] == sorted([f"VolumeAttachment va-data-{world.id} (PV pv-data-{world.id})",
                                                          f"volumesAttached kubernetes.io/csi/{DRIVER}^h-data"])
        assert f"pv-agent-{world.id}" in done["volumes"]["ignored"]
        assert done["settle"] == snap, "the rerun's snapshot keeps the first one's counts"
        assert nm_status(cluster, name)["lastError"] == ""
        assert any(e["reason"] == "Drain" and e["message"].startswith("No volume attached to node")
                   for e in events_of(cluster.client, name))
    finally:
        clean_volumes(cluster, world)
        cluster.restart_controllers()


def test_the_volume_wait_and_the_settle_under_throttling_finish_and_blame_nothing(cluster, world, user):
    """API Priority and Fairness gives the collection's user one seat, kept busy by another
    reader of theirs, and rejects (429) what does not fit: the drain's evictions, the volume
    wait's and the settle's requests back off (Retry-After) and go on. The volume wait ends only
    after the test detached the volume, the settle only after the evicted pods could be
    scheduled again; no error is written anywhere. Which of the waits' requests were refused is
    chance (printed); that the runs are refused and still right is not."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    client = connect(ConnectionOptions(kubeconfig=user.kubeconfig), pool_size=8)
    try:
        with world.only_schedulable(w1):
            world.deployment("web", 3)
        world.pdb("web", "web", max_unavailable=3)
        attach(cluster, world, w1, f"va-data-{world.id}", f"pv-data-{world.id}", "h-data")
        nm = start_maintenance(cluster, world, w1)
        name = nm["metadata"]["name"]
        world.cordon(w2)  # the evicted pods wait, Pending, until the test lets them go to w2
        audit = AuditLog(cluster)
        drain_args = params(nmo_drain.ARGUMENT_SPEC, node=w1, maintenance=name, settle=True,
                            volume_detach_timeout=180, timeout=180)
        noise = f"/api/v1/nodes/{w2}"

        with throttled(cluster, user.name), Contention(user.kubeconfig, noise):
            draining = Background(lambda: nmo_drain.core(client, drain_args))
            wait_for(lambda: nm_status(cluster, name).get("lastError", "").startswith(
                f"waiting for volumes to detach from node {w1}"), 120, "the volume wait under throttling")
            assert draining.returned_at is None, "the drain ended while the volume was attached"
            detached_at = detach(cluster, world, w1, f"va-data-{world.id}", "h-data")
            drained = draining.join(120)
            assert draining.returned_at >= detached_at

            settling = Background(lambda: nmo_settle.core(client, params(nmo_settle.ARGUMENT_SPEC, node=w1,
                                                                         timeout=180)))
            wait_for(lambda: any(e["reason"] == "Settle" and e["message"].startswith("Waiting for")
                                 for e in events_of(cluster.client, w1)), 120, "the settle's wait under throttling")
            assert settling.returned_at is None, "the settle ended while no replacement was scheduled"
            released_at = time.monotonic()
            world.cordon(w2, on=False)
            settled = settling.join(180)
            assert settling.returned_at >= released_at

        rejected = [e for e in audit.requests_of(user.name, code=429) if e["requestURI"] != noise]
        kinds = sorted({(e["verb"], e.get("objectRef", {}).get("resource", "")) for e in rejected})
        print(f"\nthrottled: {len(rejected)} requests answered 429 {kinds}; drain {drained['elapsed']} s "
              f"({drained['api_requests']} requests), settle {settled['elapsed']} s ({settled['api_requests']} requests)")
        assert rejected, "the FlowSchema throttled nothing: the test proves nothing"
        assert len(drained["evicted"]) == 3 and drained["pending"] == [], drained
        assert drained["volumes"]["waited"] and drained["volumes"]["attached"] == [], drained["volumes"]
        assert settled["settled"] and settled["not_whole"] == [], settled
        assert [w["name"] for w in settled["snapshot"]["workloads"]] == ["web"], settled["snapshot"]
        status = nm_status(cluster, name)
        assert (status["phase"], status["lastError"]) == ("Succeeded", ""), status
        assert [e for e in events_of(cluster.client, name) if e["type"] == "Warning"] == []
        assert [e for e in events_of(cluster.client, w1) if e["type"] == "Warning"] == []
        marks = world.node(w1)["metadata"].get("annotations") or {}
        assert settle_model.ANNOTATION not in marks, "the settle left its snapshot behind"
        world.wait_pods_ready("app=web", 3)
    finally:
        world.cordon(w2, on=False)
        clean_volumes(cluster, world)


def test_bad_input_for_the_new_options_is_refused_before_anything_is_written(cluster, world, user, tmp_path):
    world.add_nodes(workers=1)
    (w1,) = world.workers
    client = connect(ConnectionOptions(kubeconfig=user.kubeconfig), pool_size=4)
    for bad in (-1, float("nan"), "soon"):
        with pytest.raises(InputError, match="volume_detach_timeout"):
            nmo_drain.core(client, params(nmo_drain.ARGUMENT_SPEC, node=w1, settle=True, volume_detach_timeout=bad))
        with pytest.raises(InputError, match="timeout"):
            nmo_settle.core(client, params(nmo_settle.ARGUMENT_SPEC, node=w1, timeout=bad))
    assert settle_model.ANNOTATION not in (world.node(w1)["metadata"].get("annotations") or {})

    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="off")
    bad = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
              extra_vars={"node_maintenance_settle_timeout": -5, "node_maintenance_volume_detach_timeout": "later"})
    assert bad.proc.returncode != 0
    assert "node_maintenance_settle_timeout: -5 must be between 0 (no wait) and 604800 seconds" in bad.output, \
        bad.output[-3000:]
    assert "node_maintenance_volume_detach_timeout" in bad.output
    assert maintenance_of(cluster.client, w1) is None
    assert not world.node(w1)["spec"].get("unschedulable")


def hook_files(tmp_path: Path, cluster: Any, node: str, label: str) -> Dict[str, str]:
    """The work hook writes when it started (marker), then takes the node's pool label away, as
    a hardware swap that loses the node's labels: the workload pinned to the pool can no longer
    come back anywhere."""
    marker = tmp_path / "work-started"
    work = tmp_path / "work.yml"
    work.write_text(json.dumps([
        {"name": "work started", "ansible.builtin.copy": {"dest": str(marker), "content": "{{ now().timestamp() }}"}},
        {"name": "the node loses its pool label", "ansible.builtin.command": {
            "argv": [f"{cluster.bin}/kubectl", "--kubeconfig", cluster.kubeconfig, "label", "node", node, f"{label}-"]},
         "when": f"node_maintenance_node == '{node}'"}]))
    return {"marker": str(marker), "work": str(work)}


def settle_task(r: Run) -> List[Dict[str, Any]]:
    return r.task("Settle | Wait until what the drain evicted is whole again")


def test_volumes_then_work_then_settle_fails_the_run_then_a_killed_settle_is_resumed(cluster, world, user, tmp_path):
    """Two workers, one at a time. worker-01 has a volume attached: its work hook starts only
    after the test removed it. Its work loses the node's pool label, so the Deployment pinned
    to that pool cannot come back: the settle fails naming it and the scheduler's reason, and
    worker-02 never gets a NodeMaintenance. The next run only settles worker-01 (plan settle);
    killed during that settle, the run after settles it (the label is back) and maintains
    worker-02."""
    pool = f"nmo.test/pool-{world.id}"
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    cluster.client.patch(f"/api/v1/nodes/{w1}", {"metadata": {"labels": {pool: "a"}}}, "merge")
    world.deployment("pinned", 1, pod_extra={"nodeSelector": {pool: "a"}})
    world.deployment("web", 2)
    world.pdb("web", "web", max_unavailable=1)
    files = hook_files(tmp_path, cluster, w1, pool)
    inventory = write_inventory(world, tmp_path, node_maintenance_hooks_work=[files["work"]],
                                node_maintenance_preflight="off", node_maintenance_settle_timeout=6,
                                node_maintenance_volume_detach_timeout=120, node_maintenance_progress_interval=1)
    try:
        attach(cluster, world, w1, f"va-data-{world.id}", f"pv-data-{world.id}", "h-data")
        with NodeRecorder(cluster.client, world) as nodes:
            first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
            try:
                wait_for(lambda: "waiting for volumes to detach" in (nm_status(cluster, nm_name(w1)).get("lastError") or ""),
                         120, "the volume wait of worker-01")
                wait_for(lambda: f"{w1}: drainProgress 100%, 0 pending pod(s); last error: waiting for volumes to detach"
                         in first.output, 30, "the progress line naming the volume")
                assert not Path(files["marker"]).exists(), "the work hook started while a volume was attached"
                detached_at = time.time()
                detach(cluster, world, w1, f"va-data-{world.id}", "h-data")
                assert first.wait(240) != 0, first.output[-4000:]
            finally:
                if first.proc.poll() is None:
                    first.kill()
                first.close()
        assert float(Path(files["marker"]).read_text()) >= detached_at - 0.5, "the work began before the detach"
        msg = first.output
        assert f"fatal: [{w1} -> localhost]: FAILED!" in msg, msg[-4000:]
        assert f"Deployment {world.namespace}/pinned: 0 of 1 replicas ready" in msg, msg[-4000:]
        assert "Unschedulable" in msg and "didn't match Pod's node affinity/selector" in msg, msg[-4000:]
        assert "after 6 s (settle_timeout). The node is back in service; the next node is not begun" in msg
        assert nodes.order == [w1], f"worker-02 began after a failed settle: {nodes.history}"
        assert maintenance_of(cluster.client, w2) is None and maintenance_of(cluster.client, w1) is None
        marks = world.node(w1)["metadata"]["annotations"]
        assert settle_model.ANNOTATION in marks and settle_model.ENDED in marks, marks

        second = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                     extra_vars={"node_maintenance_settle_timeout": 300, "node_maintenance_run_id": f"settle-{world.id}"})
        try:
            wait_for(lambda: any(e["reason"] == "Settle" and e["message"].startswith("Waiting for")
                                 for e in events_of(cluster.client, w1)) and "Settle | Wait until" in second.output,
                     120, "the rerun's settle of worker-01")
        finally:
            second.kill()
            second.close()
        wait_run_gone(cluster.client, f"settle-{world.id}")  # the heartbeat saw ansible-playbook die
        assert maintenance_of(cluster.client, w1) is None, "plan settle begins nothing"
        assert settle_model.ENDED in world.node(w1)["metadata"]["annotations"]

        cluster.client.patch(f"/api/v1/nodes/{w1}", {"metadata": {"labels": {pool: "a"}}}, "merge")
        third = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                    extra_vars={"node_maintenance_settle_timeout": 120})
        assert third.proc.returncode == 0, third.output[-4000:]
        begun = [r["host"] for r in third.task("Begin | NodeMaintenance, leases and etcd guard, taints, cordon and "
                                               "label") if r["status"] != "skipped"]
        assert begun == [w2], f"worker-01 was to be settled only: {begun}: {third.output[-6000:]}"
        settled = {r["host"]: r["result"] for r in settle_task(third)}
        assert settled[w1]["settled"] and settled[w2]["settled"], settled
        assert "pinned" in [w["name"] for w in settled[w1]["snapshot"]["workloads"]], settled[w1]
        for node in (w1, w2):
            marks = world.node(node)["metadata"].get("annotations") or {}
            assert settle_model.ANNOTATION not in marks and settle_model.ENDED not in marks, marks
    finally:
        clean_volumes(cluster, world)
