"""KubeVirt's objects as a drain sees them, free of I/O: which pods are virt-launcher pods,
whether their VirtualMachineInstance (VMI) can be live-migrated, and what a
VirtualMachineInstanceMigration (VMIM) says about its progress.

Field names are KubeVirt's published API (the ``kubevirt.io/api`` Go module, ``core/v1``):
a VMI's ``spec.evictionStrategy``, ``status.nodeName``, ``status.evacuationNodeName``,
``status.conditions`` (type ``LiveMigratable`` with ``reason`` and ``message``) and
``status.migrationState``; a VMIM's ``spec.vmiName``, ``status.phase``,
``status.phaseTransitionTimestamps``, ``status.conditions`` and ``status.migrationState``
(``failureReason``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

Obj = Dict[str, Any]

GROUP = "kubevirt.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
VMI_KIND = "VirtualMachineInstance"
VMIM_KIND = "VirtualMachineInstanceMigration"
VMI_PLURAL = "virtualmachineinstances"
VMIM_PLURAL = "virtualmachineinstancemigrations"
LAUNCHER_LABEL = "kubevirt.io"
LAUNCHER = "virt-launcher"
VMI_NAME_LABEL = "kubevirt.io/vmi-name"  # KubeVirt labels its migrations with their VMI's name
NODE_LABEL = "nmo.maintenance/drained-node"  # ours: the migration was made for this node's drain
MAINTENANCE_ANNOTATION = "nmo.maintenance/maintenance"

# KubeVirt's defaults (MigrationConfiguration): a drain empties one node, so every migration
# it makes is outbound from that node.
PARALLEL_OUTBOUND_PER_NODE = 2  # parallelOutboundMigrationsPerNode
PARALLEL_PER_CLUSTER = 5  # parallelMigrationsPerCluster

SUCCEEDED, FAILED = "Succeeded", "Failed"
FINAL_PHASES = (SUCCEEDED, FAILED)
# Eviction strategies whose eviction KubeVirt turns into a migration itself.
KUBEVIRT_MIGRATES = ("LiveMigrate", "LiveMigrateIfPossible")

MIGRATE, WAIT = "migrate", "wait"
MODES = (MIGRATE, WAIT)


# -- pods ---------------------------------------------------------------------------------------
def is_launcher(pod: Obj) -> bool:
    """A virt-launcher pod, by its label (a VM's pod: KubeVirt's to move, never surged)."""
    return (pod.get("metadata", {}).get("labels") or {}).get(LAUNCHER_LABEL) == LAUNCHER


def vmi_of(pod: Obj) -> Optional[str]:
    """The name of the VMI a virt-launcher pod runs (its controller), None for other pods."""
    meta = pod.get("metadata", {})
    if (meta.get("labels") or {}).get(LAUNCHER_LABEL) != LAUNCHER:
        return None
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == VMI_KIND and str(ref.get("apiVersion", "")).startswith(GROUP + "/"):
            return ref.get("name")
    return None


def launchers(pods: List[Obj]) -> Dict[str, str]:
    """``namespace/pod`` -> ``namespace/vmi`` for the virt-launcher pods among ``pods``."""
    found = {}
    for pod in pods:
        vmi = vmi_of(pod)
        if vmi:
            ns = pod["metadata"].get("namespace", "")
            found[f"{ns}/{pod['metadata']['name']}"] = f"{ns}/{vmi}"
    return found


# -- VMIs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """What a drain in ``migrate`` mode does about one VMI whose pod's eviction was refused."""
    action: str  # MIGRATE (we create one), KUBEVIRT (its eviction strategy does), BLOCKED
    why: str


KUBEVIRT, BLOCKED = "kubevirt", "blocked"


def condition(obj: Obj, kind: str) -> Optional[Obj]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def verdict(vmi: Optional[Obj], key: str) -> Verdict:
    """Migrate it ourselves, leave it to KubeVirt, or blocked (with KubeVirt's own reason)."""
    if vmi is None:
        return Verdict(BLOCKED, f"VirtualMachineInstance {key} not found")
    strategy = (vmi.get("spec") or {}).get("evictionStrategy")
    if strategy in KUBEVIRT_MIGRATES or (vmi.get("status") or {}).get("evacuationNodeName"):
        return Verdict(KUBEVIRT, f"VirtualMachineInstance {key} has evictionStrategy {strategy or '(cluster default)'}: "
                                 "its eviction makes KubeVirt migrate it")
    cond = condition(vmi, "LiveMigratable")
    if cond is None:
        return Verdict(BLOCKED, f"VirtualMachineInstance {key} does not report LiveMigratable yet")
    if cond.get("status") != "True":
        detail = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x) or "no reason given"
        return Verdict(BLOCKED, f"VirtualMachineInstance {key} is not live-migratable ({detail})")
    return Verdict(MIGRATE, f"VirtualMachineInstance {key} is LiveMigratable")


# -- migrations -----------------------------------------------------------------------------------
def phase(vmim: Obj) -> str:
    return (vmim.get("status") or {}).get("phase") or ""


def finished(vmim: Obj) -> bool:
    return phase(vmim) in FINAL_PHASES


def target_of(vmim: Obj) -> str:
    return ((vmim.get("status") or {}).get("migrationState") or {}).get("targetNode") or ""


def for_vmi(vmims: List[Obj], key: str) -> List[Obj]:
    """The migrations of VMI ``namespace/name``, oldest first."""
    namespace, _slash, name = key.partition("/")
    found = [m for m in vmims if m["metadata"].get("namespace") == namespace
             and (m.get("spec") or {}).get("vmiName") == name]
    return sorted(found, key=lambda m: m["metadata"].get("creationTimestamp") or "")


def unfinished(vmims: List[Obj]) -> List[Obj]:
    return [m for m in vmims if not finished(m) and not m["metadata"].get("deletionTimestamp")]


def failure(vmim: Optional[Obj], vmi: Optional[Obj]) -> str:
    """KubeVirt's reason for a failed migration: the migration state's failureReason (the
    VMIM's, or the VMI's when it tells of this migration), else a False condition's message."""
    status = (vmim or {}).get("status") or {}
    state = status.get("migrationState") or {}
    if state.get("failureReason"):
        return state["failureReason"]
    vmi_state = ((vmi or {}).get("status") or {}).get("migrationState") or {}
    uid = ((vmim or {}).get("metadata") or {}).get("uid")
    if vmi_state.get("failureReason") and (not uid or vmi_state.get("migrationUid") == uid):
        return vmi_state["failureReason"]
    for cond in status.get("conditions") or []:
        if cond.get("message"):
            return f"{cond.get('reason') or cond.get('type')}: {cond['message']}"
    return "KubeVirt gave no reason"


def body(vmi_key: str, node: str, maintenance: Optional[str]) -> Obj:
    """A VMIM for VMI ``namespace/name``, labelled with the node whose drain made it."""
    namespace, _slash, name = vmi_key.partition("/")
    meta: Obj = {"generateName": f"{name[:40]}-nmo-", "namespace": namespace,
                 "labels": {VMI_NAME_LABEL: label_value(name), NODE_LABEL: label_value(node)}}
    if maintenance:
        meta["annotations"] = {MAINTENANCE_ANNOTATION: maintenance}
    return {"apiVersion": API_VERSION, "kind": VMIM_KIND, "metadata": meta, "spec": {"vmiName": name}}


def label_value(text: str) -> str:
    """At most 63 characters, starting and ending with an alphanumeric one."""
    return text[:63].strip("-_.")
