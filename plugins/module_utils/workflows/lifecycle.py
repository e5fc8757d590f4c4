"""The two ends of a node's maintenance, and its rollback, each as one call.

``begin`` is docs/design.md §4, steps 1 to 6 in order: the NodeMaintenance (phase Pending), the leases
behind the etcd guard, then the maintenance taints, cordon and the exclude-from-remediation
label in one patch (model/node_state.py). ``end`` is step 9: uncordon, unlabel and untaint in one
patch (so the control plane's own ``node.kubernetes.io/unschedulable`` taint never comes
back), the leases, and last the NodeMaintenance that said who did all this.

Both stop at the first error. The error then carries ``reached``, the steps that were done;
``rollback(reached, keep_record)`` undoes exactly those and leaves alone what was not ours,
by the same code as the end (``_undo``). ``failed`` is what the role calls on a failure:
record it on the NodeMaintenance, then roll back or keep.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from ..api import paths
from ..api.client import Client, request_kind
from ..errors import Conflict, InputError, NmoError, NotFound, RefusedError
from ..model import failure, leases, record, rollout, validation
from ..model import node_state as state
from ..model.marks import (
    EXCLUDE_FROM_REMEDIATION,
    MAINTAINED_BY,
    SETTLE_SNAPSHOT,
    begin_wanted,
    cordon_wanted,
    end_wanted,
    found_before,
    is_ready,
    left_as_found,
    marking,
    not_ready,
    not_ready_refusal,
)
from ..model.node_conditions import ours as ours_conditions
from ..model.node_state import Wanted
from ..model.taints import MAINTENANCE_TAINTS
from ..stores import crd, events, maintenance, node_conditions, nodes
from ..stores import leases as lease_store
from ..stores import record as record_store
from . import disruption, info, operator, run

BEGIN_STEPS = ("maintenance", "lease", "taints", "cordon")
END_STEPS = ("uncordon", "taints", "lease", "maintenance")
LEASE_FIELDS = ("slot", "places", "lease", "expires", "waited", "etcd", "holders", "acquired", "would_wait", "blocked")


@dataclass
class Options:
    node: str
    lease: disruption.Request
    name: Optional[str] = None
    reason: str = ""
    install_crd: bool = False
    label_key: str = EXCLUDE_FROM_REMEDIATION
    annotations: Optional[Dict[str, Optional[str]]] = None
    labels: Optional[Dict[str, Optional[str]]] = None  # the end: node labels set (None: removed) in its patch
    end_events: List[Dict[str, Any]] = field(default_factory=list)
    run_id: str = ""
    mode: str = operator.STANDALONE  # operator: NMO does the node's work (operator.py)
    # the end: the node's leases the run must still hold (run.Guard); None: as the progress record says
    held_leases: Optional[str] = run.HELD_NONE
    # the begin: a node without its kubelet (NotReady, unreachable) is refused before any write,
    # as the pre-flight refuses it: its drain would wait for evictions nobody carries out (the
    # role sets it unless the drain lets terminating pods go: pod_filters.lets_terminating_go)
    refuse_not_ready: bool = False
    # the begin: MaintenanceInProgress on the Node where the API server knows the node lifecycle
    # conditions (docs/design.md §4.11); the end and the rollback remove ours whatever this says
    node_conditions: bool = True
    # the begin: the client's requests_by when the module's call started, so that the record
    # keeps the whole call's requests (None: from the begin's own start)
    requests_mark: Optional[Dict[str, int]] = None
    # a list of the leases namespace the caller made a moment ago (the module's read of the run
    # lease for the run's mode): the begin's first look, the end's guard and its release use it
    # rather than a list of their own. None: each lists it when it needs it
    leases_seen: Optional[List[leases.Lease]] = None

    def validate(self) -> None:
        """Every option, before the first request: nothing is written on bad input."""
        validation.node_name(self.node)
        if self.name is not None:
            validation.dns_subdomain(self.name, "name", "NodeMaintenance name")
        else:
            validation.derived_name(maintenance.default_name(self.node), "node", self.node)
        validation.text(self.reason or "", "reason", validation.MAX_REASON)
        validation.qualified_name(self.label_key, "label_key")
        validation.annotations(self.annotations)
        validation.events(self.end_events)
        if self.run_id:
            run.validate_id(self.run_id)
        if self.held_leases is not None:
            validation.one_of(self.held_leases, "held_leases", run.HELD_CHOICES)
        if self.mode not in (operator.STANDALONE, operator.OPERATOR):
            raise InputError(f"mode must be standalone or operator, got {self.mode!r}")
        self.lease.validate()


class Progress:
    """Which steps are done; an error leaving a step carries the list."""

    def __init__(self) -> None:
        self.reached: List[str] = []

    def done(self, step: str) -> None:
        self.reached.append(step)

    def fail(self, exc: NmoError) -> NmoError:
        exc.details["reached"] = list(self.reached)
        return exc


# -- the node's progress record (model/record.py) -------------------------------------------------
def note_begin(client: Client, nm: Dict[str, Any], opts: Options, reached: List[str],
               held: str = run.HELD_NONE, places: Tuple[str, ...] = (),
               mark: Optional[Dict[str, int]] = None, waited: float = 0.0) -> Dict[str, Any]:
    """The begin's record: the phase, the steps done so far, the leases the run holds and how
    long it waited for them, and the begin's API requests since ``mark`` (this write
    included), which the call that finishes the node adds to its own (``recorded_requests``):
    no request of its own."""
    found = record_store.of(nm) or record.Record()
    now = replace(found.started(failure.BEGIN, opts.run_id), reached=tuple(reached), held=held,
                  places=places or found.places, waited=round(float(waited), 3), failure="", failed_phase="",
                  failed_run="", requests=())
    if mark is not None:
        asked = client.requests_since(mark)
        if not client.dry_run:  # the write below, counted as the client will count it
            kind = request_kind("PATCH", maintenance.path(nm["metadata"]["name"],
                                                          "" if record_store.operated(nm) else "status"))
            asked[kind] = asked.get(kind, 0) + 1
        now = now.with_requests(asked)
    return record_store.write(client, nm, now)


def recorded_wait(progress: Optional[record.Record], run_id: str) -> float:
    """How long this run's begin waited for the node's places, as its record keeps it."""
    return progress.waited if progress is not None and run_id and progress.run == run_id else 0.0


def recorded_requests(progress: Optional[record.Record], run_id: str) -> Dict[str, int]:
    """The requests the node's record keeps for this run (the begin's), for the call that
    finishes the node to add to its own (adapter.py: ``node_api_requests_by``)."""
    return progress.requests_by() if progress is not None and run_id and progress.run == run_id else {}


def note_reached_on_failure(client: Client, nm: Optional[Dict[str, Any]], opts: Options, reached: List[str],
                            mark: Optional[Dict[str, int]] = None) -> None:
    """A failed begin leaves the steps it did in the record, for the failure path to undo just
    those; a record it cannot write is no second error (the failure path then reads the cluster)."""
    if nm is None or client.dry_run:
        return
    try:
        note_begin(client, nm, opts, reached, mark=mark)
    except NmoError:
        pass


def reached_of(client: Client, opts: Options, nm: Optional[Dict[str, Any]],
               progress: Optional[record.Record]) -> List[str]:
    """The begin steps this run did on the node, as the cluster shows them: the record's, while
    the node was in its begin; all of them once it got past it (or was resumed by this run);
    without a record of this run, its NodeMaintenance (and in operator mode the slot taken
    before it) if this run made or adopted them; otherwise none."""
    if progress is not None and progress.run == opts.run_id:
        return list(progress.reached) if progress.phase == failure.BEGIN else list(BEGIN_STEPS)
    ours = bool(nm) and run.run_of(nm) == opts.run_id and bool(opts.run_id)
    if opts.mode != operator.OPERATOR:
        return ["maintenance"] if ours else []
    held = bool(opts.run_id) and bool(rollout.kept_leases(
        lease_store.list_leases(client, opts.lease.namespace), opts.node, opts.lease.slot_prefix))
    return (["lease"] if held else []) + (["maintenance"] if ours else [])


# -- steps shared with the single-purpose modules ------------------------------------------------
def ensure_maintenance(client: Client, recorder: events.EventRecorder, node: str, reason: str,
                       name: Optional[str], run_id: str = "",
                       with_operator: bool = False, node_read: bool = False,
                       turn: Optional[int] = None) -> Dict[str, Any]:
    """The node's NodeMaintenance, created with a BeginMaintenance event when missing.

    An existing one is adopted for ``run_id`` only when the run that held it is gone (or it
    names no run: made by hand, or before runs had ids); one held by a live run is refused
    with OwnedByLiveRun, before anything is written. ``node_read``: the caller has read the
    node (it exists), so it is not read again.
    """
    items = maintenance.list_all(client)
    before = maintenance.find(client, node, items)
    adopted_from = None
    if maintenance.terminating(before):
        raise RefusedError(f"NodeMaintenance {before['metadata']['name']} of node {node} is being deleted; it is not "
                           "resumed. " + (maintenance.finalizer_advice(before["metadata"]["name"])
                                          if maintenance.NMO_FINALIZER in (before["metadata"].get("finalizers") or [])
                                          else "Run again once it is gone."), maintenance=before["metadata"]["name"])
    if before is not None:
        state, owner = refuse_if_live_run(client, before, run_id, node)
        if run_id and state in (run.GONE, run.NONE):
            adopted_from = owner or "none"
    nm, created = maintenance.ensure(client, node, reason, name, run_id, with_operator, items=items,
                                     node_read=node_read, turn=turn)
    if created and not with_operator:  # NMO records its own BeginMaintenance
        recorder.record(nm, events.BEGIN_MAINTENANCE)
    elif adopted_from is not None:
        try:
            nm = maintenance.adopt(client, nm, run_id, owner, turn)
        except Conflict:
            raise run.OwnedByLiveRun(f"node {node}: another run adopted its NodeMaintenance at the same moment; "
                                     "not adopted twice", maintenance=nm["metadata"]["name"]) from None
        why = (f"run {adopted_from} is gone (its run lease expired or was deleted)" if adopted_from != "none"
               else "it named no run")
        recorder.record(nm, events.RESUME_MAINTENANCE, f"Run {run_id} resumes this maintenance: {why}")
    return {"nm": nm, "before": before, "created": created, "adopted_from": adopted_from}


def refuse_if_live_run(client: Client, nm: Optional[Dict[str, Any]], run_id: str, node: str) -> Tuple[str, str]:
    """OwnedByLiveRun when another run that is alive holds ``nm``: not ours to end or change.
    Otherwise (ours | none | gone, the run that held it)."""
    state, owner = run.owner_of(client, nm, run_id)
    if state == run.ALIVE:
        raise run.OwnedByLiveRun(
            f"node {node} is in maintenance by run {owner}, which is alive (its run lease is being renewed): "
            f"not changed by {'run ' + run_id if run_id else 'this call'}; that run ends it, or stop it first",
            owner_run=owner, maintenance=(nm or {}).get("metadata", {}).get("name"))
    return state, owner


def remove_maintenance(client: Client, recorder: events.EventRecorder, nm: Optional[Dict[str, Any]]) -> bool:
    """Delete it (RemovedMaintenance event); False when there was nothing to delete."""
    if nm is None:
        return False
    deleted = maintenance.delete(client, nm)
    if deleted:
        recorder.record(nm, events.REMOVED_MAINTENANCE)
    return deleted


def record_on(client: Client, recorder: events.EventRecorder, nm: Dict[str, Any], specs: List[Dict[str, Any]],
              node_name: str) -> None:
    """Record the events of ``specs`` (reason, text, type, on: maintenance | node)."""
    node = None
    for spec in specs:
        target = nm
        if spec.get("on") == "node":
            if node is None:
                node = nodes.read_node(client, node_name)
                node.setdefault("apiVersion", "v1")
                node.setdefault("kind", "Node")
            target = node
        recorder.record(target, spec["reason"], spec.get("text"), spec.get("type"))


def cordon(client: Client, recorder: events.EventRecorder, name: str, unschedulable: bool, label_key: str,
           label: bool, maintenance_name: Optional[str] = None,
           annotations: Optional[Dict[str, Optional[str]]] = None, remove_taints: bool = False,
           node: Optional[Dict[str, Any]] = None, labels: Optional[Dict[str, Optional[str]]] = None
           ) -> Dict[str, Any]:
    """Cordon (with a Cordon event on the NodeMaintenance) or uncordon (UncordonNode on the
    Node), the mirror taint with it, in one patch (model/node_state.py).

    Uncordoning removes the label only when it is ours to remove (``ours_to_unlabel``), and
    forgets the marks the begin recorded; with ``remove_taints`` (the end, a rollback) the
    maintenance taints go in the same patch, and ``labels`` (recover lifting a quarantine).
    """
    def want(read: Dict[str, Any]) -> Wanted:
        if remove_taints:
            return end_wanted(read, label_key, annotations, labels)
        return cordon_wanted(read, unschedulable, label_key, label, annotations)

    done = nodes.apply(client, name, want, node=node)
    before, after = marking(done.before, label_key), marking(done.after, label_key)
    # what the begin found on the node and the end leaves (an administrator's cordon, a taint)
    kept = left_as_found(name, {"metadata": {"annotations": done.before["annotations"]}}) if remove_taints else []
    target = dict(done.node)
    target.setdefault("apiVersion", "v1")
    target.setdefault("kind", "Node")
    if done.changed and before != after:  # an annotation alone is not worth an event
        if unschedulable and maintenance_name:
            nm = maintenance.get(client, maintenance_name)
            if nm:
                recorder.record(nm, events.CORDON, f"Cordoned node {name}")
        elif not unschedulable and before["unschedulable"] and not after["unschedulable"]:
            recorder.record(target, events.UNCORDON_NODE)
    for said in kept:
        recorder.record(target, events.KEPT_AS_FOUND, said[0].upper() + said[1:])
    return {"before": before, "after": after, "node": done.node, "changed": done.changed,
            "taints_before": done.before["taints"], "taints_after": done.after["taints"], "held": done.held,
            "left_as_found": kept}


# -- the two calls ---------------------------------------------------------------------------------
def lifecycle_conditions(client: Client, opts: Options, node: Dict[str, Any], name: str,
                         seen: Optional[List[Any]]) -> Dict[str, Any]:
    """docs/design.md §4.11's MaintenanceInProgress, the server's support read once a run: the
    run lease (in ``seen``, the begin's list of the leases namespace) says it once a begin of
    the run found it, and the first begin that reads it says it there."""
    lease = leases.named(seen, run.lease_name(opts.run_id)) if seen is not None and opts.run_id else None
    done = node_conditions.set_maintenance(client, node, opts.reason, name, run.node_conditions_of(lease))
    found = done.pop("support", None)
    if found is not None:
        run.note_node_conditions(client, lease, *found)
    return done


@dataclass
class Beginning:
    """A standalone begin as its steps (``BEGIN_PHASES``) go: what each step read or wrote, for
    the steps after it and for the answer."""

    opts: Options
    recorder: events.EventRecorder
    progress: Progress
    mark: Dict[str, int]  # the client's requests_by from which the record counts the begin's requests
    guard: run.Guard
    result: Dict[str, Any]
    changed: bool = False
    seen: Optional[List[Any]] = None  # the leases namespace, listed once (None: not listed)
    node_read: Dict[str, Any] = field(default_factory=dict)
    made: Dict[str, Any] = field(default_factory=dict)  # ensure_maintenance's answer
    nm: Optional[Dict[str, Any]] = None
    name: str = ""
    lease: Dict[str, Any] = field(default_factory=dict)  # disruption.acquire's answer
    applied: Optional[nodes.Applied] = None  # the node patch: taints, cordon, label, marks
    cordoned: Dict[str, Any] = field(default_factory=dict)
    conditions: Dict[str, Any] = field(default_factory=dict)
    held: str = run.HELD_NONE


def _begin_look(client: Client, b: Beginning) -> Optional[Dict[str, Any]]:
    """Before the first write: is the run still there, may the node begin (the rollout
    scheduler), and is there anything that can never pass (docs/design.md §4.2) or a node without its
    kubelet; then the CRD, if asked for."""
    opts = b.opts
    # One list of the leases namespace tells whether the run is still there (no write for
    # a run that is gone) and, a moment later, answers the lease step's first look.
    if not client.dry_run and b.guard.namespace == opts.lease.namespace:
        b.seen = opts.leases_seen if opts.leases_seen is not None else lease_store.list_leases(
            client, opts.lease.namespace)
    b.guard.check(force=True, lease_list=b.seen)
    if b.seen is not None:  # the scheduler first: a node that does not begin writes nothing at all
        disruption.scheduled(client, replace(opts.lease, node=opts.node, run_id=opts.run_id), b.seen, [])
    # read once for the NodeMaintenance (the node exists), the leases (owner, control
    # plane?) and the node patch, whose test ops catch a change made since
    b.node_read = nodes.read_node(client, opts.node)
    # what can never pass is refused before the first write (docs/design.md §4.2)
    disruption.refuse_never_allowed(client, replace(opts.lease, node=opts.node), b.node_read)
    # a node this collection already took (its begin's marks are on it) is never refused:
    # one powered off in its work is resumed, not abandoned
    ours = MAINTAINED_BY in ((b.node_read.get("metadata") or {}).get("annotations") or {})
    unready = not_ready(b.node_read) if opts.refuse_not_ready and not ours else None
    if unready:
        raise RefusedError(f"{not_ready_refusal(opts.node, unready)}. Nothing was written", node=opts.node)
    if opts.install_crd:
        b.result["crd"] = crd.ensure(client)
        b.changed = b.result["crd"]["changed"]
    return None


def _begin_maintenance(client: Client, b: Beginning) -> Optional[Dict[str, Any]]:
    """Step ``maintenance``: the NodeMaintenance made or adopted, and the record says the begin started."""
    opts = b.opts
    b.made = ensure_maintenance(client, b.recorder, opts.node, opts.reason, opts.name, opts.run_id,
                                node_read=True, turn=opts.lease.turn)
    b.nm = b.made["nm"]
    b.name = b.nm["metadata"]["name"]
    b.result.update(created=b.made["created"], maintenance=maintenance.summary(b.nm),
                    adopted_from=b.made["adopted_from"])
    b.progress.done("maintenance")
    # A NodeMaintenance this begin made names the run and has no record: read as exactly this
    # step (reached_of), so the record is written once, at the begin's end (or on a failure):
    # one status write a phase. One adopted, or of this run already, carries a record of
    # another moment, which this run's record replaces now (the rollout scheduler and the
    # failure path read it while the node waits for its places).
    if not b.made["created"]:
        b.nm = note_begin(client, b.nm, opts, b.progress.reached, mark=b.mark)
    return None


def _begin_lease(client: Client, b: Beginning) -> Optional[Dict[str, Any]]:
    """Step ``lease``: the node's places (node lease, slot, etcd guard), waited for; a run
    stopped meanwhile ends the begin here, the NodeMaintenance it made removed."""
    opts = b.opts
    # a NodeMaintenance that only a dry run imagined cannot be named to the guard
    imagined = client.dry_run and b.made["created"]
    try:
        b.lease = disruption.acquire(client, replace(opts.lease, node=opts.node, run_id=opts.run_id,
                                                     maintenance=None if imagined else b.name),
                                     node=b.node_read, nm=disruption.UNREAD if imagined else b.nm, seen=b.seen)
    except run.RunStopped as exc:  # it held nothing: the NodeMaintenance this begin made goes too
        removed = remove_maintenance(client, b.recorder, b.nm) if b.made["created"] else False
        return stopped(opts, exc, removed, b.recorder)
    b.progress.done("lease")
    b.guard.check()  # the lease wait may have lasted long: is the run still there?
    return None


def _begin_node(client: Client, b: Beginning) -> Optional[Dict[str, Any]]:
    """Steps ``taints`` and ``cordon``: taints, cordon, label and our marks in one guarded JSON
    Patch (model/node_state.py), planned from the node as read before: its test ops fail if
    someone wrote the node since (a long lease wait, say), and the patch is then planned again
    from a new read."""
    opts = b.opts
    b.applied = done = nodes.apply(client, opts.node, lambda node: begin_wanted(node, opts.label_key, opts.run_id),
                                   node=b.node_read)
    b.progress.done("taints")
    b.cordoned = {"before": marking(done.before, opts.label_key), "after": marking(done.after, opts.label_key),
                  "node": done.node}
    b.cordoned["changed"] = b.cordoned["before"] != b.cordoned["after"]
    if b.cordoned["changed"]:
        b.recorder.record(b.nm, events.CORDON, f"Cordoned node {opts.node}")
    b.progress.done("cordon")
    return None


def _begin_recorded(client: Client, b: Beginning) -> Optional[Dict[str, Any]]:
    """After the steps: MaintenanceInProgress where the API server knows it (docs/design.md §4.11, never
    a failure), and the record says the begin is done, with the leases the run now holds."""
    opts = b.opts
    b.conditions = (lifecycle_conditions(client, opts, b.cordoned["node"], b.name, b.seen) if opts.node_conditions
                    else {"active": False, "changed": False, "set": [], "why_not": "node_conditions: false",
                          "warnings": []})
    b.held = run.HELD_ALL if opts.run_id and not client.dry_run else run.HELD_NONE
    b.nm = note_begin(client, b.nm, opts, b.progress.reached, b.held, record.places_of(b.lease), b.mark,
                      b.lease.get("waited", 0.0))
    return None


# The standalone begin, in order (docs/design.md §4, steps 1 to 6; BEGIN_STEPS names the ones
# a rollback undoes). A step returns the begin's answer when it ends the begin early.
BEGIN_PHASES: Tuple[Callable[[Client, Beginning], Optional[Dict[str, Any]]], ...] = (
    _begin_look, _begin_maintenance, _begin_lease, _begin_node, _begin_recorded)


def begin(client: Client, opts: Options) -> Dict[str, Any]:
    opts.validate()
    if opts.mode == operator.OPERATOR:
        return begin_with_operator(client, opts)
    b = Beginning(opts=opts, recorder=events.EventRecorder(client), progress=Progress(),
                  mark=opts.requests_mark if opts.requests_mark is not None else dict(client.requests_by),
                  guard=run.NoGuard() if client.dry_run else run.guard_for(client, opts.run_id),
                  result={"node": opts.node, "state": "present", "run": opts.run_id})
    try:
        for phase in BEGIN_PHASES:
            answer = phase(client, b)
            if answer is not None:
                return answer
    except run.RunStopped as exc:  # before the NodeMaintenance: nothing was written
        return stopped(opts, exc, False, b.recorder)
    except NmoError as exc:
        note_reached_on_failure(client, b.nm if "maintenance" in b.progress.reached else None, opts,
                                b.progress.reached, b.mark)
        raise b.progress.fail(exc) from None
    return begun(b)


def begun(b: Beginning) -> Dict[str, Any]:
    """The answer of a begin that went through its steps."""
    opts, made, lease, cordoned, conditions, result = b.opts, b.made, b.lease, b.cordoned, b.conditions, b.result
    done = cast(nodes.Applied, b.applied)  # _begin_node's, as every step ran
    result.update(
        changed=b.changed or made["created"] or bool(made["adopted_from"]) or lease["changed"] or done.changed
        or cordoned["changed"] or conditions["changed"],
        node_conditions={k: v for k, v in conditions.items() if k != "warnings"},
        reached=b.progress.reached,
        lease={k: lease.get(k) for k in LEASE_FIELDS if k in lease},
        held_leases=b.held,
        waited=lease.get("waited", 0.0),
        taints=done.after["taints"], cordon=cordoned["after"], ready=is_ready(cordoned["node"]),
        events=b.recorder.recorded,
        # what someone else had put on the node stays after the end: said now, when it matters to plan
        warnings=[w for w in [(result.get("crd") or {}).get("warning")] if w]
        + left_as_found(opts.node, {"metadata": {"annotations": done.after["annotations"]}}, ending=False)
        + lease.get("warnings", []) + b.recorder.warnings + conditions["warnings"],
        diff={"before": {"maintenance": view(made["before"]), **lease["diff"]["before"],
                         "taints": done.before["taints"], **cordoned["before"], **conditions_diff(b.node_read)},
              "after": {"maintenance": view(b.nm), **lease["diff"]["after"], "taints": done.after["taints"],
                        **cordoned["after"], **conditions_diff(b.node_read, conditions["set"])}})
    return result


def conditions_diff(node: Dict[str, Any], put: Optional[List[str]] = None, gone: Optional[List[str]] = None
                    ) -> Dict[str, Any]:
    """The node's lifecycle conditions of ours, as the diff shows them (none: no key at all)."""
    had = ours_conditions(node) if node else []
    now = sorted((set(had) | set(put or [])) - set(gone or []))
    return {"node_conditions": now} if had or now else {}


def begin_with_operator(client: Client, opts: Options) -> Dict[str, Any]:
    """Operator mode: the slot (and the etcd guard) first, since NMO starts on a new
    NodeMaintenance at once, then the NodeMaintenance, with no status of ours. NMO takes the
    node lease, the label, the taints and cordon, and drains."""
    recorder = events.EventRecorder(client)
    progress = Progress()
    mark = opts.requests_mark if opts.requests_mark is not None else dict(client.requests_by)
    guard = run.NoGuard() if client.dry_run else run.guard_for(client, opts.run_id)
    result: Dict[str, Any] = {"node": opts.node, "state": "present", "run": opts.run_id, "mode": operator.OPERATOR}
    try:
        guard.check(force=True)
        existing = maintenance.find(client, opts.node)
        if existing is None:  # a node already in maintenance is past its begin: it finishes
            disruption.scheduled(client, replace(opts.lease, node=opts.node, run_id=opts.run_id),
                                 lease_store.list_leases(client, opts.lease.namespace), [])
        if existing is not None:
            state, owner = refuse_if_live_run(client, existing, opts.run_id, opts.node)
            if state == run.NONE and not maintenance.terminating(existing):
                raise run.OwnedByLiveRun(
                    f"node {opts.node} has a NodeMaintenance ({existing['metadata']['name']}) that this collection did "
                    "not make: the Node Maintenance Operator maintains it for someone else; it is left to them",
                    owner_run="", maintenance=existing["metadata"]["name"])
        lease = disruption.acquire(client, replace(opts.lease, node=opts.node, run_id=opts.run_id, operator=True,
                                                   maintenance=existing["metadata"]["name"] if existing else None))
        progress.done("lease")
        guard.check()
        made = ensure_maintenance(client, recorder, opts.node, opts.reason, opts.name, opts.run_id,
                                  with_operator=True)
        progress.done("maintenance")
        held = run.HELD_SLOT if opts.run_id and not client.dry_run else run.HELD_NONE
        made["nm"] = note_begin(client, made["nm"], opts, progress.reached, held, record.places_of(lease), mark,
                                lease.get("waited", 0.0))
    except run.RunStopped as exc:  # the slot comes before the NodeMaintenance: nothing was written
        return stopped(opts, exc, False, recorder)
    except NmoError as exc:
        raise progress.fail(exc) from None
    nm = made["nm"]
    result.update(
        changed=made["created"] or bool(made["adopted_from"]) or lease["changed"], reached=progress.reached,
        created=made["created"], adopted_from=made["adopted_from"], maintenance=maintenance.summary(nm),
        lease={k: lease.get(k) for k in LEASE_FIELDS if k in lease}, waited=lease.get("waited", 0.0),
        held_leases=held,
        events=recorder.recorded, warnings=lease.get("warnings", []),
        diff={"before": {"maintenance": view(made["before"]), **lease["diff"]["before"]},
              "after": {"maintenance": view(nm), **lease["diff"]["after"]}})
    return result


def stopped(opts: Options, exc: NmoError, removed: bool, recorder: events.EventRecorder) -> Dict[str, Any]:
    """The begin's answer when the rollout scheduler says stop (model/rollout.py): the node is
    as it was before the run (a NodeMaintenance this begin made is ``removed``), and its plan
    becomes ``stopped``, with the line that says why."""
    return {"changed": removed, "node": opts.node, "state": "present", "run": opts.run_id, "reached": [],
            "maintenance": {}, "plan": rollout.STOPPED_PLAN, "say": f"{opts.node}: {exc.message}",
            "outcome": exc.details.get("outcome") or "not started", "stopped_after": exc.details.get("blocker", ""),
            "fails_run": bool(exc.details.get("fails_run")), "removed": removed, "held_leases": run.HELD_NONE,
            "waited": 0.0, "events": recorder.recorded,
            "warnings": recorder.warnings, "diff": {"before": {}, "after": {}}}


def end_with_operator(client: Client, opts: Options) -> Dict[str, Any]:
    """Operator mode: delete the NodeMaintenance and wait until NMO has let the node go (its
    finalizer), then release the slot. NMO uncordons, untaints, unlabels, releases its lease."""
    recorder = events.EventRecorder(client)
    progress = Progress()
    result: Dict[str, Any] = {"node": opts.node, "state": "absent", "run": opts.run_id, "mode": operator.OPERATOR}
    try:
        nm = maintenance.get(client, opts.name) if opts.name else maintenance.locate(client, opts.node)
        refuse_if_live_run(client, nm, opts.run_id, opts.node)
        run.NoGuard().check()
        deleted = maintenance.delete(client, nm) if nm is not None else False
        progress.done("maintenance")
        released = disruption.release(client, replace(opts.lease, node=opts.node, run_id=opts.run_id, operator=True,
                                                      maintenance=None))
        progress.done("lease")
        node = client.get_or_none(paths.node(opts.node)) or {}  # a node deleted meanwhile has nothing left to end
        if opts.annotations and node:  # the campaign's done mark: ours to write, not NMO's
            node = nodes.apply(client, opts.node, Wanted(annotations=dict(opts.annotations)),
                               node=node).node
    except NmoError as exc:
        raise progress.fail(exc) from None
    warnings = list(released.get("warnings", []))
    taints = node.get("spec", {}).get("taints") or []
    if not client.dry_run and (node.get("spec", {}).get("unschedulable") or any(
            t.get("key") == "medik8s.io/drain" for t in taints)):
        warnings.append(f"node {opts.node} is still cordoned or tainted after the Node Maintenance Operator let go")
    result.update(changed=deleted or released["changed"], reached=progress.reached, deleted=deleted,
                  maintenance=maintenance.summary(nm), released=released["released"],
                  not_released=released["not_released"], taints=taints,
                  cordon=marking(state.view(node), opts.label_key), ready=is_ready(node), events=recorder.recorded,
                  warnings=warnings,
                  diff={"before": {"maintenance": view(nm), **released["diff"]["before"]},
                        "after": {"maintenance": {}, **released["diff"]["after"]}})
    return result


def end(client: Client, opts: Options) -> Dict[str, Any]:
    """docs/design.md §4.9: everything the begin did, undone, and the NodeMaintenance deleted.

    Not when a lease the run held for the node lapsed or changed hands since (``held_leases``):
    another run may have taken the node or its slot meanwhile, so the maintenance cannot be
    reported done; the task fails (LeaseLost) and the role's failure path says what happened."""
    opts.validate()
    warnings: List[str] = []
    held = opts.held_leases
    nm: Optional[Dict[str, Any]] = None
    if opts.run_id:  # the record says the end started, and (unless told) which leases the run must hold
        nm, progress = record_store.started(client, opts.node, failure.END, opts.run_id, name=opts.name)
        if held is None:
            held = progress.held if progress is not None and progress.run == opts.run_id else run.HELD_NONE
    held = held or run.HELD_NONE
    if not client.dry_run and held != run.HELD_NONE:
        guard = run.guard_for(client, opts.run_id, node=opts.node, held=held)
        # the module's list, made just before the record's write, is the guard's fresh look
        guard.check(force=True, lease_list=opts.leases_seen if guard.namespace == opts.lease.namespace else None)
        warnings = guard.warnings
    done = (end_with_operator(client, opts) if opts.mode == operator.OPERATOR
            else _undo(client, opts, BEGIN_STEPS, False, nm_read=nm))
    done["warnings"] = warnings + list(done.get("warnings") or [])
    if opts.run_id:
        done["recorded_requests"] = recorded_requests(progress, opts.run_id)
        done["waited"] = recorded_wait(progress, opts.run_id)
    return done


def rollback(client: Client, opts: Options, reached: List[str], keep_record: bool = True) -> Dict[str, Any]:
    """Undo exactly the begin steps in ``reached`` (a failed begin's ``reached``; all of them
    for a maintenance that got further), in the end's order, and nothing that was not ours.

    ``keep_record`` keeps the NodeMaintenance as the record of what happened (standalone: a
    failed maintenance stays with phase Failed); without it the NodeMaintenance is deleted as
    by the end. In operator mode the NodeMaintenance is always deleted when it was made: that
    is how NMO is told to let the node go (it uncordons, untaints, releases its lease).
    """
    opts.validate()
    unknown = sorted(set(reached) - set(BEGIN_STEPS))
    if unknown:
        raise InputError(f"reached: unknown steps {', '.join(unknown)} (known: {', '.join(BEGIN_STEPS)})")
    if not reached:  # nothing was done: nothing to undo, not even a lease to look for
        return {"node": opts.node, "state": "absent", "run": opts.run_id, "changed": False, "reached": [],
                "events": [], "warnings": [], "diff": {"before": {}, "after": {}}}
    if opts.mode == operator.OPERATOR:
        return end_with_operator(client, opts)
    # the drain's settle snapshot (docs/design.md §4.9.1) is for a node that ends: one rolled
    # back goes without it, in the same patch
    opts = replace(opts, annotations={**(opts.annotations or {}), SETTLE_SNAPSHOT: None})
    return _undo(client, opts, tuple(reached), keep_record)


def _undo(client: Client, opts: Options, reached: Tuple[str, ...], keep_record: bool,
          nm_read: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The end and the rollback, one implementation: uncordon and unlabel with the taints in
    one patch, then the leases, then (unless ``keep_record``) the NodeMaintenance. ``nm_read``:
    the node's NodeMaintenance as the caller just read or wrote it (the end's record), not read again."""
    recorder = events.EventRecorder(client)
    progress = Progress()
    result: Dict[str, Any] = {"node": opts.node, "state": "absent", "run": opts.run_id}
    try:
        nm = nm_read if nm_read is not None else (
            maintenance.get(client, opts.name) if opts.name else maintenance.locate(client, opts.node))
        name = nm["metadata"]["name"] if nm else None
        refuse_if_live_run(client, nm, opts.run_id, opts.node)
        run.NoGuard().check()  # never a write from a task whose controller died
        node_done = _undo_node_unless_gone(client, recorder, opts, reached, result)
        # docs/design.md §4.11: our node lifecycle conditions go with the marks (none: no request)
        cleared = (node_conditions.clear(client, node_done["node"]) if node_done["node"]
                   else {"removed": [], "changed": False, "warnings": []})
        progress.done("uncordon")
        progress.done("taints")

        released = disruption.release(client, replace(opts.lease, node=opts.node, maintenance=name,
                                                      run_id=opts.run_id), nm=nm, seen=opts.leases_seen)
        progress.done("lease")

        deleted = False
        if nm is not None and not keep_record:
            record_on(client, recorder, nm, opts.end_events, opts.node)
            deleted = remove_maintenance(client, recorder, nm)
        progress.done("maintenance")
    except NmoError as exc:
        raise progress.fail(exc) from None
    after_nm = view(nm) if keep_record else {}
    result.update(
        changed=node_done["changed"] or released["changed"] or deleted or cleared["changed"],
        reached=progress.reached, maintenance=maintenance.summary(nm), deleted=deleted,
        node_conditions_removed=cleared["removed"],
        released=released["released"], not_released=released["not_released"],
        taints=node_done["taints_after"], cordon=node_done["after"], ready=is_ready(node_done["node"]),
        left_as_found=node_done["left_as_found"],
        events=recorder.recorded,
        warnings=node_done["left_as_found"] + released.get("warnings", []) + recorder.warnings + cleared["warnings"],
        diff={"before": {"maintenance": view(nm), **released["diff"]["before"],
                         "taints": node_done["taints_before"], **node_done["before"],
                         **conditions_diff(node_done["node"])},
              "after": {"maintenance": after_nm, **released["diff"]["after"], "taints": node_done["taints_after"],
                        **node_done["after"], **conditions_diff(node_done["node"], gone=cleared["removed"])}})
    return result


def _undo_node_unless_gone(client: Client, recorder: events.EventRecorder, opts: Options, reached: Tuple[str, ...],
                           result: Dict[str, Any]) -> Dict[str, Any]:
    """The node step of the end and the rollback; a node deleted during its maintenance has
    nothing on it to undo, the rest is (``node_deleted`` in ``result``, and a warning)."""
    try:
        return _undo_node(client, recorder, opts, reached)
    except (nodes.NodeGone, NotFound):
        result["node_deleted"] = True
        recorder.warnings.append(f"node {opts.node} is not in the cluster any more (deleted during its "
                                 "maintenance): nothing to uncordon or untaint; its leases and NodeMaintenance "
                                 "are dealt with")
        return gone_node(opts.node)


def _undo_node(client: Client, recorder: events.EventRecorder, opts: Options, reached: Tuple[str, ...]
               ) -> Dict[str, Any]:
    if "cordon" in reached:  # uncordon, unlabel and (when they were put on) untaint: one patch
        return cordon(client, recorder, opts.node, False, opts.label_key, True,
                      annotations=opts.annotations, remove_taints="taints" in reached, labels=opts.labels)

    # begin never cordoned it: only the taints it put on, if any, and the annotations asked for
    def untaint(read: Dict[str, Any]) -> Wanted:
        had = found_before(read)[1]  # a maintenance taint that was there before the begin stays
        return Wanted(remove=[t for t in MAINTENANCE_TAINTS if t not in had] if "taints" in reached else [],
                      annotations=dict(opts.annotations or {}))

    applied = nodes.apply(client, opts.node, untaint)
    same = marking(applied.before, opts.label_key)
    return {"before": same, "after": same, "node": applied.node, "changed": applied.changed,
            "taints_before": applied.before["taints"], "taints_after": applied.after["taints"],
            "left_as_found": []}


def gone_node(name: str) -> Dict[str, Any]:
    """The node step's result for a node that is not in the cluster any more."""
    nothing = {"unschedulable": False, "label": False}
    return {"before": nothing, "after": nothing, "node": {}, "changed": False, "taints_before": [],
            "taints_after": [], "left_as_found": []}


@dataclass
class Failing:
    """A failed maintenance as ``failed`` takes it through its steps (``FAILURE_STEPS``): what
    is known of it, and the answer as the steps fill it in."""

    opts: Options
    error: str
    policy: str
    phase: str
    reached: List[str]
    notes: List[str]  # what the record said of the phase that failed, kept in the message
    progress: Optional[record.Record]
    nm: Optional[Dict[str, Any]]
    result: Dict[str, Any]
    recorder: events.EventRecorder
    kept: bool = False  # the policy keeps the node in maintenance after this phase
    undo: bool = False  # the steps in ``reached`` are rolled back


def failed(client: Client, opts: Options, error: str, reached: Optional[List[str]] = None, roll_back: bool = True,
           policy: Optional[str] = None, phase: Optional[str] = None) -> Dict[str, Any]:
    """A maintenance that failed, in one call: record it, then roll back or keep, then say where
    the node stands (``message``, the failed node's last line).

    The NodeMaintenance keeps the story (phase Failed, lastError, a FailedMaintenance event;
    in operator mode the status is NMO's). ``policy`` (failure.py) decides from the ``phase``
    that failed whether the node returns to service (``rollback`` of the steps in
    ``reached``, the NodeMaintenance kept) or stays in maintenance, its leases held, for a
    later run to resume; without ``policy``, ``roll_back`` says it for every phase. A slot
    taken in operator mode for a NodeMaintenance never made is released either way. A
    maintenance another live run holds now (it adopted it meanwhile) is that run's: nothing
    is recorded or undone.

    When the API server refuses the record or the rollback (RBAC revoked, say), the error's
    message still says what the node is left with as far as this run knows, and what to run.

    A begin refused before its first write (``reached`` empty) left nothing to record or undo:
    the message says nothing was written, with no request made but the run's, and the options
    are not judged again (a name the begin refused as too long would only be refused again
    here). The run is still stopped (its run lease marked, docs/design.md §18.1: a failure in
    any phase, the begin's too), or the nodes after it would begin as if nothing had failed.

    ``reached`` and ``phase`` omitted (the role passes neither), the node's progress record
    says them (model/record.py; ``reached_of``, ``failure.phase_of``); the record then keeps
    the failure and its phase too.
    """
    if policy is None:
        policy = failure.ROLLBACK if roll_back else failure.KEEP
    f = failing(client, opts, error, reached, policy, phase)
    if not f.reached:
        return failed_before_writing(client, f)
    opts.validate()
    f.kept = failure.keeps(policy, f.phase)
    try:
        for step in FAILURE_STEPS:
            answer = step(client, f)
            if answer is not None:
                return answer
    except NmoError as exc:
        name = f.nm["metadata"]["name"] if f.nm else None
        raise NmoError(failure.unrecorded_message(
            opts.node, error, str(exc), failure.known_state(f.reached, name, opts.lease.duration)),
            reached=f.reached, phase=f.phase, policy=policy) from None
    return failed_answer(client, f)


def failing(client: Client, opts: Options, error: str, reached: Optional[List[str]], policy: str,
            phase: Optional[str]) -> Failing:
    """What is known of the failure: ``reached`` and ``phase`` as given, or as the node's
    progress record says them (the record that cannot be read is an error that says what a
    begin that finished leaves); the answer's first fields."""
    nm: Optional[Dict[str, Any]] = None
    notes: List[str] = []
    progress: Optional[record.Record] = None
    if reached is None or phase is None:
        try:
            nm, progress = record_store.read(client, opts.node, name=opts.name)
            if reached is None:
                reached = reached_of(client, opts, nm, progress)
        except NmoError as exc:
            # what a begin that finished leaves, said as such: the record that would tell is unreadable
            raise NmoError(failure.unrecorded_message(
                opts.node, error, str(exc), "its progress record could not be read; if its begin had finished: "
                + failure.known_state(list(BEGIN_STEPS), None, opts.lease.duration)),
                reached=[], phase=phase or failure.UNKNOWN_DEFAULT, policy=policy) from None
        if phase is None:
            phase, note = failure.phase_of(progress if progress is not None and progress.run == opts.run_id
                                           else None) if reached else (failure.BEGIN, "")
            notes += [note] if note else []
    result: Dict[str, Any] = {"node": opts.node, "state": "failed", "run": opts.run_id, "changed": False,
                              "rolled_back": False, "recorded": False, "left_to": None, "events": [],
                              "warnings": list(notes), "diff": {"before": {}, "after": {}}, "phase": phase,
                              "policy": policy, "kept": False,
                              "recorded_requests": recorded_requests(progress, opts.run_id),
                              "waited": recorded_wait(progress, opts.run_id)}
    return Failing(opts=opts, error=error, policy=policy, phase=phase, reached=list(reached or []), notes=notes,
                   progress=progress, nm=nm, result=result, recorder=events.EventRecorder(client))


def failed_before_writing(client: Client, f: Failing) -> Dict[str, Any]:
    """A begin refused before its first write: nothing to record or undo, but the run stops."""
    opts, result = f.opts, f.result
    if opts.run_id and not client.dry_run:
        result["warnings"] += mark_stopped(client, opts, f.phase)
    result["message"] = failure.message(opts.node, f.error, {
        **result, "reached": [], "maintenance": None, "dry_run": client.dry_run})
    return result


def _failure_owner(client: Client, f: Failing) -> Optional[Dict[str, Any]]:
    """The node's NodeMaintenance; one that another live run holds now is left to that run."""
    opts = f.opts
    f.nm = f.nm if f.nm is not None else maintenance.locate(client, opts.node, opts.name)
    try:
        refuse_if_live_run(client, f.nm, opts.run_id, opts.node)
    except run.OwnedByLiveRun as exc:
        message = failure.message(opts.node, f.error, {**f.result, "reached": f.reached})
        f.result.update(left_to=exc.details.get("owner_run"), reached=[], warnings=[str(exc)], message=message)
        return f.result
    return None


def _failure_recorded(client: Client, f: Failing) -> Optional[Dict[str, Any]]:
    """The failure on the NodeMaintenance: standalone, its status (phase Failed, lastError, the
    record) and a FailedMaintenance event; in operator mode NMO owns the status, so the record
    (failure and phase) is the annotation. A write the API server refuses is a warning: the
    rollback after it must run."""
    opts, nm = f.opts, f.nm
    if "maintenance" not in f.reached or nm is None:
        return None
    failed_record = replace(f.progress if f.progress is not None and f.progress.run == opts.run_id
                            else record.Record(run=opts.run_id, phase=f.phase, reached=tuple(f.reached)),
                            failure=truncate(f.error, 1000), failed_phase=f.phase, failed_run=opts.run_id)
    try:
        if opts.mode == operator.STANDALONE:
            f.nm, f.result["recorded"] = maintenance.update_status(
                client, nm, {"phase": "Failed", "lastError": truncate(f.error, 1000),
                             record.STATUS_FIELD: failed_record.wire()})
            if f.result["recorded"]:  # the same failure told again is not news
                f.recorder.record(f.nm, events.FAILED_MAINTENANCE, f"Failed a node maintenance: {truncate(f.error, 900)}")
        elif opts.mode == operator.OPERATOR:
            f.nm = record_store.write(client, nm, failed_record)
    except NmoError as exc:
        f.result["warnings"].append(f"the failure could not be recorded on NodeMaintenance "
                                    f"{nm['metadata']['name']}: {exc}")
    return None


def _failure_undo_decided(client: Client, f: Failing) -> Optional[Dict[str, Any]]:
    """Whether the steps done are undone: the policy's word, except that a slot taken in operator
    mode for a NodeMaintenance never made always goes, a standalone begin stopped before its
    NodeMaintenance left nothing of ours on the node, and a node deleted meanwhile keeps nothing."""
    opts = f.opts
    f.undo = not f.kept or (opts.mode == operator.OPERATOR and "maintenance" not in f.reached)
    if opts.mode == operator.STANDALONE and "maintenance" not in f.reached:
        f.undo = False  # begin stopped before the NodeMaintenance: nothing on the node is ours
    elif opts.mode == operator.STANDALONE and f.nm is not None and client.get_or_none(paths.node(opts.node)) is None:
        # The node was deleted mid-maintenance: there is nothing to keep out of service, and a
        # slot kept for it would hold the cluster-wide limit for nothing. Its leases go (no
        # node patch); the NodeMaintenance stays, Failed, until recover.yml ends it.
        f.undo = True
        f.result["node_deleted"] = True
    f.result["kept"] = f.kept and "maintenance" in f.reached and not f.result.get("node_deleted")
    f.result["changed"] = f.result["recorded"] or bool(f.recorder.recorded)
    return None


def _failure_run_stopped(client: Client, f: Failing) -> Optional[Dict[str, Any]]:
    """The run stops before the rollback frees this node's places: a node waiting for one must
    find the run stopped when it sees the place free, or it begins (docs/design.md §18.2)."""
    if f.opts.run_id and not client.dry_run:
        f.result["warnings"] += mark_stopped(client, f.opts, f.phase)
    return None


def _failure_rolled_back(client: Client, f: Failing) -> Optional[Dict[str, Any]]:
    """The rollback of the steps done, the NodeMaintenance kept as the record of what happened."""
    if not (f.undo and f.reached):
        return None
    undone = rollback(client, f.opts, f.reached, keep_record=True)
    result = f.result
    result.update({k: v for k, v in undone.items() if k not in ("state", "changed", "warnings", "events")})
    result["changed"] = result["changed"] or undone["changed"]
    result["rolled_back"] = True
    result["warnings"] += undone.get("warnings", [])
    result["events"] = undone.get("events", [])
    return None


# The failure of a maintenance that got past its first write, in order. A step returns the
# answer when it ends the failure path early (a maintenance another live run holds).
FAILURE_STEPS: Tuple[Callable[[Client, Failing], Optional[Dict[str, Any]]], ...] = (
    _failure_owner, _failure_recorded, _failure_undo_decided, _failure_run_stopped, _failure_rolled_back)


def failed_answer(client: Client, f: Failing) -> Dict[str, Any]:
    """The answer after the steps, with the failed node's last line: where the node stands, as
    read once now (or, unread, as far as this run knows), and what to run."""
    opts, result, nm = f.opts, f.result, f.nm
    result["events"] = f.recorder.recorded + result["events"]
    result["warnings"] += f.recorder.warnings
    result["maintenance"] = maintenance.summary(nm)
    report = None
    if f.reached and not client.dry_run:  # where the node stands now, read once: the operator's last line says it
        try:
            report = info.describe(client, node=opts.node, label_key=opts.label_key, events_limit=0)[0]
        except NmoError:
            report = None
    name = (nm or {}).get("metadata", {}).get("name")
    result["message"] = failure.message(opts.node, f.error, {
        **result, "reached": f.reached, "dry_run": client.dry_run, "maintenance": name,
        "warnings": [w for w in result["warnings"]
                     if w.startswith("the failure could not be recorded") or w in f.notes],
        "state": failure.node_state(report, client.server_now()) if report else
        failure.known_state(f.reached, name, opts.lease.duration)})
    return result


def mark_stopped(client: Client, opts: Options, phase: str) -> List[str]:
    """The run's record the rollout scheduler reads (model/rollout.py, docs/design.md §18.2),
    on the run lease every waiting node watches: the run stopped after this node (the first
    failure only). A kept node's own failure is in its progress record, written before this.
    Warnings when it cannot be written: the failure itself is recorded on the NodeMaintenance."""
    warnings: List[str] = []
    try:
        seen = lease_store.list_leases(client, opts.lease.namespace)
        run.mark_stopped(client, opts.run_id, opts.node, phase, opts.lease.namespace, seen)
    except NmoError as exc:
        warnings.append(f"the run's stop could not be recorded on its run lease ({exc}): nodes of this run "
                        "waiting for a place may wait until their lease timeout")
    return warnings


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def view(nm: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    if nm is None:
        return {}
    return {"name": nm["metadata"]["name"], "spec": nm.get("spec", {}), "status": nm.get("status", {})}
