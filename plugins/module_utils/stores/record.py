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
from ..model import record as model
from ..model.record import Record
from . import maintenance


def operated(nm: Dict[str, Any]) -> bool:
    """Whether NMO works on this NodeMaintenance (operator mode): its status is not ours."""
    return ((nm.get("metadata") or {}).get("annotations") or {}).get(maintenance.MODE_ANNOTATION) == "operator"


def of(nm: Optional[Dict[str, Any]]) -> Optional[Record]:
    return model.of_maintenance(nm, operated(nm)) if nm else None


def read(client: Client, node: str,
         nm: Optional[Dict[str, Any]] = None) -> Tuple[Optional[Dict[str, Any]], Optional[Record]]:
    """The node's NodeMaintenance (``nm`` when the caller read it already) and its record."""
    nm = nm if nm is not None else maintenance.find(client, node)
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


def started(client: Client, node: str, phase: str, run_id: str,
            nm: Optional[Dict[str, Any]] = None) -> Tuple[Optional[Dict[str, Any]], Optional[Record]]:
    """The record once ``phase`` started: written, and returned with the object. Nothing is
    written for a node without a NodeMaintenance (its begin wrote nothing)."""
    nm, found = read(client, node, nm)
    if nm is None:
        return None, None
    now = (found or Record()).started(phase, run_id)
    return write(client, nm, now), now
