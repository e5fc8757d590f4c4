"""A failed node that its drain could not empty: skipped, quarantined, or failed (docs/design.md §18.4).

The verdict is model/blocked.py's, over the count of this run's blocked nodes as its run lease
holds it (``BLOCKED``), or its rollout's lease when the run is one of several of a rollout
(model/rollout_record.py). The count is taken in the same guarded write that says the node is
blocked: two nodes blocked at once cannot both be the last one the bound lets through. A
verdict of ``fail`` (not a block, the policy is ``stop``, the bound is passed, or the count
cannot be written) goes down the failure path (lifecycle.failed), which stops the rollout.

* skip: the rollback of the begin's steps, by the end's code, with the NodeMaintenance
  deleted: the node is back in service as it was found (an administrator's cordon stays).
* quarantine: the leases released and the NodeMaintenance deleted, the node left cordoned and
  tainted with the quarantine's label and an annotation naming the blocker (marks.QUARANTINED);
  ``recover.yml -e nmo_nodes=<node>`` lifts it.

Neither marks the run stopped: the rollout goes on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..errors import Conflict, NmoError, NotFound, UnprocessableEntity
from ..model import blocked as rule
from ..model import failure, record, rollout_record
from ..model.failure import recover_command
from ..model.marks import QUARANTINED, quarantine_wanted
from ..stores import events, maintenance, nodes
from ..stores import leases as lease_store
from ..stores import record as record_store
from . import disruption, lifecycle, operator, run

ATTEMPTS = 10  # the run lease is renewed every few seconds: a guarded write is tried again on a conflict
MAX_BLOCKER = 500  # characters of the blocker kept in the annotation


def failed(client: Client, opts: lifecycle.Options, error: str, reached: Optional[List[str]], policy: str,
           given_phase: Optional[str], on_blocked: str, max_blocked: int, blocker: str) -> Dict[str, Any]:
    """The failed node's call: skip or quarantine a blocked node within the bound, or the failure path.

    ``given_phase`` omitted (the role's call), the node's progress record says it (docs/design.md
    §18.5); the failure path reads the record again itself, and says when it cannot."""
    rule.validate(on_blocked, max_blocked)
    phase, progress = (given_phase, None) if given_phase else recorded_phase(client, opts)
    verdict = rule.decide(on_blocked, phase, blocker, 0, max_blocked)
    if verdict.action != rule.FAIL and (client.dry_run or not opts.run_id):
        verdict = rule.Verdict(rule.FAIL, True, "its drain is blocked; a node is not skipped or quarantined in a "
                                                "dry run or without a run", blocker)
    warning = ""
    if verdict.action != rule.FAIL:
        try:
            verdict = counted(client, opts, on_blocked, phase, blocker, max_blocked)
        except NmoError as exc:
            warning = f"the blocked node could not be counted on the run lease ({exc}): it fails as any node"
            verdict = rule.Verdict(rule.FAIL, True, "its drain is blocked and it could not be counted", blocker)
    if verdict.action == rule.FAIL:
        # the reason first: lastError keeps 1000 characters, and a drain's error can be long
        said = f"{verdict.why}. {error}" if verdict.block and on_blocked != rule.STOP else error
        result = lifecycle.failed(client, opts, said, reached, policy=policy, phase=given_phase)
        result["blocked"] = {"action": rule.FAIL, "why": verdict.why, "blocker": blocker} if verdict.block else {}
        result["warnings"] = list(result.get("warnings") or []) + ([warning] if warning else [])
        return result
    done = skip(client, opts, reached or []) if verdict.action == rule.SKIP else quarantine(client, opts, blocker)
    done.update(state="failed", phase=phase, policy=policy, kept=verdict.action == rule.QUARANTINE,
                rolled_back=verdict.action == rule.SKIP, recorded=False, left_to=None,
                blocked={"action": verdict.action, "why": verdict.why, "blocker": blocker},
                outcome=rule.outcome(verdict), message=line(opts.node, verdict, done),
                recorded_requests=lifecycle.recorded_requests(progress, opts.run_id),
                waited=lifecycle.recorded_wait(progress, opts.run_id))
    return done


def recorded_phase(client: Client, opts: lifecycle.Options) -> Tuple[str, Optional[record.Record]]:
    """The phase this run's record of the node says it reached, and the record; unreadable or
    another run's, the failure policy's default (never a block: only the drain phase can be one)."""
    try:
        _nm, progress = record_store.read(client, opts.node)
    except NmoError:
        progress = None
    return failure.phase_of(progress if progress is not None and progress.run == opts.run_id else None)[0], progress


def counted(client: Client, opts: lifecycle.Options, on_blocked: str, phase: str, blocker: str,
            bound: int) -> rule.Verdict:
    """The verdict over the run's count, and the node added to it in the same guarded write
    (a JSON Patch testing the run lease's resourceVersion), tried again on a conflict."""
    for _attempt in range(ATTEMPTS):
        # the rollout's count: across the runs of a rollout of several (model/rollout_record.py)
        lease = run.record_lease(client, opts.run_id, opts.lease.namespace)
        if lease is None:
            raise NotFound(f"the run lease of run {opts.run_id} is gone")
        meta = lease["metadata"]
        noted = (meta.get("annotations") or {}).get(rule.BLOCKED)
        before = [n for n in rule.parse(noted) if n != opts.node]
        name = meta.get("name", "")
        scope = (f"rollout {name[len(rollout_record.LEASE_PREFIX):]}" if name.startswith(rollout_record.LEASE_PREFIX)
                 else "this run")
        verdict = rule.decide(on_blocked, phase, blocker, len(before), bound, scope)
        if verdict.action == rule.FAIL:
            return verdict
        if write_count(client, meta, rule.added(noted, opts.node)):
            return verdict
    raise Conflict(f"the run lease of run {opts.run_id} kept changing under {ATTEMPTS} attempts")


def write_count(client: Client, meta: Dict[str, Any], value: str) -> bool:
    ops: List[Dict[str, Any]] = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]}]
    if meta.get("annotations") is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append({"op": "add", "path": "/metadata/annotations/" + rule.BLOCKED.replace("/", "~1"), "value": value})
    try:
        client.patch(lease_store.leases_path(meta["namespace"], meta["name"]), ops, "json")
    except (Conflict, UnprocessableEntity):
        return False
    return True


def _found(client: Client, opts: lifecycle.Options) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    nm = maintenance.locate(client, opts.node, opts.name)
    return nm, (nm["metadata"]["name"] if nm else None)


def skip(client: Client, opts: lifecycle.Options, reached: List[str]) -> Dict[str, Any]:
    """Back in service as it was found: the end's undo of the begin's steps, the NodeMaintenance deleted."""
    return lifecycle.rollback(client, opts, reached or list(lifecycle.BEGIN_STEPS), keep_record=False)


def _mark_quarantined(client: Client, node: str, said: str) -> None:
    """The quarantine's label and annotation (the blocker) on the node. A node deleted meanwhile
    has nothing to keep out of service; its leases and NodeMaintenance still go."""
    try:
        client.patch(paths.node(node), {"metadata": {"labels": {QUARANTINED: "true"},
                                                     "annotations": {QUARANTINED: said}}}, "merge")
    except NotFound:
        pass


def quarantine(client: Client, opts: lifecycle.Options, blocker: str) -> Dict[str, Any]:
    """Cordoned and tainted as the begin left it, with the quarantine's label and annotation;
    its leases and the NodeMaintenance released, so its places go to the next nodes."""
    if opts.mode == operator.OPERATOR:
        return quarantine_with_operator(client, opts, blocker)
    recorder = events.EventRecorder(client)
    nm, name = _found(client, opts)
    lifecycle.refuse_if_live_run(client, nm, opts.run_id, opts.node)
    said = lifecycle.truncate(blocker, MAX_BLOCKER)
    _mark_quarantined(client, opts.node, said)
    released = disruption.release(client, replace(opts.lease, node=opts.node, maintenance=name, run_id=opts.run_id),
                                  nm=nm)
    deleted = lifecycle.remove_maintenance(client, recorder, nm)
    return {"node": opts.node, "run": opts.run_id, "changed": True, "maintenance": maintenance.summary(nm),
            "deleted": deleted, "released": released["released"], "not_released": released["not_released"],
            "quarantined": {"label": QUARANTINED, "blocker": said}, "events": recorder.recorded,
            "warnings": released.get("warnings", []) + recorder.warnings,
            "diff": {"before": {"labels": {}, **released["diff"]["before"]},
                     "after": {"labels": {QUARANTINED: "true"}, **released["diff"]["after"]}}}


def quarantine_with_operator(client: Client, opts: lifecycle.Options, blocker: str) -> Dict[str, Any]:
    """Operator mode: NMO uncordons, untaints and unlabels the node when its NodeMaintenance is
    deleted (before it drops its finalizer), so the cordon cannot be kept through the delete.
    The quarantine's label and annotation first (NMO leaves them), then the NodeMaintenance
    deleted and waited out, then the node cordoned and tainted again as ours, with our record
    (marks.quarantine_wanted: as a standalone quarantine leaves it, so recover.yml lifts it
    alike), then the slot released. Between NMO's uncordon and ours, a pod may be scheduled
    onto the node: NMO gives no way to keep its cordon past its NodeMaintenance."""
    recorder = events.EventRecorder(client)
    nm, name = _found(client, opts)
    lifecycle.refuse_if_live_run(client, nm, opts.run_id, opts.node)
    said = lifecycle.truncate(blocker, MAX_BLOCKER)
    _mark_quarantined(client, opts.node, said)
    deleted = lifecycle.remove_maintenance(client, recorder, nm)  # NMO has let the node go once it is gone
    node = client.get_or_none(paths.node(opts.node))
    before, after = {}, {}
    if node is not None:
        done = nodes.apply(client, opts.node, lambda n: quarantine_wanted(n, opts.label_key, opts.run_id, said),
                           node=node)
        before, after = done.before, done.after
    released = disruption.release(client, replace(opts.lease, node=opts.node, maintenance=None, run_id=opts.run_id,
                                                  operator=True), nm=None)
    return {"node": opts.node, "run": opts.run_id, "changed": True, "mode": operator.OPERATOR,
            "maintenance": maintenance.summary(nm), "deleted": deleted, "released": released["released"],
            "not_released": released["not_released"], "quarantined": {"label": QUARANTINED, "blocker": said},
            "events": recorder.recorded, "warnings": released.get("warnings", []) + recorder.warnings,
            "diff": {"before": {"node": before, **released["diff"]["before"]},
                     "after": {"node": after, **released["diff"]["after"]}}}


def line(node: str, verdict: rule.Verdict, done: Dict[str, Any]) -> str:
    """The blocked node's last line."""
    head = f"node {node} could not be drained ({verdict.blocker})."
    if verdict.action == rule.SKIP:
        found = done.get("left_as_found") or []
        back = "; ".join(found) if found else "it is back in service"
        return (f"{head} Skipped: its maintenance is ended and {back}; {verdict.why}. "
                f"Run again with -l {node} once what blocks it is gone.")
    return (f"{head} Quarantined: kept cordoned with the label {QUARANTINED}=true and the blocker in its "
            f"annotation, its leases and NodeMaintenance released; {verdict.why}. "
            f"{recover_command(node)} lifts the quarantine.")
