"""Read and write a node's progress record (model/record.py) where the cluster keeps it.

Standalone: ``status.progress`` of the node's NodeMaintenance, through the status subresource
(one merge patch, none when nothing changed). Operator mode: NMO owns that status, so the same
fields go, as JSON, in an annotation of the NodeMaintenance (a merge patch of its metadata).
Which of the two is told by the NodeMaintenance itself (its ``nmo.maintenance/mode``
annotation, written when it was made), so no caller carries the mode. No NodeMaintenance, no
record: a node whose begin wrote nothing has nothing to say.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from ..api.client import Client
from ..errors import NotFound, UnprocessableEntity
from ..model import record as model
from ..model.record import Record
from . import maintenance


def operated(nm: Dict[str, Any]) -> bool:
    """Whether NMO works on this NodeMaintenance (operator mode): its status is not ours."""
    return ((nm.get("metadata") or {}).get("annotations") or {}).get(maintenance.MODE_ANNOTATION) == "operator"


def of(nm: Optional[Dict[str, Any]]) -> Optional[Record]:
    return model.of_maintenance(nm, operated(nm)) if nm else None


def read(client: Client, node: str, nm: Optional[Dict[str, Any]] = None,
         name: Optional[str] = None) -> Tuple[Optional[Dict[str, Any]], Optional[Record]]:
    """The node's NodeMaintenance (``nm`` when the caller read it already; else by its name,
    ``name`` or the default one, and the list only when that misses) and its record."""
    nm = nm if nm is not None else maintenance.locate(client, node, name)
    return nm, of(nm)


def write(client: Client, nm: Dict[str, Any], record: Record) -> Dict[str, Any]:
    """Keep ``record`` on ``nm``; the object as written (``nm`` itself when nothing changed)."""
    if of(nm) == record:
        return nm
    if not operated(nm):
        return maintenance.update_status(client, nm, {model.STATUS_FIELD: record.wire()})[0]
    body = {"metadata": {"annotations": {model.ANNOTATION: model.annotation(record)}}}
    if client.dry_run:
        meta = dict(nm.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **body["metadata"]["annotations"]}
        return {**nm, "metadata": meta}
    return client.patch(maintenance.path(nm["metadata"]["name"]), body, "merge")


def phase_only(client: Client, node: str, phase: str, run_id: str,
               name: Optional[str] = None) -> Tuple[Optional[Dict[str, Any]], Optional[Record]]:
    """The phase written in one request, unread (model/record.py ``phase_patch``): the object
    as written and its record, or (None, None) when the server refused the patch's tests or
    has no object of that name (then the caller reads and writes)."""
    if client.dry_run or not run_id:
        return None, None
    try:
        nm = client.patch(maintenance.path(name or maintenance.default_name(node), "status"),
                          model.phase_patch(node, run_id, phase, maintenance.MODE_ANNOTATION), "json")
    except (NotFound, UnprocessableEntity):
        return None, None
    return nm, of(nm)


def started(client: Client, node: str, phase: str, run_id: str, nm: Optional[Dict[str, Any]] = None,
            name: Optional[str] = None) -> Tuple[Optional[Dict[str, Any]], Optional[Record]]:
    """The record once ``phase`` started: written, and returned with the object. Nothing is
    written for a node without a NodeMaintenance (its begin wrote nothing). Unread by the
    caller, the node's record of this run takes one request (``phase_only``); otherwise a
    read, then a write when anything changed."""
    if nm is None:
        quick, now = phase_only(client, node, phase, run_id, name)
        if quick is not None and now is not None:
            return quick, now
    nm, found = read(client, node, nm, name)
    if nm is None:
        return None, None
    now = (found or Record()).started(phase, run_id)
    return write(client, nm, now), now
