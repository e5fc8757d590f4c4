"""Recover: end the maintenance of named nodes, or of every node this collection left behind.

What is "ours" is said with the lease module's own names (``leases.HOLDER``,
``leases.node_lease_name``, ``leases.SLOT_LABELS`` through the report's ``slot``, the slot
name's prefix checked by ``leases.slot_index``) and the node marks' (``marks.MAINTAINED_BY``,
``marks.LABEL_ADDED``); the end is the role's own (``lifecycle.end``), and a slot of another
prefix is released as ``nmo_lease state=released`` releases it (``disruption.release``).

Which nodes are ended, released, lifted from quarantine or left (and why) is one pure rule,
``model/recovery.choose``: without names, every maintenance of ours that no live run holds
(a Failed NodeMaintenance, a Pending or Running one of a run that is gone, our marks or
leases without one); named, the same whatever the phase, but never a node with nothing of
ours on it. Each node gets one line (``said``) saying what was done or why it was left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..api.client import Client
from ..errors import NmoError
from ..model import leases, recovery
from ..model.marks import EXCLUDE_FROM_REMEDIATION, QUARANTINED, SETTLE_SNAPSHOT
from . import disruption, ending_runs, info, lifecycle, waiting

Report = Dict[str, Any]
# what lifting a quarantine removes with the end's patch (model/marks.py's QUARANTINED)
LIFTED: Dict[str, Optional[str]] = {QUARANTINED: None}


@dataclass
class RecoverOptions:
    nodes: Optional[List[str]] = None  # None or empty: every node left behind
    slot_prefix: Optional[str] = None  # None: every slot a node holds, whatever its prefix
    label_key: str = EXCLUDE_FROM_REMEDIATION

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> RecoverOptions:
        # a comma-separated string reaches here split; blanks (a trailing comma) name nothing
        named = [name.strip() for name in params.get("nodes") or [] if isinstance(name, str) and name.strip()]
        return cls(nodes=named or None, slot_prefix=params.get("slot_prefix") or None,
                   label_key=params.get("label_key") or EXCLUDE_FROM_REMEDIATION)


def our_node_lease(report: Report, lease: Dict[str, Any]) -> bool:
    return lease["name"] == leases.node_lease_name(report["node"]) and lease["holder"] == leases.HOLDER


def our_slot(report: Report, lease: Dict[str, Any]) -> bool:
    return bool(lease.get("slot")) and lease["holder"] == report["node"]


def slot_prefix_of(name: str) -> Optional[str]:
    """The prefix a slot was named with (``leases.slot_name``: prefix-index)."""
    prefix = name.rpartition("-")[0]
    return prefix if prefix and leases.slot_index(name, prefix) is not None else None


def other_slots(report: Report, ended_prefix: str) -> List[Dict[str, str]]:
    """The node's slots of another prefix than the one its end released."""
    found = []
    for lease in report["leases"]:
        prefix = slot_prefix_of(lease["name"]) if our_slot(report, lease) else None
        if prefix and prefix != ended_prefix:
            found.append({"node": report["node"], "name": lease["name"], "prefix": prefix})
    return found


def still_held(report: Report) -> List[str]:
    return [f"{report['node']}: lease {lease['name']} (holder {lease['holder']})" for lease in report["leases"]
            if our_node_lease(report, lease) or our_slot(report, lease)]


def message(unknown: List[str], failed: List[Dict[str, str]], failed_slots: List[Dict[str, str]],
            left: List[str], others: List[str]) -> str:
    """What could not be recovered, in the words recover.yml has always used; '' when all was."""
    parts = []
    if unknown:
        parts.append(f"Unknown node name(s), not recovered: {', '.join(unknown)}. ")
    if failed:
        parts.append(f"Failed to end the maintenance of: {', '.join(f['node'] for f in failed)} "
                     f"({' | '.join(f['msg'] for f in failed)}). ")
    if failed_slots:
        parts.append(f"Could not release: {', '.join(f['name'] for f in failed_slots)} "
                     f"({' | '.join(f['msg'] for f in failed_slots)}). ")
    # what a node whose end failed still holds is held because of that failure, not of a prefix
    unended = {f["node"] for f in failed}
    kept = [text for text in left if text.split(":", 1)[0] in unended]
    other = [text for text in left if text not in kept]
    if other:
        parts.append(f"Still held: {'; '.join(other)} (a slot of another prefix: run again without "
                     "node_maintenance_slot_prefix). ")
    if kept:
        parts.append(f"Still held, their end having failed: {'; '.join(kept)}. ")
    if others and parts:
        parts.append(f"Held by someone else, left in place: {', '.join(others)}.")
    return "".join(parts).strip()


def end_one(client: Client, opts: RecoverOptions, choice: recovery.Choice, ended_prefix: str) -> Dict[str, Any]:
    """Carry out one node's choice: the end (lifting a quarantine in the same patch), or only
    the release of its NodeMaintenance and leases, the node left as it is."""
    lift = choice.action == recovery.LIFT
    end_opts = lifecycle.Options(node=choice.node, lease=disruption.Request(node=choice.node, slot_prefix=ended_prefix),
                                 label_key=opts.label_key,
                                 # the drain's settle snapshot goes with the end (a rolled-back or
                                 # failed drain left it; the settle that would read it never runs)
                                 annotations={SETTLE_SNAPSHOT: None, **(dict(LIFTED) if lift else {})},
                                 labels=dict(LIFTED) if lift else None)
    if choice.action == recovery.RELEASE:
        return lifecycle.rollback(client, end_opts, ["maintenance", "lease"], keep_record=False)
    return lifecycle.end(client, end_opts)


def recover(client: Client, opts: RecoverOptions) -> Dict[str, Any]:
    """End each chosen node's maintenance, release its slots of other prefixes, then (unless in
    a dry run) read what is left of ours on them."""
    # recover.yml run the moment a failed run ended (its last line says to): that run is gone,
    # not alive, once its heartbeat has deleted its run lease (workflows/ending_runs.py)
    ending_runs.settle(client)
    reports = info.describe(client, label_key=opts.label_key, events_limit=0, only=opts.nodes,
                            keep_labels=(QUARANTINED,))
    unknown = info.missing(opts.nodes, reports)
    named = opts.nodes is not None
    choices = [c for c in (recovery.choose(r, named) for r in reports if named or info.in_maintenance(r)) if c]
    acted = [c for c in choices if c.action != recovery.LEAVE]
    reports = [r for r in reports if r["node"] in {c.node for c in acted}]
    chosen = [c.node for c in acted]
    ended_prefix = opts.slot_prefix or leases.SLOT_PREFIX
    ends: Dict[str, Dict[str, Any]] = {}
    failed: List[Dict[str, str]] = []
    said: List[str] = []
    for choice in acted:
        try:
            ends[choice.node] = end_one(client, opts, choice, ended_prefix)
            said.append(recovery.said(choice, ends[choice.node], client.dry_run))
        except NmoError as exc:
            failed.append({"node": choice.node, "msg": exc.message})
    released: List[Dict[str, Any]] = []
    failed_slots: List[Dict[str, str]] = []
    if opts.slot_prefix is None:  # a prefix given says which slots to release: only those
        for slot in (s for r in reports for s in other_slots(r, ended_prefix)):
            try:
                done = disruption.release(client, disruption.Request(node=slot["node"], slot_prefix=slot["prefix"]))
                released.append({**slot, "changed": done["changed"]})
            except NmoError as exc:
                failed_slots.append({**slot, "msg": exc.message})
    # waiting taints of runs that are gone (docs/design.md §3.7), off the nodes named (or every node)
    try:
        untainted = waiting.clear(client, names=opts.nodes, dead_too=True)["untainted"]
    except NmoError as exc:
        untainted = []
        failed.append({"node": "(waiting taints)", "msg": exc.message})
    kept = [{"node": c.node, "why": c.why} for c in choices if c.action == recovery.LEAVE]
    said += [c.why + ("; the waiting taint of a run that is gone removed" if c.node in untainted else "")
             for c in choices if c.action == recovery.LEAVE]
    left: List[str] = []
    if not client.dry_run and chosen:
        left = [text for r in info.describe(client, label_key=opts.label_key, events_limit=0, only=chosen)
                for text in still_held(r)]
    others = [kept_lease["lease"] for result in ends.values() for kept_lease in result.get("not_released") or []]
    result: Dict[str, Any] = {
        "changed": (any(r.get("changed") for r in ends.values()) or any(s["changed"] for s in released)
                    or bool(untainted)),
        "waiting_untainted": untainted,
        "recovered": chosen, "unknown": unknown, "ended": ends, "failed_nodes": failed,
        "released_slots": released, "failed_slots": failed_slots, "left": left, "others": others,
        "kept": kept, "said": said,
        "warnings": [w for r in ends.values() for w in r.get("warnings") or []],
        "diff": [{**r["diff"], "before_header": node, "after_header": node}
                 for node, r in ends.items() if r.get("diff")]}
    problem = message(unknown, failed, failed_slots, left, others)
    if problem:
        result.update(failed=True, msg=problem)
    else:
        result["msg"] = f"recovered: {', '.join(chosen)}" if chosen else "nothing to recover"
    return result
