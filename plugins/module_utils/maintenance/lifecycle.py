"""The two ends of a node's maintenance, each as one call.

``begin`` is design steps 1 to 6 in order: the NodeMaintenance (phase Pending), the leases
behind the etcd guard, the maintenance taints, then cordon and the exclude-from-remediation
label. ``end`` is step 9 in NMO's order: uncordon and unlabel first (so the control plane's
own ``node.kubernetes.io/unschedulable`` taint does not come back), the taints, the leases,
and last the NodeMaintenance that said who did all this.

Both stop at the first error. The error then carries ``reached``, the steps that were done,
so that whoever rolls back undoes exactly those and leaves alone what was not ours.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Tuple

from .. import validation
from ..api.client import Client
from ..errors import Conflict, InputError, NmoError, RefusedError
from ..guards import disruption, run
from ..node.marks import EXCLUDE_FROM_REMEDIATION, cordon_ops, end_marks, is_ready, mark, marking, ours_to_unlabel
from ..node.taints import MAINTENANCE_TAINTS, apply_taints, node_path, read_node
from . import crd, events, operator
from . import record as maintenance

BEGIN_STEPS = ("maintenance", "lease", "taints", "cordon")
END_STEPS = ("uncordon", "taints", "lease", "maintenance")
LEASE_FIELDS = ("slot", "lease", "expires", "waited", "etcd", "holders", "acquired", "would_wait", "blocked")


@dataclass
class Options:
    node: str
    lease: disruption.Request
    name: Optional[str] = None
    reason: str = ""
    install_crd: bool = False
    label_key: str = EXCLUDE_FROM_REMEDIATION
    annotations: Optional[Dict[str, Optional[str]]] = None
    end_events: List[Dict[str, Any]] = field(default_factory=list)
    run_id: str = ""
    mode: str = operator.STANDALONE  # operator: NMO does the node's work (operator.py)

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


# -- steps shared with the single-purpose modules ------------------------------------------------
def ensure_maintenance(client: Client, recorder: events.EventRecorder, node: str, reason: str,
                       name: Optional[str], check_mode: bool, run_id: str = "",
                       with_operator: bool = False) -> Dict[str, Any]:
    """The node's NodeMaintenance, created with a BeginMaintenance event when missing.

    An existing one is adopted for ``run_id`` only when the run that held it is gone (or it
    names no run: made by hand, or before runs had ids); one held by a live run is refused
    with OwnedByLiveRun, before anything is written.
    """
    before = maintenance.find(client, node)
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
    nm, created = maintenance.ensure(client, node, reason, name, check_mode, run_id, with_operator)
    if created and not with_operator:  # NMO records its own BeginMaintenance
        recorder.record(nm, events.BEGIN_MAINTENANCE)
    elif adopted_from is not None:
        try:
            nm = maintenance.adopt(client, nm, run_id, owner, check_mode)
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


def remove_maintenance(client: Client, recorder: events.EventRecorder, nm: Optional[Dict[str, Any]],
                       check_mode: bool) -> bool:
    """Delete it (RemovedMaintenance event); False when there was nothing to delete."""
    if nm is None:
        return False
    deleted = maintenance.delete(client, nm, check_mode)
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
                node = read_node(client, node_name)
                node.setdefault("apiVersion", "v1")
                node.setdefault("kind", "Node")
            target = node
        recorder.record(target, spec["reason"], spec.get("text"), spec.get("type"))


def cordon(client: Client, recorder: events.EventRecorder, name: str, unschedulable: bool, label_key: str,
           label: bool, check_mode: bool, maintenance_name: Optional[str] = None,
           annotations: Optional[Dict[str, Optional[str]]] = None,
           node: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Cordon (with a Cordon event on the NodeMaintenance) or uncordon (UncordonNode on the Node).

    Uncordoning removes the label only when it is ours to remove (``ours_to_unlabel``), and
    forgets the marks the begin recorded.
    """
    label_to = unschedulable if label else None
    if not unschedulable and label:
        node = node or read_node(client, name)
        if not ours_to_unlabel(node):
            label_to = None
        annotations = {**end_marks(), **(annotations or {})}
    before, after, node, changed = mark(client, name, unschedulable, label_key, label_to, check_mode, node=node,
                                        annotations=annotations)
    if changed and before != after:  # an annotation alone is not worth an event
        if unschedulable and maintenance_name:
            nm = maintenance.get(client, maintenance_name)
            if nm:
                recorder.record(nm, events.CORDON, f"Cordoned node {name}")
        elif not unschedulable:
            node.setdefault("apiVersion", "v1")
            node.setdefault("kind", "Node")
            recorder.record(node, events.UNCORDON_NODE)
    return {"before": before, "after": after, "node": node, "changed": changed}


# -- the two calls ---------------------------------------------------------------------------------
def begin(client: Client, opts: Options, check_mode: bool = False) -> Dict[str, Any]:
    opts.validate()
    if opts.mode == operator.OPERATOR:
        return begin_with_operator(client, opts, check_mode)
    recorder = events.EventRecorder(client, check_mode)
    progress = Progress()
    guard = run.NoGuard() if check_mode else run.guard_for(client, opts.run_id)
    result: Dict[str, Any] = {"node": opts.node, "state": "present", "run": opts.run_id}
    changed = False
    try:
        guard.check(force=True)  # no write for a run that is gone
        if opts.install_crd:
            result["crd"] = crd.ensure(client, check_mode)
            changed = result["crd"]["changed"]
        made = ensure_maintenance(client, recorder, opts.node, opts.reason, opts.name, check_mode, opts.run_id)
        nm = made["nm"]
        name = nm["metadata"]["name"]
        result.update(created=made["created"], maintenance=maintenance.summary(nm), adopted_from=made["adopted_from"])
        progress.done("maintenance")

        # a NodeMaintenance that only check mode imagined cannot be named to the guard
        lease = disruption.acquire(client, replace(opts.lease, node=opts.node, run_id=opts.run_id,
                                                   maintenance=None if check_mode and made["created"] else name),
                                   check_mode)
        progress.done("lease")
        guard.check()  # the lease wait may have lasted long: is the run still there?

        # taints, cordon and label in one guarded JSON Patch: the node lifecycle controller
        # strips node.kubernetes.io/unschedulable from a node that is not (yet) cordoned
        seen: Dict[str, Any] = {}

        def cordon_too(node: Dict[str, Any]) -> List[Dict[str, Any]]:
            seen.setdefault("before", marking(node, opts.label_key))
            return cordon_ops(node, opts.label_key, opts.run_id)

        taints_before, taints_after, node, tainted = apply_taints(client, opts.node, MAINTENANCE_TAINTS, True,
                                                                  check_mode, also=cordon_too)
        progress.done("taints")
        cordoned = {"before": seen["before"], "after": {"unschedulable": True, "label": True}, "node": node}
        cordoned["changed"] = cordoned["before"] != cordoned["after"]
        if cordoned["changed"]:
            recorder.record(nm, events.CORDON, f"Cordoned node {opts.node}")
        progress.done("cordon")
    except NmoError as exc:
        raise progress.fail(exc) from None
    result.update(
        changed=changed or made["created"] or bool(made["adopted_from"]) or lease["changed"] or tainted
        or cordoned["changed"],
        reached=progress.reached,
        lease={k: lease.get(k) for k in LEASE_FIELDS if k in lease},
        waited=lease.get("waited", 0.0),
        taints=taints_after, cordon=cordoned["after"], ready=is_ready(cordoned["node"]),
        events=recorder.recorded, warnings=lease.get("warnings", []) + recorder.warnings,
        diff={"before": {"maintenance": view(made["before"]), **lease["diff"]["before"], "taints": taints_before,
                         **cordoned["before"]},
              "after": {"maintenance": view(nm), **lease["diff"]["after"], "taints": taints_after,
                        **cordoned["after"]}})
    return result


def begin_with_operator(client: Client, opts: Options, check_mode: bool = False) -> Dict[str, Any]:
    """Operator mode: the slot (and the etcd guard) first, since NMO starts on a new
    NodeMaintenance at once, then the NodeMaintenance, with no status of ours. NMO takes the
    node lease, the label, the taints and cordon, and drains."""
    recorder = events.EventRecorder(client, check_mode)
    progress = Progress()
    guard = run.NoGuard() if check_mode else run.guard_for(client, opts.run_id)
    result: Dict[str, Any] = {"node": opts.node, "state": "present", "run": opts.run_id, "mode": operator.OPERATOR}
    try:
        guard.check(force=True)
        existing = maintenance.find(client, opts.node)
        if existing is not None:
            state, owner = refuse_if_live_run(client, existing, opts.run_id, opts.node)
            if state == run.NONE and not maintenance.terminating(existing):
                raise run.OwnedByLiveRun(
                    f"node {opts.node} has a NodeMaintenance ({existing['metadata']['name']}) that this collection did "
                    "not make: the Node Maintenance Operator maintains it for someone else; it is left to them",
                    owner_run="", maintenance=existing["metadata"]["name"])
        lease = disruption.acquire(client, replace(opts.lease, node=opts.node, run_id=opts.run_id, operator=True,
                                                   maintenance=existing["metadata"]["name"] if existing else None),
                                   check_mode)
        progress.done("lease")
        guard.check()
        made = ensure_maintenance(client, recorder, opts.node, opts.reason, opts.name, check_mode, opts.run_id,
                                  with_operator=True)
        progress.done("maintenance")
    except NmoError as exc:
        raise progress.fail(exc) from None
    nm = made["nm"]
    result.update(
        changed=made["created"] or bool(made["adopted_from"]) or lease["changed"], reached=progress.reached,
        created=made["created"], adopted_from=made["adopted_from"], maintenance=maintenance.summary(nm),
        lease={k: lease.get(k) for k in LEASE_FIELDS if k in lease}, waited=lease.get("waited", 0.0),
        events=recorder.recorded, warnings=lease.get("warnings", []),
        diff={"before": {"maintenance": view(made["before"]), **lease["diff"]["before"]},
              "after": {"maintenance": view(nm), **lease["diff"]["after"]}})
    return result


def end_with_operator(client: Client, opts: Options, check_mode: bool = False) -> Dict[str, Any]:
    """Operator mode: delete the NodeMaintenance and wait until NMO has let the node go (its
    finalizer), then release the slot. NMO uncordons, untaints, unlabels, releases its lease."""
    recorder = events.EventRecorder(client, check_mode)
    progress = Progress()
    result: Dict[str, Any] = {"node": opts.node, "state": "absent", "run": opts.run_id, "mode": operator.OPERATOR}
    try:
        nm = maintenance.get(client, opts.name) if opts.name else maintenance.find(client, opts.node)
        refuse_if_live_run(client, nm, opts.run_id, opts.node)
        run.NoGuard().check()
        deleted = maintenance.delete(client, nm, check_mode) if nm is not None else False
        progress.done("maintenance")
        released = disruption.release(client, replace(opts.lease, node=opts.node, run_id=opts.run_id, operator=True,
                                                      maintenance=None), check_mode)
        progress.done("lease")
        node = client.get_or_none(node_path(opts.node)) or {}  # a node deleted meanwhile has nothing left to end
        if opts.annotations and node:  # the campaign's done mark: ours to write, not NMO's
            node = mark(client, opts.node, None, opts.label_key, None, check_mode, node=node,
                        annotations=opts.annotations)[2]
    except NmoError as exc:
        raise progress.fail(exc) from None
    warnings = list(released.get("warnings", []))
    taints = node.get("spec", {}).get("taints") or []
    if not check_mode and (node.get("spec", {}).get("unschedulable") or any(
            t.get("key") == "medik8s.io/drain" for t in taints)):
        warnings.append(f"node {opts.node} is still cordoned or tainted after the Node Maintenance Operator let go")
    result.update(changed=deleted or released["changed"], reached=progress.reached, deleted=deleted,
                  maintenance=maintenance.summary(nm), released=released["released"],
                  not_released=released["not_released"], taints=taints,
                  cordon=marking(node, opts.label_key), ready=is_ready(node), events=recorder.recorded,
                  warnings=warnings,
                  diff={"before": {"maintenance": view(nm), **released["diff"]["before"]},
                        "after": {"maintenance": {}, **released["diff"]["after"]}})
    return result


def end(client: Client, opts: Options, check_mode: bool = False) -> Dict[str, Any]:
    opts.validate()
    if opts.mode == operator.OPERATOR:
        return end_with_operator(client, opts, check_mode)
    recorder = events.EventRecorder(client, check_mode)
    progress = Progress()
    result: Dict[str, Any] = {"node": opts.node, "state": "absent", "run": opts.run_id}
    try:
        nm = maintenance.get(client, opts.name) if opts.name else maintenance.find(client, opts.node)
        name = nm["metadata"]["name"] if nm else None
        refuse_if_live_run(client, nm, opts.run_id, opts.node)
        run.NoGuard().check()  # never a write from a task whose controller died
        uncordoned = cordon(client, recorder, opts.node, False, opts.label_key, True, check_mode,
                            annotations=opts.annotations)
        progress.done("uncordon")

        taints_before, taints_after, node, untainted = apply_taints(client, opts.node, MAINTENANCE_TAINTS, False,
                                                                    check_mode, node=uncordoned["node"])
        progress.done("taints")

        released = disruption.release(client, replace(opts.lease, node=opts.node, maintenance=name,
                                                      run_id=opts.run_id), check_mode)
        progress.done("lease")

        if nm is not None:
            record_on(client, recorder, nm, opts.end_events, opts.node)
        deleted = remove_maintenance(client, recorder, nm, check_mode)
        progress.done("maintenance")
    except NmoError as exc:
        raise progress.fail(exc) from None
    result.update(
        changed=uncordoned["changed"] or untainted or released["changed"] or deleted,
        reached=progress.reached, maintenance=maintenance.summary(nm), deleted=deleted,
        released=released["released"], not_released=released["not_released"],
        taints=taints_after, cordon=uncordoned["after"], ready=is_ready(node),
        events=recorder.recorded, warnings=released.get("warnings", []) + recorder.warnings,
        diff={"before": {"maintenance": view(nm), **released["diff"]["before"], "taints": taints_before,
                         **uncordoned["before"]},
              "after": {"maintenance": {}, **released["diff"]["after"], "taints": taints_after,
                        **uncordoned["after"]}})
    return result


def view(nm: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    if nm is None:
        return {}
    return {"name": nm["metadata"]["name"], "spec": nm.get("spec", {}), "status": nm.get("status", {})}
