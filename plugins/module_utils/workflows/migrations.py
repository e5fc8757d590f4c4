"""The drain's KubeVirt hook (``kubevirt: migrate``): live-migrate the VMs whose virt-launcher
pod a PodDisruptionBudget keeps on the node, instead of waiting for someone to do it by hand.

Nothing happens until a virt-launcher pod's eviction is refused; a drain without one costs
no request more than with ``kubevirt: wait``. On the first refusal the hook lists and
watches the cluster's VirtualMachineInstanceMigrations (VMIMs), and the VMIs of that pod's
namespace; from then on every decision is taken from those two watches, with no polling:

- a VMI that already has an unfinished migration (made by hand, as in docs/design.md §12.3, or by
  KubeVirt) is followed, never given a second one;
- a VMI whose ``evictionStrategy`` is ``LiveMigrate``/``LiveMigrateIfPossible`` (or that
  KubeVirt is evacuating) is left to KubeVirt: the drain's evictions trigger its migration;
- a VMI that is not ``LiveMigratable`` stays pending with KubeVirt's reason in ``lastError``
  and one event; it is migrated if its condition turns True during the drain;
- otherwise one VMIM is created, when a slot is free: at most ``per_drain`` migrations of
  this drain at a time (KubeVirt's ``parallelOutboundMigrationsPerNode``, 2) and no new one
  while the cluster has ``per_cluster`` unfinished VMIMs (``parallelMigrationsPerCluster``,
  5; counted from the watch, whoever made them).

While a migration runs the pod's evictions are held (its budget refuses them anyway); the
pod goes when KubeVirt ends it after the migration, and evictions resume (a finished pod is
evicted whatever its budget). A migration that fails is not retried by this drain: the pod
stays pending with KubeVirt's reason until the drain's timeout (a migration someone else
starts meanwhile is followed; the next run of the play tries once more). A virt-launcher
pod is never deleted by this hook.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher
from ..errors import ApiError
from ..model import kubevirt as kv
from ..model.times import now_rfc3339
from ..stores.events import DRAIN_ERROR
from ..stores.kubevirt import vmi_path, vmim_path

Recorder = Callable[[str, str, str, Optional[str]], None]  # reason, message, key, type

# Events (on the NodeMaintenance, like the drain's own)
STARTED = "MigrationStarted"
SUCCEEDED = "MigrationSucceeded"
FAILED = "MigrationFailed"

# What the hook is doing about one VM
IDLE = "idle"  # its pod's eviction was not refused (yet)
DECIDING = "deciding"
QUEUED = "queued"  # migratable, waiting for a slot
MIGRATING = "migrating"
MIGRATED = "migrated"
FAILED_STATE = "failed"
BLOCKED = "blocked"  # not migratable (or its VMI cannot be read)
KUBEVIRT = "kubevirt"  # its eviction strategy makes KubeVirt migrate it
MIGRATE = kv.MIGRATE
TRANSIENT_PAUSE = 5.0  # seconds before a VMIM create that failed transiently is tried again


@dataclass
class VirtualMachine:
    pod: str  # namespace/name of its virt-launcher pod on the node
    vmi: str  # namespace/name of its VMI
    state: str = IDLE
    note: str = ""  # what lastError says about it while its pod is pending
    migration: str = ""  # the VMIM followed (name)
    ours: bool = False  # we created that VMIM
    phase: str = ""
    target: str = ""
    started: float = 0.0  # monotonic
    started_at: str = ""  # RFC 3339, for the status
    not_before: float = 0.0
    announced: str = ""  # the state whose event was recorded

    @property
    def namespace(self) -> str:
        return self.vmi.partition("/")[0]

    @property
    def name(self) -> str:
        return self.vmi.partition("/")[2]

    def status(self) -> Dict[str, Any]:
        return {"namespace": self.namespace, "vmi": self.name, "pod": self.pod.partition("/")[2],
                "state": self.state, "migration": self.migration, "phase": self.phase,
                "targetNode": self.target, "started": self.started_at, "message": self.note}


class Migrations:
    """One drain's VMs and their migrations; driven by the drain's thread only."""

    def __init__(self, client: Client, node: str, maintenance: Optional[str], launchers: Dict[str, str],
                 waitable: MultiWatcher, record: Recorder, per_drain: int = kv.PARALLEL_OUTBOUND_PER_NODE,
                 per_cluster: int = kv.PARALLEL_PER_CLUSTER) -> None:
        self.client = client
        self.node = node
        self.maintenance = maintenance
        self.vms = {pod: VirtualMachine(pod, vmi) for pod, vmi in launchers.items()}
        self.waitable = waitable
        self.record = record
        self.per_drain = per_drain
        self.per_cluster = per_cluster
        self.migrations: Optional[Watcher] = None
        self.instances: Dict[str, Watcher] = {}
        self.unreadable = ""  # why KubeVirt's objects cannot be watched (RBAC, no CRDs)
        self.created = 0
        self.latest: Optional[str] = None  # a note that changed since the drain last took it

    def take_note(self) -> Optional[str]:
        """The note that changed last (for the status's lastError), once; None if none changed."""
        note, self.latest = self.latest, None
        return note

    # -- the drain's hooks ------------------------------------------------------------------------
    def refused(self, pod: Any) -> bool:
        """A pod's eviction was refused by its budget. True when the pod is a VM's, so the hook
        speaks for it (its own note and events, not the budget's DrainError every time)."""
        vm = self.vms.get(pod.key)
        if vm is None:
            return False
        if vm.state == IDLE:
            vm.state = DECIDING
            self._watch(vm)
        self._apply(vm, pod)
        # once migrated (or left to KubeVirt), a refusal is the budget's again: DrainError as usual
        return vm.state in (DECIDING, QUEUED, MIGRATING, FAILED_STATE, BLOCKED)

    def step(self, pending: Dict[str, Any], now: float) -> None:
        """Move each VM on from what the watches show; called after every batch of events."""
        for vm in self.vms.values():
            if vm.state in (IDLE, MIGRATED, KUBEVIRT):
                continue
            before = vm.state
            if vm.state == MIGRATING:
                self._follow(vm, now)
            elif vm.pod in pending:
                self._decide(vm, now)
            pod = pending.get(vm.pod)
            if pod is not None:
                self._apply(vm, pod, released=before == MIGRATING and vm.state != MIGRATING, now=now)

    def busy(self) -> bool:
        """A migration of ours is still running: the drain is not done before it ends."""
        return any(vm.state == MIGRATING for vm in self.vms.values())

    def status(self) -> List[Dict[str, Any]]:
        return [vm.status() for vm in sorted(self.vms.values(), key=lambda v: v.vmi) if vm.state != IDLE]

    # -- watches ------------------------------------------------------------------------------------
    def _watch(self, vm: VirtualMachine) -> None:
        if self.unreadable:
            return
        try:
            if self.migrations is None:
                self.migrations = self.waitable.add(Watcher(self.client, vmim_path()))
            if vm.namespace not in self.instances:
                self.instances[vm.namespace] = self.waitable.add(Watcher(self.client, vmi_path(vm.namespace)))
        except ApiError as exc:
            what = "VirtualMachineInstanceMigrations" if self.migrations is None else "VirtualMachineInstances"
            self.unreadable = f"cannot watch KubeVirt's {what} ({exc.status}: {exc.server_message or exc.message})"
            if exc.status == 403:
                self.unreadable += "; apply meta/rbac/clusterrole.yml, whose kubevirt.io rules allow it"

    def _vmi(self, vm: VirtualMachine) -> Optional[Dict[str, Any]]:
        watcher = self.instances.get(vm.namespace)
        return None if watcher is None else watcher.objects.get(vm.vmi)

    def _vmims(self) -> List[Dict[str, Any]]:
        return list(self.migrations.objects.values()) if self.migrations is not None else []

    # -- decisions ----------------------------------------------------------------------------------
    def _decide(self, vm: VirtualMachine, now: float) -> None:
        if self.unreadable:
            self._block(vm, self.unreadable)
            return
        running = kv.unfinished(kv.for_vmi(self._vmims(), vm.vmi))
        if running:  # made by hand (docs/design.md §12.3's way out) or by KubeVirt: follow it, never a second one
            self._start(vm, running[-1], ours=False, now=now)
            return
        if vm.state == FAILED_STATE:
            return  # one migration per VM and drain
        verdict = kv.verdict(self._vmi(vm), vm.vmi)
        if verdict.action == kv.KUBEVIRT:
            vm.state = KUBEVIRT
            self._note(vm, verdict.why)
            self._announce(vm, "Normal", "Drain", f"{verdict.why}; the drain's evictions are left to do it")
            return
        if verdict.action == kv.BLOCKED:
            self._block(vm, verdict.why)
            return
        if now < vm.not_before:
            return
        mine = sum(1 for v in self.vms.values() if v.state == MIGRATING)
        cluster = len(kv.unfinished(self._vmims()))
        if mine >= self.per_drain or cluster >= self.per_cluster:
            vm.state = QUEUED
            self._note(vm, f"VirtualMachineInstance {vm.vmi} waits to be migrated: {mine} migration(s) of this drain "
                       f"running (at most {self.per_drain}), {cluster} unfinished in the cluster (at most "
                       f"{self.per_cluster})")
            return
        try:
            made = self.client.post(vmim_path(vm.namespace), kv.body(vm.vmi, self.node, self.maintenance))
        except ApiError as exc:
            text = exc.server_message or exc.message
            if exc.status in (0, 409, 429) or exc.status >= 500:  # transient: later, not at once
                vm.not_before = now + TRANSIENT_PAUSE
                self._note(vm, f"cannot create a VirtualMachineInstanceMigration for {vm.vmi} yet ({exc.status}: {text})")
                return
            self._fail(vm, f"KubeVirt refused the VirtualMachineInstanceMigration ({exc.status}: {text})")
            return
        self.created += 1
        made.setdefault("kind", kv.VMIM_KIND)
        if self.migrations is not None:  # the watch brings it too; seen now, it counts at once
            self.migrations.objects.setdefault(f"{vm.namespace}/{made['metadata']['name']}", made)
        self._start(vm, made, ours=True, now=now)

    def _start(self, vm: VirtualMachine, vmim: Dict[str, Any], ours: bool, now: float) -> None:
        vm.state, vm.ours = MIGRATING, ours
        vm.migration, vm.phase = vmim["metadata"]["name"], kv.phase(vmim) or "Pending"
        vm.started, vm.started_at, vm.target = now, now_rfc3339(), kv.target_of(vmim)
        self._note(vm, self._progress(vm))
        how = "Started" if ours else "Following (made by someone else)"
        self._announce(vm, "Normal", STARTED,
                       f"{how} live migration of VirtualMachineInstance {vm.vmi} off node {self.node}: "
                       f"VirtualMachineInstanceMigration {vm.migration}, because pod {vm.pod} may not be evicted")

    def _follow(self, vm: VirtualMachine, now: float) -> None:
        vmim = self.migrations.objects.get(f"{vm.namespace}/{vm.migration}") if self.migrations else None
        if vmim is None:
            self._fail(vm, f"VirtualMachineInstanceMigration {vm.migration} was deleted before it finished")
            return
        vm.phase, vm.target = kv.phase(vmim) or "Pending", kv.target_of(vmim) or vm.target
        if vm.phase == kv.SUCCEEDED:
            vm.state = MIGRATED
            self._note(vm, "")
            self._announce(vm, "Normal", SUCCEEDED,
                           f"VirtualMachineInstance {vm.vmi} live-migrated from node {self.node} to node "
                           f"{vm.target or '(not reported)'} in {now - vm.started:.0f} s "
                           f"(VirtualMachineInstanceMigration {vm.migration}); its pod {vm.pod} is ended by KubeVirt")
        elif vm.phase == kv.FAILED:
            self._fail(vm, kv.failure(vmim, self._vmi(vm)))
        else:
            self._note(vm, self._progress(vm))

    def _note(self, vm: VirtualMachine, text: str) -> None:
        if text != vm.note:
            vm.note = text
            self.latest = text

    @staticmethod
    def _progress(vm: VirtualMachine) -> str:
        return f"{vm.name}: migrating, phase {vm.phase} (VirtualMachineInstanceMigration {vm.migration})"

    def _fail(self, vm: VirtualMachine, reason: str) -> None:
        vm.state = FAILED_STATE
        self._note(vm, f"live migration of VirtualMachineInstance {vm.vmi} failed: {reason}. Pod {vm.pod} stays "
                       "pending; this drain starts no other migration for it")
        self._announce(vm, "Warning", FAILED, vm.note + (f" (VirtualMachineInstanceMigration {vm.migration})"
                                                         if vm.migration else ""))

    def _block(self, vm: VirtualMachine, why: str) -> None:
        vm.state = BLOCKED
        self._note(vm, f"{why}: pod {vm.pod} stays pending, no migration is started for it")
        self._announce(vm, "Warning", DRAIN_ERROR, vm.note)

    def _announce(self, vm: VirtualMachine, etype: str, reason: str, message: str) -> None:
        """One event per VM and state (a VM blocked, unblocked and blocked again: twice)."""
        mark = f"{vm.state}:{vm.migration}:{message}"
        if vm.announced != mark:
            vm.announced = mark
            self.record(reason, message, vm.pod, etype)

    # -- the pod in the drain's tracker -------------------------------------------------------------
    def _apply(self, vm: VirtualMachine, pod: Any, released: bool = False, now: Optional[float] = None) -> None:
        """The VM's note is its pod's last error; its evictions wait while it migrates."""
        if vm.note and vm.state != KUBEVIRT:
            pod.last_error = vm.note
        elif released and vm.state == MIGRATED:
            pod.last_error = ""  # no longer migrating; KubeVirt ends the pod
        if vm.state == MIGRATING:
            pod.next_attempt = math.inf
        elif released or (pod.next_attempt == math.inf):
            pod.next_attempt = now if now is not None else time.monotonic()


def for_drain(client: Client, mode: str, node: str, maintenance: Optional[str], pods: List[Dict[str, Any]],
              waitable: MultiWatcher, record: Recorder) -> Optional[Migrations]:
    """The hook for a drain, or None: mode ``wait``, or no virt-launcher pod on the node."""
    if mode != kv.MIGRATE:
        return None
    launchers = kv.launchers(pods)
    return Migrations(client, node, maintenance, launchers, waitable, record) if launchers else None
