"""KubeVirt VMs in a test world (hack/topology.py), for the local cluster's stand-in.

``install_crds`` puts KubeVirt's two CRDs (crds.yaml) on the cluster; ``add_vm`` makes what
KubeVirt makes for a running VM: the VirtualMachineInstance (status: phase Running, nodeName,
LiveMigratable), its virt-launcher pod on the node (labels ``kubevirt.io=virt-launcher`` and
``kubevirt.io/created-by``, owned by the VMI) and its PodDisruptionBudget ``minAvailable: 1``
(owned by the VMI, selecting its launcher pods), which refuses the eviction of a VM's only
pod: ``virt-launcher-vm-order-processing`` of docs/design.md §12.3. ``StandIn`` runs the stand-in
controller (standin.py) as a process for a test or the demo, and stops it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

HERE = Path(__file__).resolve().parent
CRD_FILE = HERE / "crds.yaml"
CRD_API = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
API = "/apis/kubevirt.io/v1"
WORLD_LABEL = "nmo.test/world"
NOT_MIGRATABLE = "kubevirt.test/not-migratable"
FAIL_MIGRATION = "kubevirt.test/fail-migration"


def crds() -> List[Dict[str, Any]]:
    return yaml.safe_load(CRD_FILE.read_text())["items"]


def install_crds(client: Any, timeout: float = 60) -> List[str]:
    """Create the CRDs that are missing and wait until they are served; the names created."""
    made = []
    for crd in crds():
        if client.get_or_none(f"{CRD_API}/{crd['metadata']['name']}") is None:
            client.post(CRD_API, crd)
            made.append(crd["metadata"]["name"])
    from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import poll_until
    from ansible_collections.nmo.maintenance.plugins.module_utils.errors import NotFound, TooManyRequests

    def served(plural: str) -> Optional[bool]:  # Established, then served (404/429 for a moment)
        try:
            client.get(f"{API}/{plural}", {"limit": 1})
            return True
        except (NotFound, TooManyRequests):
            return None

    for crd in crds():
        plural = crd["spec"]["names"]["plural"]
        poll_until(lambda plural=plural: served(plural), timeout, lambda plural=plural: f"{plural} to be served")
    return made


def remove_crds(client: Any, names: List[str]) -> None:
    for name in names:
        try:
            client.delete(f"{CRD_API}/{name}")
        except Exception as exc:
            if getattr(exc, "status", None) != 404:
                raise


def add_vm(world: Any, name: str, node: str, eviction_strategy: Optional[str] = None,
           not_migratable: Optional[str] = None, fail_migration: Optional[str] = None,
           namespace: Optional[str] = None) -> Dict[str, Any]:
    """A running VM on ``node``: VMI, virt-launcher pod, PDB minAvailable 1. ``not_migratable``
    ("Reason: message") and ``fail_migration`` (a failure reason) tell the stand-in."""
    from topology import wait_for  # hack/ is on the path of whoever imports this

    ns = namespace or world.ensure_namespace()
    annotations = {}
    if not_migratable is not None:
        annotations[NOT_MIGRATABLE] = not_migratable
    if fail_migration is not None:
        annotations[FAIL_MIGRATION] = fail_migration
    spec: Dict[str, Any] = {"domain": {"devices": {}, "resources": {"requests": {"memory": "2Gi"}}}}
    if eviction_strategy:
        spec["evictionStrategy"] = eviction_strategy
    vmi = world.client.post(f"{API}/namespaces/{ns}/virtualmachineinstances", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "labels": {WORLD_LABEL: world.id, "kubevirt.io/nodeName": node},
                     "annotations": annotations},
        "spec": spec})
    uid = vmi["metadata"]["uid"]
    migratable: Dict[str, Any] = {"type": "LiveMigratable", "status": "True"}
    if not_migratable is not None:
        reason, _sep, message = not_migratable.partition(":")
        migratable = {"type": "LiveMigratable", "status": "False", "reason": reason.strip(), "message": message.strip()}
    world.client.patch(f"{API}/namespaces/{ns}/virtualmachineinstances/{name}/status", {"status": {
        "phase": "Running", "nodeName": node,
        "conditions": [{"type": "Ready", "status": "True"}, migratable]}}, "merge")
    owner = {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": name, "uid": uid,
             "controller": True, "blockOwnerDeletion": True}
    labels = {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": uid, "vm.kubevirt.io/name": name,
              "app": name, WORLD_LABEL: world.id}
    pod_name = f"virt-launcher-{name}-{uuid.uuid4().hex[:5]}"
    pod_spec = world._pod_spec()
    pod_spec["nodeName"] = node
    world.client.post(f"/api/v1/namespaces/{ns}/pods", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "generateName": f"virt-launcher-{name}-", "labels": labels,
                     "annotations": {"kubevirt.io/domain": name}, "ownerReferences": [owner]},
        "spec": pod_spec})
    budget = f"kubevirt-disruption-budget-{name}"
    world.client.post(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": budget, "labels": {WORLD_LABEL: world.id}, "ownerReferences": [owner]},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"kubevirt.io/created-by": uid}}}})
    world.wait_pods_ready(f"kubevirt.io/created-by={uid}", 1, namespace=ns)
    wait_for(lambda: (world.client.get(f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{budget}")
                      .get("status", {}).get("currentHealthy") == 1), 30, f"PDB {budget} observed")
    return world.client.get(f"{API}/namespaces/{ns}/virtualmachineinstances/{name}")


class StandIn:
    """The stand-in controller (standin.py) as a process, for the world's namespace(s)."""

    def __init__(self, kubeconfig: str, namespaces: List[str], step: float = 0.3,
                 log: Optional[Path] = None) -> None:
        self.cmd = [sys.executable, str(HERE / "standin.py"), "--kubeconfig", kubeconfig, "--step", str(step)]
        for ns in namespaces:
            self.cmd += ["--namespace", ns]
        self.log = log
        self.proc: Optional[subprocess.Popen] = None

    def __enter__(self) -> StandIn:
        out = open(self.log, "a") if self.log else subprocess.DEVNULL  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
