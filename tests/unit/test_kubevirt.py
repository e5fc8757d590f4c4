"""Pure logic of the KubeVirt hook: virt-launcher pods, VMI verdicts, migration objects and
failure reasons, the status's live lines, and the pre-flight's verdict for VM pods."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import kubevirt as kv
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.kubevirt import note
from ansible_collections.nmo.maintenance.plugins.module_utils.stores.maintenance import migration_lines, progress_line
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import preflight as pf
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainOptions

from .test_preflight import REFUSAL, pdb, reports_for, snapshot
from .test_preflight import node as a_node


def launcher(name: str = "virt-launcher-vm-order-processing-x7k2p", vmi: str = "vm-order-processing",
             labels: Optional[Dict[str, str]] = None, kind: str = "VirtualMachineInstance",
             api_version: str = "kubevirt.io/v1") -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "kubevirt-system", "uid": f"uid-{name}",
                         "labels": labels if labels is not None else {"kubevirt.io": "virt-launcher", "app": vmi},
                         "ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": vmi,
                                              "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "compute"}]}, "status": {"phase": "Running"}}


def vmi(migratable: Optional[Dict[str, str]] = None, strategy: Optional[str] = None, **status: Any) -> Dict[str, Any]:
    conditions: List[Dict[str, str]] = [{"type": "Ready", "status": "True"}]
    if migratable is not None:
        conditions.append({"type": "LiveMigratable", **migratable})
    spec = {"evictionStrategy": strategy} if strategy else {}
    return {"metadata": {"name": "vm-order-processing", "namespace": "kubevirt-system"}, "spec": spec,
            "status": {"nodeName": "n1", "conditions": conditions, **status}}


KEY = "kubevirt-system/vm-order-processing"


# -- pods -----------------------------------------------------------------------------------------
def test_a_virt_launcher_pod_names_its_vmi_and_other_pods_none() -> None:
    assert kv.vmi_of(launcher()) == "vm-order-processing"
    assert kv.vmi_of(launcher(labels={"app": "x"})) is None, "the kubevirt.io=virt-launcher label is required"
    assert kv.vmi_of(launcher(kind="ReplicaSet", api_version="apps/v1")) is None
    assert kv.launchers([launcher(), launcher("web-1", labels={"app": "web"})]) == {
        "kubevirt-system/virt-launcher-vm-order-processing-x7k2p": KEY}


# -- verdicts -------------------------------------------------------------------------------------
def test_a_live_migratable_vmi_is_migrated_by_the_drain() -> None:
    v = kv.verdict(vmi({"status": "True"}), KEY)
    assert v.action == kv.MIGRATE and "LiveMigratable" in v.why


def test_a_vmi_that_is_not_migratable_is_blocked_with_kubevirts_reason_and_message() -> None:
    v = kv.verdict(vmi({"status": "False", "reason": "DisksNotLiveMigratable",
                        "message": "cannot migrate VMI: PVC rootdisk is not shared"}), KEY)
    assert v.action == kv.BLOCKED
    assert v.why == (f"VirtualMachineInstance {KEY} is not live-migratable "
                     "(DisksNotLiveMigratable: cannot migrate VMI: PVC rootdisk is not shared)")
    assert kv.verdict(vmi(None), KEY).action == kv.BLOCKED, "no condition yet: not judged migratable"
    assert kv.verdict(None, KEY).why == f"VirtualMachineInstance {KEY} not found"


@pytest.mark.parametrize("strategy", ["LiveMigrate", "LiveMigrateIfPossible"])
def test_a_vmi_whose_eviction_strategy_migrates_is_left_to_kubevirt(strategy: str) -> None:
    v = kv.verdict(vmi({"status": "True"}, strategy=strategy), KEY)
    assert v.action == kv.KUBEVIRT and strategy in v.why
    assert kv.verdict(vmi({"status": "True"}, evacuationNodeName="n1"), KEY).action == kv.KUBEVIRT
    assert kv.verdict(vmi({"status": "True"}, strategy="None"), KEY).action == kv.MIGRATE


# -- migrations -----------------------------------------------------------------------------------
def vmim(name: str, phase: str = "", vmi_name: str = "vm-order-processing", ns: str = "kubevirt-system",
         created: str = "2026-12-01T10:00:00Z", **status: Any) -> Dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "creationTimestamp": created},
            "spec": {"vmiName": vmi_name}, "status": {"phase": phase, **status} if phase else {}}


def test_the_migrations_of_a_vmi_and_the_unfinished_ones_of_the_cluster() -> None:
    items = [vmim("b", "Succeeded", created="2026-12-01T10:01:00Z"), vmim("a", "Running"),
             vmim("c", vmi_name="other"), vmim("d", "Failed", ns="elsewhere")]
    assert [m["metadata"]["name"] for m in kv.for_vmi(items, KEY)] == ["a", "b"]
    assert [m["metadata"]["name"] for m in kv.unfinished(items)] == ["a", "c"], "no phase yet counts as unfinished"


def test_a_failure_reason_comes_from_the_migration_state_else_the_vmi_else_a_condition() -> None:
    assert kv.failure(vmim("m", "Failed", migrationState={"failureReason": "target pod OOMKilled"}), None) == \
        "target pod OOMKilled"
    on_vmi = {"status": {"migrationState": {"migrationUid": "uid-m", "failureReason": "domain crashed"}}}
    assert kv.failure(vmim("m", "Failed"), on_vmi) == "domain crashed"
    other = {"status": {"migrationState": {"migrationUid": "uid-older", "failureReason": "old news"}}}
    assert kv.failure(vmim("m", "Failed"), other) == "KubeVirt gave no reason"
    cond = vmim("m", "Failed", conditions=[{"type": "migrationRejectedByResourceQuota", "status": "True",
                                            "message": "quota exceeded"}])
    assert kv.failure(cond, None) == "migrationRejectedByResourceQuota: quota exceeded"


def test_a_migration_made_by_the_drain_is_labelled_with_its_node_and_vmi() -> None:
    body = kv.body(KEY, "node-worker-02", "maintenance-worker-02")
    assert body["apiVersion"] == "kubevirt.io/v1" and body["kind"] == "VirtualMachineInstanceMigration"
    assert body["spec"] == {"vmiName": "vm-order-processing"}
    meta = body["metadata"]
    assert meta["namespace"] == "kubevirt-system" and meta["generateName"] == "vm-order-processing-nmo-"
    assert meta["labels"] == {"kubevirt.io/vmi-name": "vm-order-processing",
                              "nmo.maintenance/drained-node": "node-worker-02"}
    assert meta["annotations"] == {"nmo.maintenance/maintenance": "maintenance-worker-02"}
    long = kv.body("ns/" + "v" * 70, "n." + "x" * 70, None)["metadata"]
    assert all(len(v) <= 63 for v in long["labels"].values()) and "annotations" not in long


def test_the_drain_option_takes_wait_or_migrate() -> None:
    assert DrainOptions(node="n1").kubevirt == "wait"
    DrainOptions(node="n1", kubevirt="migrate").validate()
    with pytest.raises(InputError, match="kubevirt: 'later' must be one of migrate, wait"):
        DrainOptions(node="n1", kubevirt="later").validate()


# -- the live line and the status ---------------------------------------------------------------------
def test_the_live_line_says_which_vm_migrates_in_which_phase_since_when() -> None:
    now = datetime(2026, 12, 1, 10, 0, 40, tzinfo=timezone.utc)
    migrations = [{"vmi": "vm-order-processing", "state": "migrating", "phase": "TargetReady",
                   "started": "2026-12-01T10:00:00Z"},
                  {"vmi": "vm-database-01", "state": "queued", "phase": "", "started": ""},
                  {"vmi": "vm-webserver-02", "state": "migrated", "phase": "Succeeded"}]
    assert migration_lines(migrations, now) == [
        "vm-order-processing: migrating, phase TargetReady, 40 s", "vm-database-01: queued"]
    nm = {"metadata": {"name": "maintenance-worker-02"},
          "status": {"drainProgress": 50, "pendingPods": ["virt-launcher-vm-order-processing-x7k2p"],
                     "lastError": "vm-order-processing: migrating", "migrations": migrations[:1]}}
    line = progress_line("node-worker-02", nm, 41)
    assert line.startswith("node-worker-02: drainProgress 50%, 1 pending pod(s): virt-launcher-vm-order-processing")
    assert "; vm-order-processing: migrating, phase TargetReady, " in line and "last error" not in line


# -- the pre-flight ---------------------------------------------------------------------------------
def judged_vm(verdict: Optional[kv.Verdict]) -> pf.NodeReport:
    pods = [launcher()]
    budget = pdb("kubevirt-disruption-budget-x", "vm-order-processing", minAvailable=1)
    budget["metadata"]["namespace"] = "kubevirt-system"
    snap = snapshot([a_node("n1")], pods, [budget])
    [r], by_key = reports_for(snap, ["n1"])
    plan = r.plans[0]
    pf.judge_eviction(r, plan, by_key[plan.key], pf.DryRun(pf.REFUSED, 429, REFUSAL), snap.budgets, verdict)
    return r


def test_preflight_a_vm_pod_the_drain_migrates_is_go_migrate() -> None:
    r = judged_vm(kv.Verdict(kv.MIGRATE, f"VirtualMachineInstance {KEY} is LiveMigratable"))
    assert r.verdict == pf.GO_MIGRATE == "go (migrate)" and not r.blockers and not r.warnings
    assert r.migrations == [note("kubevirt-system/virt-launcher-vm-order-processing-x7k2p",
                                 kv.Verdict(kv.MIGRATE, f"VirtualMachineInstance {KEY} is LiveMigratable"))]
    assert "1 VM(s) to live-migrate" in r.line() and r.as_dict()["migrations"] == r.migrations
    assert "go (migrate)" in pf.table([r])[1]


def test_preflight_a_vm_pod_that_cannot_migrate_is_blocked_with_the_vmis_reason() -> None:
    why = f"VirtualMachineInstance {KEY} is not live-migratable (HotplugNotLiveMigratable: hotplugged disks)"
    r = judged_vm(kv.Verdict(kv.BLOCKED, why))
    assert r.verdict == pf.NO_GO
    assert r.blockers == ["kubevirt-system/virt-launcher-vm-order-processing-x7k2p is refused by PDB "
                          f"kubevirt-system/kubevirt-disruption-budget-x and cannot be live-migrated: {why}"]


def test_preflight_without_migrate_a_vm_pod_is_judged_as_any_pod() -> None:
    r = judged_vm(None)
    assert r.verdict == pf.NO_GO and "can never allow it" in r.blockers[0] and r.migrations == []
