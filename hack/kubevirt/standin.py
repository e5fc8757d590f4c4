#!/usr/bin/env python
"""A STAND-IN for KubeVirt's migration controllers, for the local cluster only. It is not KubeVirt.

KubeVirt's controllers need real nodes (virt-handler, libvirt, QEMU) and cannot run on kwok's
fake ones. This process reproduces what KubeVirt does *observably* through the API when a
VirtualMachineInstanceMigration (VMIM) is created, so that the collection's KubeVirt hook
(plugins/module_utils/: model/kubevirt.py, stores/kubevirt.py, workflows/migrations.py) can be
tested against a real API server:

- virt-controller's migration controller: a new VMIM goes through the phases
  Pending -> Scheduling -> Scheduled -> PreparingTarget -> TargetReady -> Running -> Succeeded,
  each recorded in ``status.phaseTransitionTimestamps``; the target virt-launcher pod is created
  (a copy of the source pod with an anti-affinity to the source node, as KubeVirt adds) and
  the kube-scheduler places it on another schedulable node; the VMI's
  ``status.migrationState`` (sourceNode, targetNode, targetPod, migrationUid, start/end,
  completed/failed, failureReason) and, once done, ``status.nodeName`` (and its
  ``kubevirt.io/nodeName`` label) follow;
- virt-controller's disruption-budget controller: the VMI's PodDisruptionBudget (the one the
  VMI owns) is raised to ``minAvailable: 2`` while its migration runs, so neither pod may be
  evicted, and set back to 1 afterwards;
- virt-handler: after the switch-over the source virt-launcher pod ends (phase Succeeded);
- virt-controller's VMI controller: the VMI's ``LiveMigratable`` condition.

Told by annotations on the VMI (these are the stand-in's, not KubeVirt's):
  ``kubevirt.test/not-migratable: "<Reason>: <message>"``  LiveMigratable=False with them
      (KubeVirt reasons: DisksNotLiveMigratable, InterfaceNotLiveMigratable, ...); a VMIM
      for such a VMI fails at once, where KubeVirt's admission webhook would refuse it;
  ``kubevirt.test/fail-migration: "<failure reason>"``  the migration fails in phase
      Running: the target pod is removed, the VM stays on its source, the VMIM ends
      Failed with ``migrationState.failureReason`` set to that text.

Not reproduced: KubeVirt's own queueing of migrations beyond its parallel limits, eviction
strategies (its eviction webhook), and everything about the guest. Each phase takes
``--step`` seconds (a migration's real duration is a matter of memory size and bandwidth).

    python hack/kubevirt/standin.py --kubeconfig KUBECONFIG --namespace NS [--namespace NS2] [--step 0.3]

It serves the namespaces given (the cluster is shared by test worlds) until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import copy
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests")]

from helpers import collection_path  # noqa: E402

sys.path.insert(0, str(collection_path()))

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import (  # noqa: E402
    Client,
    ConnectionOptions,
    connect,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import (  # noqa: E402
    MultiWatcher,
    Watcher,
    wait_until,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError, NotFound  # noqa: E402

Obj = Dict[str, Any]
API = "/apis/kubevirt.io/v1"
NOT_MIGRATABLE = "kubevirt.test/not-migratable"
FAIL_MIGRATION = "kubevirt.test/fail-migration"
NODE_LABEL = "kubevirt.io/nodeName"
CREATED_BY = "kubevirt.io/created-by"
MIGRATION_JOB = "kubevirt.io/migrationJobUID"
PHASES = ("Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running", "Succeeded")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def log(message: str) -> None:
    print(f"{now()} kubevirt-standin: {message}", flush=True)


def live_migratable(vmi: Obj) -> Obj:
    """The LiveMigratable condition virt-controller would compute for ``vmi``."""
    told = (vmi["metadata"].get("annotations") or {}).get(NOT_MIGRATABLE)
    if told is None:
        return {"type": "LiveMigratable", "status": "True", "lastProbeTime": None, "lastTransitionTime": None}
    reason, _sep, message = told.partition(":")
    return {"type": "LiveMigratable", "status": "False", "reason": reason.strip() or "NotLiveMigratable",
            "message": message.strip(), "lastProbeTime": None, "lastTransitionTime": None}


def launcher_pods(client: Client, namespace: str, vmi: Obj) -> List[Obj]:
    selector = f"{CREATED_BY}={vmi['metadata']['uid']}"
    return client.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector}).get("items", [])


def ready(pod: Optional[Obj]) -> bool:
    return bool(pod) and any(c.get("type") == "Ready" and c.get("status") == "True"
                             for c in (pod.get("status") or {}).get("conditions") or [])


class Migration:
    """One VMIM, played through its phases in its own thread."""

    def __init__(self, client: Client, vmim: Obj, step: float, stopping: threading.Event) -> None:
        self.client = client
        self.vmim = vmim
        self.ns = vmim["metadata"]["namespace"]
        self.name = vmim["metadata"]["name"]
        self.uid = vmim["metadata"]["uid"]
        self.step = step
        self.stopping = stopping
        self.transitions: List[Obj] = []
        self.state: Obj = {}

    # -- writes ---------------------------------------------------------------------------------
    def vmim_path(self) -> str:
        return f"{API}/namespaces/{self.ns}/virtualmachineinstancemigrations/{self.name}"

    def phase(self, phase: str, **extra: Any) -> None:
        self.transitions.append({"phase": phase, "phaseTransitionTimestamp": now()})
        status = {"phase": phase, "phaseTransitionTimestamps": self.transitions, **extra}
        if self.state:
            status["migrationState"] = self.state
        self.client.patch(self.vmim_path() + "/status", {"status": status}, "merge")
        log(f"{self.ns}/{self.name}: {phase}")

    def vmi_status(self, vmi_name: str, status: Obj, labels: Optional[Obj] = None) -> None:
        path = f"{API}/namespaces/{self.ns}/virtualmachineinstances/{vmi_name}"
        self.client.patch(path + "/status", {"status": status}, "merge")
        if labels:
            self.client.patch(path, {"metadata": {"labels": labels}}, "merge")

    def budget(self, vmi: Obj, minimum: int) -> None:
        """The VMI's own PodDisruptionBudget (owned by it), as the disruption-budget controller keeps it."""
        path = f"/apis/policy/v1/namespaces/{self.ns}/poddisruptionbudgets"
        for pdb in self.client.get(path).get("items", []):
            owners = pdb["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == vmi["metadata"]["uid"] for o in owners):
                self.client.patch(f"{path}/{pdb['metadata']['name']}", {"spec": {"minAvailable": minimum}}, "merge")

    def pause(self) -> None:
        if self.stopping.wait(self.step):
            raise InterruptedError("stand-in stopping")

    # -- the migration ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except InterruptedError:
            pass
        except Exception as exc:  # the stand-in goes on with the other migrations
            log(f"{self.ns}/{self.name}: stand-in error {type(exc).__name__}: {exc}")
            try:
                self.fail(f"stand-in error: {exc}")
            except Exception:
                pass

    def fail(self, reason: str, vmi: Optional[Obj] = None, target: str = "") -> None:
        if target:
            try:
                self.client.delete(f"/api/v1/namespaces/{self.ns}/pods/{target}", {"gracePeriodSeconds": 0})
            except NotFound:
                pass
        self.state.update(failed=True, failureReason=reason, endTimestamp=now(), migrationUid=self.uid)
        if vmi is not None:
            self.vmi_status(vmi["metadata"]["name"], {"migrationState": self.state})
            self.budget(vmi, 1)
        self.phase("Failed")
        log(f"{self.ns}/{self.name}: failed: {reason}")

    def _run(self) -> None:
        self.phase("Pending")
        vmi_name = (self.vmim.get("spec") or {}).get("vmiName") or ""
        vmi = self.client.get_or_none(f"{API}/namespaces/{self.ns}/virtualmachineinstances/{vmi_name}")
        if vmi is None:
            self.fail(f"VirtualMachineInstance {self.ns}/{vmi_name} not found")
            return
        cond = live_migratable(vmi)
        if cond["status"] != "True":
            self.fail(f"Cannot migrate VMI, Reason: {cond['reason']}, Message: {cond['message']}")
            return
        source_node = (vmi.get("status") or {}).get("nodeName") or ""
        running = [p for p in launcher_pods(self.client, self.ns, vmi)
                   if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
                   and p["spec"].get("nodeName") == source_node]
        if not running:
            self.fail(f"no running virt-launcher pod of {vmi_name} on node {source_node}")
            return
        source = running[0]
        self.budget(vmi, 2)
        self.pause()
        self.phase("Scheduling")
        target = self.target_pod(source, source_node)
        self.state = {"migrationUid": self.uid, "sourceNode": source_node, "sourcePod": source["metadata"]["name"],
                      "targetPod": target, "startTimestamp": now(), "mode": "PreCopy"}
        pod = self.await_pod(target, lambda p: p is not None and bool(p["spec"].get("nodeName")), "scheduled")
        if pod is None:
            self.fail(f"target pod {target} could not be scheduled", vmi, target)
            return
        self.state["targetNode"] = pod["spec"]["nodeName"]
        self.vmi_status(vmi_name, {"migrationState": self.state})
        self.phase("Scheduled")
        self.pause()
        self.phase("PreparingTarget")
        if self.await_pod(target, ready, "ready") is None:
            self.fail(f"target pod {target} did not become ready", vmi, target)
            return
        self.phase("TargetReady")
        self.pause()
        self.phase("Running")
        self.pause()
        vmi = self.client.get(f"{API}/namespaces/{self.ns}/virtualmachineinstances/{vmi_name}")
        told = (vmi["metadata"].get("annotations") or {}).get(FAIL_MIGRATION)
        if told is not None:
            self.fail(told or "migration failed (kubevirt.test/fail-migration)", vmi, target)
            return
        # the switch-over: the guest runs on the target, virt-handler ends the source pod
        self.client.patch(f"/api/v1/namespaces/{self.ns}/pods/{source['metadata']['name']}/status",
                          {"status": {"phase": "Succeeded", "conditions": [
                              {"type": "Ready", "status": "False", "reason": "PodCompleted"},
                              {"type": "ContainersReady", "status": "False", "reason": "PodCompleted"}]}},
                          "strategic")
        self.state.update(completed=True, endTimestamp=now(), targetNodeDomainDetected=True)
        self.vmi_status(vmi_name, {"nodeName": self.state["targetNode"], "migrationState": self.state},
                        labels={NODE_LABEL: self.state["targetNode"]})
        self.budget(vmi, 1)
        self.phase("Succeeded")

    def target_pod(self, source: Obj, source_node: str) -> str:
        meta = source["metadata"]
        base = meta.get("generateName") or meta["name"].rsplit("-", 1)[0] + "-"
        name = base + uuid.uuid4().hex[:5]
        spec = copy.deepcopy(source["spec"])
        spec.pop("nodeName", None)
        term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [source_node]}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]}}}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": self.ns, "labels": {**(meta.get("labels") or {}),
                                                                            MIGRATION_JOB: self.uid},
                             "annotations": meta.get("annotations") or {},
                             "ownerReferences": meta.get("ownerReferences") or []},
                "spec": spec}
        self.client.post(f"/api/v1/namespaces/{self.ns}/pods", body)
        return name

    def await_pod(self, name: str, condition: Any, what: str, timeout: float = 60) -> Optional[Obj]:
        watcher = Watcher(self.client, f"/api/v1/namespaces/{self.ns}/pods", {"fieldSelector": f"metadata.name={name}"})
        with watcher:
            try:
                return wait_until(watcher, lambda: watcher.objects.get(f"{self.ns}/{name}")
                                  if condition(watcher.objects.get(f"{self.ns}/{name}")) else None,
                                  timeout, lambda: f"target pod {name} {what}")
            except Exception:
                return None


class StandIn:
    """Watches the VMIs and VMIMs of some namespaces and plays KubeVirt's part."""

    def __init__(self, client: Client, namespaces: List[str], step: float) -> None:
        self.client = client
        self.step = step
        self.stopping = threading.Event()
        self.migrations: List[Watcher] = [Watcher(client, f"{API}/namespaces/{ns}/virtualmachineinstancemigrations")
                                          for ns in namespaces]
        self.instances: List[Watcher] = [Watcher(client, f"{API}/namespaces/{ns}/virtualmachineinstances")
                                         for ns in namespaces]
        self.started: set = set()
        self.threads: List[threading.Thread] = []

    def reconcile(self) -> None:
        for watcher in self.instances:
            for vmi in list(watcher.objects.values()):
                self.condition(vmi)
        for watcher in self.migrations:
            for vmim in list(watcher.objects.values()):
                uid = vmim["metadata"]["uid"]
                if uid in self.started or (vmim.get("status") or {}).get("phase"):
                    continue
                self.started.add(uid)
                thread = threading.Thread(target=Migration(self.client, vmim, self.step, self.stopping).run,
                                          name=f"vmim-{vmim['metadata']['name']}", daemon=True)
                thread.start()
                self.threads.append(thread)

    def condition(self, vmi: Obj) -> None:
        wanted = live_migratable(vmi)
        conditions = (vmi.get("status") or {}).get("conditions") or []
        current = next((c for c in conditions if c.get("type") == "LiveMigratable"), None)
        if current is not None and all(current.get(k) == wanted.get(k) for k in ("status", "reason", "message")):
            return
        wanted["lastTransitionTime"] = now()
        kept = [c for c in conditions if c.get("type") != "LiveMigratable"]
        path = f"{API}/namespaces/{vmi['metadata']['namespace']}/virtualmachineinstances/{vmi['metadata']['name']}"
        try:
            self.client.patch(path + "/status", {"status": {"conditions": kept + [wanted]}}, "merge")
        except ApiError as exc:
            log(f"cannot set LiveMigratable of {vmi['metadata']['name']}: {exc}")

    def serve(self) -> None:
        both = MultiWatcher(*self.migrations, *self.instances)
        with both:
            log("serving " + ", ".join(w.path for w in self.migrations))
            while not self.stopping.is_set():
                self.reconcile()
                both.drain_events(0.5)
        for thread in self.threads:
            thread.join(timeout=5)
        log("stopped")

    def stop(self, *_args: Any) -> None:
        self.stopping.set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", action="append", required=True)
    parser.add_argument("--step", type=float, default=0.3, help="seconds each migration phase takes")
    args = parser.parse_args()
    standin = StandIn(connect(ConnectionOptions(kubeconfig=args.kubeconfig)), args.namespace, args.step)
    signal.signal(signal.SIGTERM, standin.stop)
    signal.signal(signal.SIGINT, standin.stop)
    standin.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
