"""A maintenance of a real node (issue 34): what the collection promises about a real kubelet.

One playbook run on real-01 (hack/real-node) proves, against containerd and the kubelet:
- the drain of a pod with a 5 s preStop hook and a 10 s grace period is done only once its
  container has exited, and the NodeMaintenance's drainProgress and events say the same;
- a DaemonSet's pod keeps running through the maintenance, the same container;
- an emptyDir pod is evicted and the kubelet removes its directory;
- a power cycle in the work hook: the kubelet stopped, the node NotReady, the kubelet started,
  and the role's Ready wait ends on the kubelet's own Ready, renewed lease and all;
- a static pod is left alone: its mirror pod stays, its container keeps running.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import datetime
from typing import Any, Dict, List

import pytest
import yaml
from topology import WORLD_LABEL, wait_for

from ..maintenance_support import Run, events_of, nm_name
from .conftest import HACK, RealNode

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.real_node]

PRESTOP_S = 5
GRACE_S = 10
# The moments compared are the kernel's uptime (to 10 ms), read in the pod as on the host:
# busybox's date has whole seconds only.
STAMP = "read -r up _ < /proc/uptime && echo $up >"  # then the file

# The work hook: what containerd runs the moment the drain is reported done, and the
# NodeMaintenance then; then a power cycle of the kubelet, the node NotReady in between.
WORK_HOOK = """
- name: Real node | What containerd runs and what the NodeMaintenance says once the drain is done
  ansible.builtin.shell: >-
    cut -d' ' -f1 /proc/uptime > {{ test_dir }}/drained-at &&
    ctr --address {{ real_dir }}/containerd.sock --namespace k8s.io tasks ls > {{ test_dir }}/tasks-when-drained &&
    {{ kubectl }} get nodemaintenance {{ nm }} -o json > {{ test_dir }}/nm-when-drained.json
  changed_when: false
- name: Real node | Power off the kubelet
  ansible.builtin.command: "{{ hack }}/cluster stop kubelet-{{ inventory_hostname }}"
  environment: {NMO_CLUSTER_DIR: "{{ cluster_dir }}"}
  changed_when: true
- name: Real node | The node goes NotReady once its lease lapses
  ansible.builtin.command: "{{ kubectl }} wait node/{{ inventory_hostname }} --for=condition=Ready=Unknown --timeout=180s"
  changed_when: false
# The machine boots for a while after the work: the kubelet starts 8 s after the hook ends,
# so the role's Ready wait begins while the node is still NotReady.
- name: Real node | Power on; the kubelet starts once the machine has booted
  ansible.builtin.shell: >-
    date +%s.%N > {{ test_dir }}/work-ended;
    nohup setsid sh -c 'sleep 8; date +%s.%N > {{ test_dir }}/kubelet-started;
    NMO_CLUSTER_DIR={{ cluster_dir }} {{ hack }}/cluster start kubelet-{{ inventory_hostname }}'
    > {{ test_dir }}/power-on.log 2>&1 < /dev/null &
  changed_when: true
"""


def container_id(pod: Dict[str, Any]) -> str:
    return pod["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]


def running_pod(cluster: Any, namespace: str, name: str) -> Dict[str, Any]:
    def ready() -> Any:
        pod = cluster.client.get_or_none(f"/api/v1/namespaces/{namespace}/pods/{name}")
        statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
        return pod if statuses and statuses[0].get("ready") else None
    return wait_for(ready, 120, f"pod {namespace}/{name} running on the real node")


def seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_a_maintenance_of_a_real_node(cluster, world, real_node: RealNode, tmp_path):
    node, client = real_node.name, cluster.client
    ns = world.ensure_namespace()
    out = tmp_path / "out"
    out.mkdir()
    # -- the node's pods -------------------------------------------------------------------------
    graceful = real_node.pod(
        "graceful", ns, f"trap '{STAMP} /out/exited; exit 0' TERM; sleep 3600 & wait",
        extra={"lifecycle": {"preStop": {"exec": {"command": [
            "sh", "-c", f"{STAMP} /out/prestop; sleep {PRESTOP_S}"]}}},
            "volumeMounts": [{"name": "out", "mountPath": "/out"}]},
        spec={"terminationGracePeriodSeconds": GRACE_S,
              "volumes": [{"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}]})
    scratch = real_node.pod(
        "scratch", ns, "echo data > /scratch/file; exec sleep 3600",
        extra={"volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
        spec={"terminationGracePeriodSeconds": 1, "volumes": [{"name": "scratch", "emptyDir": {}}]})
    for pod in (graceful, scratch):
        client.post(f"/api/v1/namespaces/{ns}/pods", pod)
    keeper = real_node.pod("keeper", ns, "exec sleep 3600")
    keeper_spec = keeper["spec"]
    del keeper_spec["nodeName"]
    client.post(f"/apis/apps/v1/namespaces/{ns}/daemonsets", {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "keeper", "namespace": ns},
        "spec": {"selector": {"matchLabels": {"app": "keeper"}}, "template": {
            "metadata": {"labels": {"app": "keeper"}},
            "spec": {**keeper_spec, "nodeSelector": {"nmo.test/real-node": "true"},
                     "tolerations": [{"key": "nmo.test/real-node", "operator": "Exists"}],
                     "terminationGracePeriodSeconds": 1}}}})
    static = real_node.pod("static", ns, "exec sleep 3600")
    del static["spec"]["nodeName"]
    static["spec"]["terminationGracePeriodSeconds"] = 1
    manifest = real_node.manifests / f"{world.id}-static.yaml"
    manifest.write_text(yaml.safe_dump(static))
    try:
        graceful_pod = running_pod(cluster, ns, "graceful")
        scratch_pod = running_pod(cluster, ns, "scratch")
        mirror = running_pod(cluster, ns, f"static-{node}")
        keeper_pod = wait_for(lambda: next(iter(world.pods(namespace=ns, selector="app=keeper")), None), 60,
                              "the DaemonSet's pod")
        keeper_pod = running_pod(cluster, ns, keeper_pod["metadata"]["name"])
        assert "kubernetes.io/config.mirror" in mirror["metadata"]["annotations"], "a mirror pod"
        scratch_dir = real_node.kubelet_root / "pods" / scratch_pod["metadata"]["uid"]
        assert (scratch_dir / "volumes" / "kubernetes.io~empty-dir" / "scratch" / "file").read_text() == "data\n"
        ids = {name: container_id(p) for name, p in
               (("graceful", graceful_pod), ("keeper", keeper_pod), ("static", mirror))}
        assert set(ids.values()) <= set(real_node.running()), "containerd runs the pods' containers"
        lease_holder = client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")
        assert lease_holder["spec"]["holderIdentity"] == node, "the kubelet, not kwok, renews the node's lease"
        assert "kwok.x-k8s.io/node" not in (client.get(f"/api/v1/nodes/{node}")["metadata"].get("annotations") or {})

        # -- one maintenance, the power cycle in its work hook -------------------------------------
        hook = tmp_path / "work.yml"
        hook.write_text(WORK_HOOK)
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                     "node_maintenance_slot_prefix": f"t{world.id}-slot",
                     "node_maintenance_etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}"},
            "children": {"workers": {"hosts": {node: None}}}}}))
        kubectl = f"{cluster.bin}/kubectl --kubeconfig {cluster.kubeconfig}"
        started = time.time()
        run = Run("maintenance.yml", str(inventory), cluster.kubeconfig, extra_vars={
            "node_maintenance_hooks_work": [str(hook)], "test_dir": str(out), "real_dir": str(real_node.dir),
            "kubectl": kubectl, "nm": nm_name(node), "hack": str(HACK), "cluster_dir": cluster.dir})
        try:
            code = run.wait(600)
        finally:
            if run.proc.poll() is None:
                run.kill()
        assert code == 0, run.output[-5000:]
        took = time.time() - started

        # -- the preStop pod: done only after its container exited, after hook and grace ----------
        drained_at = float((out / "drained-at").read_text())
        prestop_at, exited_at = float((out / "prestop").read_text()), float((out / "exited").read_text())
        assert exited_at - prestop_at >= PRESTOP_S - 0.1, "the kubelet sent SIGTERM only after the preStop hook"
        assert exited_at - prestop_at <= GRACE_S + 1, "within the grace period"
        assert exited_at <= drained_at, "the drain was reported done only after the container exited"
        running_when_drained = [line.split()[0] for line in (out / "tasks-when-drained").read_text().splitlines()[1:]]
        assert ids["graceful"] not in running_when_drained, "containerd had no task of it left"
        assert ids["keeper"] in running_when_drained and ids["static"] in running_when_drained
        status = json.loads((out / "nm-when-drained.json").read_text())["status"]
        assert status["drainProgress"] == 100, status
        assert status["evictionPods"] == 2 and not status.get("pendingPods"), status
        events = [e for e in events_of(client, nm_name(node))
                  if seconds(e.get("firstTimestamp") or e["metadata"]["creationTimestamp"]) >= int(started)]
        reasons = [e["reason"] for e in events]
        assert "BeginMaintenance" in reasons and "SucceedMaintenance" in reasons, reasons
        drain_said = [e["message"] for e in events if e["reason"] == "Drain"]
        assert drain_said and "2 pods to evict" in drain_said[-1] and "2 skipped" in drain_said[-1], drain_said

        # -- the emptyDir pod: evicted, its directory removed by the kubelet ----------------------
        assert client.get_or_none(f"/api/v1/namespaces/{ns}/pods/scratch") is None
        wait_for(lambda: not scratch_dir.exists(), 60, "the kubelet to remove the emptyDir pod's directory")

        # -- the power cycle: the Ready wait ended on the kubelet's own Ready ----------------------
        kubelet_started = float((out / "kubelet-started").read_text())
        ready_wait = [r for r in run.task("Ready | Wait for the node to be Ready") if r["status"] == "ok"]
        assert ready_wait, run.output[-3000:]
        waited = ready_wait[-1]["result"]["waited"]
        # The wait began after the work ended: it ended at work_ended + waited or later.
        work_ended = float((out / "work-ended").read_text())
        assert work_ended + waited >= kubelet_started, \
            f"the Ready wait ended {kubelet_started - work_ended - waited:.1f} s before the kubelet started"
        conditions = {c["type"]: c for c in client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "True"
        assert seconds(conditions["Ready"]["lastTransitionTime"]) >= int(kubelet_started), \
            "Ready again only since the kubelet was started"
        lease = client.get(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node}")["spec"]
        assert lease["holderIdentity"] == node and seconds(lease["renewTime"]) > kubelet_started, lease

        # -- what stays: the DaemonSet's pod and the static pod, the same containers --------------
        assert {n: container_id(running_pod(cluster, ns, p["metadata"]["name"])) for n, p in
                (("keeper", keeper_pod), ("static", mirror))} == {"keeper": ids["keeper"], "static": ids["static"]}
        assert running_pod(cluster, ns, f"static-{node}")["metadata"]["uid"] == mirror["metadata"]["uid"], \
            "the mirror pod was left alone"
        assert {ids["keeper"], ids["static"]} <= set(real_node.running())
        print(f"real-node maintenance: {took:.1f} s; preStop to exit {exited_at - prestop_at:.1f} s; "
              f"Ready wait {waited:.1f} s")
    finally:
        manifest.unlink(missing_ok=True)
        _forget(client, node, world.id)


def _forget(client: Any, node: str, world_id: str) -> None:
    """What the run may have left about the shared real node (the world cleans its own)."""
    for path in (f"/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/{nm_name(node)}",):
        try:
            client.delete(path)
        except Exception as exc:  # noqa: BLE001 - gone already
            if getattr(exc, "status", None) != 404:
                raise
    leases: List[Dict[str, Any]] = (client.get_or_none(
        "/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases") or {}).get("items", [])
    for lease in leases:
        name = lease["metadata"]["name"]
        if node in name or world_id in name:
            try:
                client.delete(f"/apis/coordination.k8s.io/v1/namespaces/medik8s-leases/leases/{name}")
            except Exception as exc:  # noqa: BLE001 - gone already
                if getattr(exc, "status", None) != 404:
                    raise
