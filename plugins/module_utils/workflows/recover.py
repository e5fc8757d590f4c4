"""Recover: end the maintenance of named nodes, or of every node this collection left behind.

What is "ours" is said with the lease module's own names (``leases.HOLDER``,
``leases.node_lease_name``, ``leases.SLOT_LABELS`` through the report's ``slot``, the slot
name's prefix checked by ``leases.slot_index``) and the node marks' (``marks.MAINTAINED_BY``,
``marks.LABEL_ADDED``); the end is the role's own (``lifecycle.end``), and a slot of another
prefix is released as ``nmo_lease state=released`` releases it (``disruption.release``).

A node is left behind when it has no NodeMaintenance (one would mean a run is under way) and
carries a mark of ours, our node lease or a lease it holds (a slot); or when it was deleted
and its NodeMaintenance is held by no live run. A named node is recovered whatever its state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ..api.client import Client
from ..errors import NmoError
from ..model import leases
from ..model.marks import EXCLUDE_FROM_REMEDIATION, LABEL_ADDED, MAINTAINED_BY
from ..model.settle import ANNOTATION as SETTLE_SNAPSHOT
from . import disruption, info, lifecycle, waiting

Report = Dict[str, Any]


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


def left_behind(report: Report) -> bool:
    if report.get("node_deleted") and not (report.get("run") or {}).get("alive"):
        return True
    if report["maintenance"]:
        return False
    marked = MAINTAINED_BY in report["annotations"] or LABEL_ADDED in report["annotations"]
    return marked or any(our_node_lease(report, lease) or lease["holder"] == report["node"]
                         for lease in report["leases"])


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
    if left:
        parts.append(f"Still held: {'; '.join(left)} (a slot of another prefix: run again without "
                     "node_maintenance_slot_prefix). ")
    if others and parts:
        parts.append(f"Held by someone else, left in place: {', '.join(others)}.")
    return "".join(parts).strip()


def recover(client: Client, opts: RecoverOptions) -> Dict[str, Any]:
    """End each chosen node's maintenance, release its slots of other prefixes, then (unless in
    a dry run) read what is left of ours on them."""
    reports = info.describe(client, label_key=opts.label_key, events_limit=0, only=opts.nodes)
    unknown = info.missing(opts.nodes, reports)
    if opts.nodes is None:
        reports = [r for r in reports if info.in_maintenance(r) and left_behind(r)]
    chosen = [r["node"] for r in reports]
    ended_prefix = opts.slot_prefix or leases.SLOT_PREFIX
    ends: Dict[str, Dict[str, Any]] = {}
    failed: List[Dict[str, str]] = []
    for node in chosen:
        end_opts = lifecycle.Options(node=node, lease=disruption.Request(node=node, slot_prefix=ended_prefix),
                                     label_key=opts.label_key, annotations={SETTLE_SNAPSHOT: None})
        try:
            ends[node] = lifecycle.end(client, end_opts)
        except NmoError as exc:
            failed.append({"node": node, "msg": exc.message})
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
    left: List[str] = []
    if not client.dry_run and chosen:
        left = [text for r in info.describe(client, label_key=opts.label_key, events_limit=0, only=chosen)
                for text in still_held(r)]
    others = [kept["lease"] for result in ends.values() for kept in result.get("not_released") or []]
    result: Dict[str, Any] = {
        "changed": (any(r.get("changed") for r in ends.values()) or any(s["changed"] for s in released)
                    or bool(untainted)),
        "waiting_untainted": untainted,
        "recovered": chosen, "unknown": unknown, "ended": ends, "failed_nodes": failed,
        "released_slots": released, "failed_slots": failed_slots, "left": left, "others": others,
        "warnings": [w for r in ends.values() for w in r.get("warnings") or []],
        "diff": [{**r["diff"], "before_header": node, "after_header": node}
                 for node, r in ends.items() if r.get("diff")]}
    problem = message(unknown, failed, failed_slots, left, others)
    if problem:
        result.update(failed=True, msg=problem)
    else:
        result["msg"] = f"recovered: {', '.join(chosen)}" if chosen else "nothing to recover"
    return result
