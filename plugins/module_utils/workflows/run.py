"""Run identity: which playbook run holds a maintenance, and whether that run is still alive.

Every run of the maintenance playbook has an id (``awx-<job id>`` under AWX, otherwise one
made at start). The run is alive while its *run lease* ``nmo-run-<id>`` in the leases
namespace is valid: a heartbeat process on the controller renews it every few seconds for
as long as the ``ansible-playbook`` process lives, and deletes it the moment that process is
gone (killed, cancelled, finished). Whatever the run holds says so with the annotation
``nmo.maintenance/run``: its NodeMaintenances, node leases and maintenance slots.

A run never adopts what a live run holds. It adopts what a gone run held (lease deleted or
expired) and says so, as the resume after a killed controller always did. Times are the
API server's (``Client.server_now``), so two controllers whose clocks differ agree on
whether a run lease has lapsed.

``Guard`` is what module code that waits or writes asks before it goes on: is my run still
alive (the controller process, when the module runs in it, and the run lease), and is my
NodeMaintenance still mine.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import time
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ..api.client import Client
from ..errors import Conflict, InputError, NmoError, NotFound, UnprocessableEntity
from ..model import leases, node_conditions, renewal, rollout, rollout_record
from ..model.times import format_seconds
from ..stores import leases as lease_store
from . import heartbeat_note

RUN_ANNOTATION = leases.RUN_ANNOTATION
CONTROLLER_ANNOTATION = "nmo.maintenance/controller"
# The boot of the controller's host (/proc/sys/kernel/random/boot_id): with the host name, the
# next run knows whether a gone run's controller was its own machine (leftovers.settle_gone)
BOOT_ANNOTATION = "nmo.maintenance/controller-boot"
# who does the node work in this run (standalone | operator), decided once by the start: the
# modules of the run read it here, so the playbook carries only the run id between plays
MODE_ANNOTATION = "nmo.maintenance/mode"
# The run's start found the NodeMaintenance CRD in place (or installed it): the begins of the
# run read that here, on the run lease they read anyway, instead of each reading the CRD.
CRD_ANNOTATION = "nmo.maintenance/crd-checked"
# Whether the API server knows the node lifecycle conditions (docs/design.md §4.11), as the
# run's first begin that asked found it (model/node_conditions.py support_note): the later
# begins read it here, on the run lease they read anyway.
NODE_CONDITIONS_ANNOTATION = "nmo.maintenance/node-conditions"
RUN_LEASE_PREFIX = leases.RUN_LEASE_PREFIX
RUN_LABELS = {**leases.MANAGED_BY, "app.kubernetes.io/component": "run"}
# A run lease lapses this long after its heartbeat stopped (the controller's host died
# without a chance to delete it); renewed every RENEW_EVERY seconds.
RUN_LEASE_DURATION = 60
RENEW_EVERY = renewal.BEAT
GUARD_LOOK_EVERY = 5.0  # seconds between two reads of the run lease by a waiting module

ALIVE, GONE, NONE, OURS = "alive", "gone", "none", "ours"
_ID = re.compile(r"^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$")


class RunGone(NmoError):
    """This run's controller or its run lease is gone: stop without writing anything more."""


class MaintenanceGone(RunGone):
    """The NodeMaintenance a module works for was deleted: the maintenance was ended elsewhere."""


class LeaseLost(NmoError):
    """A lease the run holds for a node lapsed or is someone else's now: another run may hold
    the node (or its slot), so this run takes no further step for it."""


class OwnedByLiveRun(NmoError):
    """The node's maintenance belongs to another run that is still alive: not adopted."""


class RunStopped(NmoError):
    """The rollout scheduler (model/rollout.py) says this node does not begin: the run stopped
    after a failure, or the place it waits for is held by a failed, kept node. Raised before
    the node holds anything; the begin answers it as a plan (``stopped``), not as a failure."""


# -- ids and names, pure ---------------------------------------------------------------------
def new_id(awx_job_id: Optional[Any] = None, now: Optional[datetime] = None) -> str:
    if awx_job_id not in (None, ""):
        return validate_id(f"awx-{awx_job_id}")
    moment = (now or datetime.now(timezone.utc)).strftime("%Y%m%d-%H%M%S")
    return f"{moment}-{secrets.token_hex(3)}"


def validate_id(run_id: str, what: str = "run id") -> str:
    """A run's id, or a rollout's (``what``), as a lease name takes it; InputError else."""
    if not isinstance(run_id, str) or not _ID.match(run_id):
        raise InputError(f"{what} {run_id!r} is not valid: use 1 to 50 lower-case letters, digits and '-', "
                         "starting and ending with a letter or digit")
    return run_id


def lease_name(run_id: str) -> str:
    return RUN_LEASE_PREFIX + run_id


def run_of(obj: Optional[Dict[str, Any]]) -> str:
    return (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(RUN_ANNOTATION) or ""


def controller_identity(pid: Optional[int] = None) -> str:
    """host/pid/start of the process a run lives in, to tell two processes claiming one id apart."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}/{pid}/{process_start(pid) or 0}"


def process_start(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), which
    a reused PID does not share; None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            stat = handle.read()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after its ')'
    rest = stat.rsplit(")", 1)[-1].split()
    return rest[19] if len(rest) > 19 else None


def owner_state(obj: Optional[Dict[str, Any]], my_run: str, alive: Any) -> Tuple[str, str]:
    """(ours | none | alive | gone, the owner's run id) of something annotated with a run."""
    owner = run_of(obj)
    if not owner:
        return NONE, ""
    if my_run and owner == my_run:
        return OURS, owner
    return (ALIVE if owner in alive else GONE), owner


def owner_of(client: Client, obj: Optional[Dict[str, Any]], my_run: str,
             namespace: str = leases.LEASE_NAMESPACE) -> Tuple[str, str]:
    """owner_state, reading the owner's run lease when it names another run."""
    owner = run_of(obj)
    alive = {owner} if owner and owner != my_run and is_alive(client, owner, namespace) else set()
    return owner_state(obj, my_run, alive)


# -- the leases a run holds for a node, pure ---------------------------------------------------
# Which of a node's leases a run must still hold before its next step: none (outside a
# run, or a node whose begin this run did not make), the slot only (operator mode: the
# node lease is NMO's), or the node lease and the slot (standalone).
HELD_NONE, HELD_SLOT, HELD_ALL = "none", "slot", "all"
HELD_CHOICES = (HELD_NONE, HELD_SLOT, HELD_ALL)


def _when(moment: Optional[datetime]) -> str:
    return format_seconds(moment) if moment else "an unknown time"


def _judge(lease: leases.Lease, what: str, holder_word: str, now: datetime) -> Tuple[Optional[str], Optional[str]]:
    """(error, warning) for one lease the run holds: lapsed is an error, renewed late a warning."""
    expires = leases.expiry(lease)
    late = renewal.late_by(lease, expires, now)
    if not leases.is_valid(lease, now):
        return (f"{what} lapsed at {_when(expires)} (renewal late by {late:.0f} s): another run may hold the "
                f"{holder_word}; stopped"), None
    if late > renewal.LATE_AFTER:
        return None, (f"{what} was renewed late (by {late:.0f} s; it lapses at {_when(expires)}): the run's heartbeat "
                      "is slow or cannot reach the API server")
    return None, None


def held_verdict(seen: List[leases.Lease], node: str, run_id: str, held: str, now: datetime,
                 namespace: str = leases.LEASE_NAMESPACE) -> Tuple[List[str], List[str]]:
    """(errors, warnings) about the leases ``run_id`` must hold for ``node`` (``held``), in a
    list of the lease namespace: each is there, still this run's and unexpired."""
    errors: List[str] = []
    warnings: List[str] = []
    if held == HELD_NONE or not run_id:
        return errors, warnings
    if held == HELD_ALL:
        name = leases.node_lease_name(node)
        lease = leases.as_ours(leases.named(seen, name))
        what = f"the node lease of {node} ({namespace}/{name})"
        if lease is None:
            errors.append(f"{what} is gone (deleted by someone else): another run may hold the node; stopped")
        elif leases.holder(lease) != leases.HOLDER or leases.run_annotation(lease) != run_id:
            other = leases.run_annotation(lease)
            errors.append(f"{what} is held by {leases.holder(lease) or 'nobody'}"
                          f"{' for run ' + other if other else ''} now, not by this run: another run may hold the "
                          "node; stopped")
        else:
            error, warning = _judge(lease, what, "node", now)
            errors += [error] if error else []
            warnings += [warning] if warning else []
    slots = [lease for lease in seen if leases.holder(lease) == node and leases.run_annotation(lease) == run_id
             and not lease["metadata"]["name"].startswith(("node-", RUN_LEASE_PREFIX))]
    if not slots:
        errors.append(f"the maintenance slot of {node} is gone (taken by another node after it lapsed, or deleted): "
                      "another run may hold the slot; stopped")
    for slot in slots:
        error, warning = _judge(slot, f"the maintenance slot of {node} ({namespace}/{slot['metadata']['name']})",
                                "slot", now)
        errors += [error] if error else []
        warnings += [warning] if warning else []
    return errors, warnings


# -- the API ---------------------------------------------------------------------------------
def read_lease(client: Client, run_id: str, namespace: str = leases.LEASE_NAMESPACE) -> Optional[leases.Lease]:
    return lease_store.read(client, namespace, lease_name(run_id))


def is_alive(client: Client, run_id: str, namespace: str = leases.LEASE_NAMESPACE) -> bool:
    return leases.is_valid(read_lease(client, run_id, namespace), client.server_now())


def mode_of(lease: Optional[leases.Lease]) -> str:
    """The mode the run lease says its run works in; "" when it says none (no lease, or one
    started by an older release)."""
    return ((lease or {}).get("metadata", {}).get("annotations") or {}).get(MODE_ANNOTATION) or ""


def crd_checked(lease: Optional[leases.Lease]) -> bool:
    """Whether the run's start checked the NodeMaintenance CRD (an older release's lease: no)."""
    return ((lease or {}).get("metadata", {}).get("annotations") or {}).get(CRD_ANNOTATION) == "true"


def node_conditions_of(lease: Optional[leases.Lease]) -> Optional[Tuple[bool, str]]:
    """The node lifecycle conditions' support as the run lease says it; None when it says none."""
    return node_conditions.support_of_note(
        ((lease or {}).get("metadata", {}).get("annotations") or {}).get(NODE_CONDITIONS_ANNOTATION))


def note_node_conditions(client: Client, lease: Optional[leases.Lease], supported: bool, why_not: str) -> None:
    """Keep the verdict on the run lease (as read), for the run's later begins; a lease gone or
    taken over meanwhile is left alone (they then read the server again)."""
    if lease is not None and not client.dry_run:
        lease_store.annotate(client, lease, NODE_CONDITIONS_ANNOTATION,
                             node_conditions.support_note(supported, why_not))


def start(client: Client, run_id: str, controller: str, namespace: str = leases.LEASE_NAMESPACE,
          duration: int = RUN_LEASE_DURATION, mode: str = "", crd_checked: bool = False,
          boot: str = "", rollout_id: str = "") -> leases.Lease:
    """Create (or take back after a lapse) the run lease; refused when another live process holds the id.
    ``rollout_id``: the rollout the run is part of, said on the lease; its own record (when the
    rollout is not the run alone) is made or touched first (model/rollout_record.py)."""
    validate_id(run_id)
    if rollout_record.shared(run_id, rollout_id):
        touch_rollout(client, validate_id(rollout_id), namespace)
    name = lease_name(run_id)
    for _attempt in range(leases.MAX_ATTEMPTS):
        current = lease_store.read(client, namespace, name)
        now = client.server_now()
        if current is not None:
            theirs = ((current["metadata"].get("annotations") or {}).get(CONTROLLER_ANNOTATION) or "")
            if leases.is_valid(current, now) and theirs != controller:
                raise InputError(f"run id {run_id} is in use by a live run (controller {theirs or 'unknown'}); "
                                 "give this run another id or let that run end")
            body = leases.renewed(current, run_id, duration, now, True, None)
        else:
            body = leases.new_lease(name, namespace, run_id, duration, now, None, RUN_LABELS)
        body["metadata"].setdefault("annotations", {})[CONTROLLER_ANNOTATION] = controller
        if mode:
            body["metadata"]["annotations"][MODE_ANNOTATION] = mode
        if crd_checked:
            body["metadata"]["annotations"][CRD_ANNOTATION] = "true"
        if boot:
            body["metadata"]["annotations"][BOOT_ANNOTATION] = boot
        if rollout_id:
            body["metadata"]["annotations"][rollout_record.ROLLOUT_ANNOTATION] = rollout_id
        else:
            body["metadata"]["annotations"].pop(rollout_record.ROLLOUT_ANNOTATION, None)
        try:
            return lease_store.write(client, body, current)
        except Conflict:
            continue
    raise NmoError(f"run lease {namespace}/{name} kept changing while we wrote it: run again")


def touch_rollout(client: Client, rollout_id: str, namespace: str = leases.LEASE_NAMESPACE) -> leases.Lease:
    """Make the rollout's lease, or move its renewTime to now (a run of it starts: it is kept
    ``rollout_record.KEEP_SECONDS`` from here). What it holds (a stop, a count) stays."""
    name = rollout_record.lease_name(rollout_id)
    for _attempt in range(leases.MAX_ATTEMPTS):
        current = lease_store.read(client, namespace, name)
        now = client.server_now()
        if current is None:
            body = leases.new_lease(name, namespace, rollout_record.HOLDER, rollout_record.KEEP_SECONDS, now, None,
                                    rollout_record.LABELS)
        else:
            body = leases.renewed(current, rollout_record.HOLDER, rollout_record.KEEP_SECONDS, now, False, None)
        try:
            return lease_store.write(client, body, current)
        except Conflict:
            continue
    raise NmoError(f"rollout lease {namespace}/{name} kept changing while we wrote it: run again")


def record_lease(client: Client, run_id: str, namespace: str = leases.LEASE_NAMESPACE,
                 seen: Optional[List[leases.Lease]] = None) -> Optional[leases.Lease]:
    """Where the run's rollout keeps its stop and its blocked nodes (model/rollout_record.py):
    from ``seen`` when given, else read (the run lease, then the rollout's when it names one)."""
    if seen is not None:
        return rollout_record.record_lease(seen, run_id)
    run_lease = read_lease(client, run_id, namespace)
    rollout_id = rollout_record.rollout_of(run_lease)
    if rollout_record.shared(run_id, rollout_id):
        found = lease_store.read(client, namespace, rollout_record.lease_name(rollout_id))
        if found is not None:
            return found
    return run_lease


def renew(client: Client, lease: leases.Lease, holder: str, duration: Optional[int] = None) -> Optional[leases.Lease]:
    """Move renewTime to now, only if the lease is still the one read and still ``holder``'s.

    A JSON Patch, so a lease deleted meanwhile is never re-created (a PUT would); None when
    the lease is gone or changed hands.
    """
    meta = lease["metadata"]
    ops: List[Dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        {"op": "test", "path": "/spec/holderIdentity", "value": holder},
        {"op": "replace", "path": "/spec/renewTime", "value": leases.format_time(client.server_now())},
    ]
    if duration is not None:
        ops.append({"op": "replace", "path": "/spec/leaseDurationSeconds", "value": duration})
    try:
        return client.patch(lease_store.leases_path(meta["namespace"], meta["name"]), ops, "json")
    except (NotFound, Conflict, UnprocessableEntity):
        return None


def remove_gone(client: Client, namespace: str = leases.LEASE_NAMESPACE,
                seen: Optional[List[leases.Lease]] = None) -> List[str]:
    """Delete the run leases that lapsed (their runs are gone: a heartbeat that could not
    delete its lease, a controller's host that died); the names deleted. Each exactly as
    read, so a run that takes its lease back meanwhile keeps it."""
    now = client.server_now()
    removed: List[str] = []
    listed = lease_store.list_leases(client, namespace) if seen is None else seen
    for lease in listed:
        name = lease["metadata"]["name"]
        if rollout_record.removable(lease, listed, now):
            pass  # a rollout kept past its day that no live run names (model/rollout_record.py)
        elif not name.startswith(RUN_LEASE_PREFIX) or leases.is_valid(lease, now):
            continue
        try:
            if lease_store.delete(client, lease):
                removed.append(name)
        except Conflict:
            continue  # renewed or taken back since the list: alive again
    return removed


def stop(client: Client, run_id: str, namespace: str = leases.LEASE_NAMESPACE) -> bool:
    """Delete the run lease (the run is over); False when it was already gone."""
    current = read_lease(client, run_id, namespace)
    if current is None or leases.holder(current) != run_id:
        return False
    try:
        return lease_store.delete(client, current)
    except Conflict:
        return False


def mark_stopped(client: Client, run_id: str, node: str, phase: str, namespace: str = leases.LEASE_NAMESPACE,
                 seen: Optional[List[leases.Lease]] = None) -> bool:
    """The run stopped after ``node`` failed in ``phase``: said on its run lease, where every waiting
    node of the run looks (model/rollout.py, docs/design.md §18.2). The first failure only; False
    when there was nothing to write (no run, its lease gone, already marked)."""
    if not run_id or client.dry_run:
        return False
    current = leases.named(seen, lease_name(run_id)) if seen is not None else read_lease(client, run_id, namespace)
    rollout_id = rollout_record.rollout_of(current)
    shared = False
    if rollout_record.shared(run_id, rollout_id):
        shared = mark_rollout_stopped(client, rollout_id, run_id, node, phase, namespace)
    if current is None or rollout.STOPPED_AFTER in ((current.get("metadata") or {}).get("annotations") or {}):
        return shared
    return lease_store.annotate(client, current, rollout.STOPPED_AFTER, rollout.stopped_mark(node, phase)) or shared


def mark_rollout_stopped(client: Client, rollout_id: str, run_id: str, node: str, phase: str,
                         namespace: str = leases.LEASE_NAMESPACE) -> bool:
    """The first failure of any run of the rollout, on the rollout's lease (with its run), in a
    write that tests the version read: of two runs failing at once, one is the first. False when
    another failure was there first, or the lease is gone."""
    name = rollout_record.lease_name(rollout_id)
    for _attempt in range(leases.MAX_ATTEMPTS):
        current = lease_store.read(client, namespace, name)
        if current is None or rollout.STOPPED_AFTER in rollout_record.annotations(current):
            return False
        meta = current["metadata"]
        ops: List[Dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion",
                                      "value": meta.get("resourceVersion")}]
        if meta.get("annotations") is None:
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        for key, value in ((rollout.STOPPED_AFTER, rollout.stopped_mark(node, phase)),
                           (rollout_record.STOPPED_RUN, run_id)):
            ops.append({"op": "add", "path": "/metadata/annotations/" + key.replace("/", "~1"), "value": value})
        try:
            client.patch(lease_store.leases_path(namespace, name), ops, "json")
            return True
        except NotFound:
            return False
        except (Conflict, UnprocessableEntity):
            continue  # changed since the read (another run's start or failure): look again
    return False


# -- the guard -------------------------------------------------------------------------------
_local_anchor: Optional[Tuple[int, Optional[str]]] = None


def set_local_anchor(pid: int) -> None:
    """The controller process this code runs under (set by the in-process action plugin)."""
    global _local_anchor  # pylint: disable=global-statement
    _local_anchor = (pid, process_start(pid))


def local_anchor_alive() -> bool:
    """False once the controller process that started this task is gone (then the worker
    running this code has been orphaned: nobody will read its result)."""
    if _local_anchor is None:
        return True
    pid, started = _local_anchor
    return os.getppid() == pid and process_start(pid) == started


class Guard:
    """Asked before every wait step and write: is this run still alive, is the node still ours."""

    node = ""
    held = HELD_NONE

    def __init__(self, client: Client, run_id: str, namespace: str = leases.LEASE_NAMESPACE,
                 look_every: float = GUARD_LOOK_EVERY, clock: Any = time.monotonic, node: str = "",
                 held: str = HELD_NONE) -> None:
        self.client = client
        self.run_id = run_id
        self.namespace = namespace
        self.look_every = look_every
        self.clock = clock
        self.node = node
        self.held = held if node else HELD_NONE
        self.warnings: List[str] = []  # late renewals seen, each once
        self._looked: Optional[float] = None

    def check(self, force: bool = False, lease_list: Optional[List[leases.Lease]] = None) -> None:
        """Raise RunGone when the controller or the run lease is gone, LeaseLost when a lease
        the run holds for the node (``held``) lapsed or changed hands. The namespace is looked
        at at most every ``look_every`` seconds unless ``force``: the run lease alone is read,
        or, when the node's leases are checked too, the namespace is listed (one request
        either way); ``lease_list`` (a fresh view of it, e.g. from a watch) answers without one."""
        if not local_anchor_alive():
            raise RunGone(f"run {self.run_id}: the controller process is gone; stopping without further writes")
        if not self.run_id:
            return
        now_mono = self.clock()
        seen = lease_list
        if seen is None and (force or self._looked is None or now_mono - self._looked >= self.look_every):
            if self.held != HELD_NONE:
                seen = lease_store.list_leases(self.client, self.namespace)
            else:
                lease = read_lease(self.client, self.run_id, self.namespace)
                seen = [lease] if lease is not None else []
        if seen is None:
            return
        self._looked = now_mono
        lease = leases.named(seen, lease_name(self.run_id))
        now = self.client.server_now()
        note = heartbeat_note.read(self.run_id)
        if not leases.is_valid(lease, now) or leases.holder(lease) != self.run_id:
            why = (heartbeat_note.sentence(note, time.time()) if note is not None
                   else "the controller died or lost the API server")
            raise RunGone(f"run {self.run_id}: its run lease {self.namespace}/{lease_name(self.run_id)} is gone or "
                          f"expired ({why}); stopping without further writes")
        if note is not None:
            warning = heartbeat_note.sentence(note, time.time())
            kind = note[1].split(":", 1)[0]
            if not any(kind in w for w in self.warnings):
                self.warnings.append(warning)
        if self.held == HELD_NONE:
            return
        errors, warnings = held_verdict(seen, self.node, self.run_id, self.held, now, self.namespace)
        self.warnings += [w for w in warnings if w not in self.warnings]
        if errors:
            raise LeaseLost("; ".join(errors), node=self.node)

    def check_maintenance(self, nm: Optional[Dict[str, Any]]) -> None:
        """Raise RunGone when the NodeMaintenance was taken over by another run."""
        owner = run_of(nm)
        if self.run_id and nm is not None and owner and owner != self.run_id:
            raise RunGone(f"run {self.run_id}: NodeMaintenance {nm['metadata']['name']} now belongs to run {owner}; "
                          "stopping without further writes")


class NoGuard(Guard):
    """For calls made outside a run (a module used on its own): only the local anchor counts."""

    def __init__(self) -> None:  # pylint: disable=super-init-not-called
        self.run_id = ""
        self.namespace = leases.LEASE_NAMESPACE
        self.warnings: List[str] = []

    def check(self, force: bool = False, lease_list: Optional[List[leases.Lease]] = None) -> None:
        if not local_anchor_alive():
            raise RunGone("the controller process is gone; stopping without further writes")

    def check_maintenance(self, nm: Optional[Dict[str, Any]]) -> None:
        return None


def guard_for(client: Client, run_id: Optional[str], namespace: str = leases.LEASE_NAMESPACE, node: str = "",
              held: str = HELD_NONE) -> Guard:
    return Guard(client, run_id, namespace, node=node, held=held) if run_id else NoGuard()
