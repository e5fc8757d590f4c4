"""What recover.yml does with a node, decided once from the node's report (workflows/info.describe).

One rule for both ways of calling it, named (``-e nmo_nodes=...``) or not:

* ``leave``: a live run holds the node's NodeMaintenance (its run lease is being renewed: the
  plan rule's ``live_owner``, model/plan.py), or, without names, the node is quarantined or its
  NodeMaintenance names no run of this collection (made outside ``maintenance.yml``: a module
  call, ``kubectl``): each said with why and the command that does end it. Named, a node with no
  maintenance of ours at all (no NodeMaintenance, no ``nmo.maintenance/maintained-by`` mark, no
  lease of ours) is left as it is: a cordon or a taint on it is someone else's (an
  administrator's, or one the end of an earlier maintenance kept as it found it).
* ``lift``: named and quarantined (marks.QUARANTINED): the end of the maintenance the quarantine
  kept, and the quarantine's label and annotation with it.
* ``end``: the node carries the begin's marks (or was deleted): everything the begin did is
  undone as the end undoes it (a cordon or taint the node had before stays), the leases
  released, the NodeMaintenance removed.
* ``release``: a NodeMaintenance or leases of ours, and nothing of ours on the node (a begin that
  waited for a place and never cordoned, a maintenance that was ended but left its record): the
  NodeMaintenance removed and the leases released, the node not touched.

Without names, only nodes with something of ours are looked at; a named node that no live run
holds is ended whatever the phase of its NodeMaintenance. Pure: the caller reads the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

from . import leases
from .marks import LABEL_ADDED, MAINTAINED_BY, QUARANTINED

END, RELEASE, LIFT, LEAVE = "end", "release", "lift", "leave"
ACTIONS = (END, RELEASE, LIFT, LEAVE)
NOT_OURS = "no maintenance of nmo.maintenance, left as it is"

Report = Dict[str, Any]


@dataclass(frozen=True)
class Choice:
    node: str
    action: str
    why: str  # why this action, said to the operator (the whole line for ``leave``)


def marked(report: Report) -> bool:
    """The begin's marks on the node: it cordoned and tainted it."""
    notes = report.get("annotations") or {}
    return MAINTAINED_BY in notes or LABEL_ADDED in notes


def quarantine(report: Report) -> Optional[str]:
    """What blocked the quarantined node (the annotation's value), None when it is not quarantined."""
    notes = report.get("annotations") or {}
    if (report.get("labels") or {}).get(QUARANTINED) == "true" or QUARANTINED in notes:
        return notes.get(QUARANTINED) or "no blocker recorded"
    return None


def our_leases(report: Report) -> bool:
    """Our node lease, or a lease the node holds (a maintenance slot)."""
    return any((lease["name"] == leases.node_lease_name(report["node"]) and lease["holder"] == leases.HOLDER)
               or lease["holder"] == report["node"] for lease in report.get("leases") or [])


def _record(report: Report) -> str:
    nm = report["maintenance"]
    return f"NodeMaintenance {nm['name']} ({nm.get('phase') or 'no phase'})"


def _recover(node: str) -> str:
    return f"playbooks/recover.yml -e nmo_nodes={node}"


def choose(report: Report, named: bool) -> Optional[Choice]:
    """What recover does with the node; None when, without names, nothing of it is ours."""
    node = report["node"]
    run = report.get("run") or {}
    nm = report.get("maintenance")
    if nm and run.get("alive") and run.get("id") and not named:
        return Choice(node, LEAVE, f"{node}: in maintenance by run {run['id']}, which is alive (its run lease is "
                                   "being renewed): left to that run")
    if report.get("node_deleted"):
        return Choice(node, END, "deleted from the cluster") if nm or named else None
    blocker = quarantine(report)
    if blocker is not None:
        if named:
            return Choice(node, LIFT, blocker)
        return Choice(node, LEAVE, f"{node}: quarantined ({blocker}): left out of service; {_recover(node)} "
                                   "lifts the quarantine")
    if nm:
        if not run.get("id"):
            if not named:
                return Choice(node, LEAVE, f"{node}: its {_record(report)} names no run of this collection (made "
                                           f"outside maintenance.yml): left; {_recover(node)} ends it")
            why = f"its {_record(report)} names no run"
        else:
            why = f"its {_record(report)} is of run {run['id']}, which is gone"
        return Choice(node, END if marked(report) else RELEASE, why)
    if marked(report):
        return Choice(node, END, "our marks without a NodeMaintenance")
    if our_leases(report):
        return Choice(node, RELEASE, "our leases without a NodeMaintenance")
    if named:
        cordon = " (its cordon is not ours)" if report.get("unschedulable") else ""
        return Choice(node, LEAVE, f"{node}: {NOT_OURS}{cordon}")
    return None


def said(choice: Choice, ended: Dict[str, Any], dry_run: bool = False) -> str:
    """The line for a node recover acted on, from its end's result (``lifecycle.end``)."""
    node = choice.node
    would = "would be " if dry_run else ""
    kept = "; ".join(ended.get("left_as_found") or [])
    if choice.action == LIFT:
        return f"{node}: quarantine {would}lifted ({choice.why}); {kept or would + 'uncordoned'}"
    if choice.action == RELEASE:
        return (f"{node}: NodeMaintenance and leases {would}released ({choice.why}); nothing on the node was ours: "
                "left as it is")
    return f"{node}: maintenance {would}ended ({choice.why})" + (f"; {kept}" if kept else "")
