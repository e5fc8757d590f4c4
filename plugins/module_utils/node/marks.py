"""A node's marks for maintenance besides taints: cordon and the remediation label."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..api.client import Client
from .taints import node_path, read_node

EXCLUDE_FROM_REMEDIATION = "remediation.medik8s.io/exclude-from-remediation"
# This collection's own marks on a node it put in maintenance, so that the end and
# recover.yml undo only what it did: the run that cordoned it, and whether the
# exclude-from-remediation label was added by us (an administrator's own label is kept).
MAINTAINED_BY = "nmo.maintenance/maintained-by"
LABEL_ADDED = "nmo.maintenance/label-added"
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def marking(node: Dict[str, Any], label_key: str) -> Dict[str, Any]:
    return {
        "unschedulable": bool(node.get("spec", {}).get("unschedulable")),
        "label": node.get("metadata", {}).get("labels", {}).get(label_key) == "true",
    }


def annotation_changes(node: Dict[str, Any], wanted: Optional[Dict[str, Optional[str]]]) -> Dict[str, Optional[str]]:
    """The annotations of ``wanted`` that differ from the node's (a None value removes one)."""
    current = node.get("metadata", {}).get("annotations") or {}
    return {k: v for k, v in (wanted or {}).items() if current.get(k) != v}


def mark(client: Client, name: str, unschedulable: Optional[bool], label_key: str, label: Optional[bool],
         check_mode: bool = False, node: Optional[Dict[str, Any]] = None,
         annotations: Optional[Dict[str, Optional[str]]] = None
         ) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any], bool]:
    """Set cordon, the label and ``annotations`` (None leaves one alone) in one request, only
    when they differ.

    Returns (before, after, node, changed).
    """
    node = node or read_node(client, name)
    before = marking(node, label_key)
    patch: Dict[str, Any] = {}
    if unschedulable is not None and before["unschedulable"] != unschedulable:
        patch["spec"] = {"unschedulable": True if unschedulable else None}
    if label is not None and before["label"] != label:
        patch["metadata"] = {"labels": {label_key: "true" if label else None}}
    notes = annotation_changes(node, annotations)
    if notes:
        patch.setdefault("metadata", {})["annotations"] = notes
    after = dict(before)
    if unschedulable is not None:
        after["unschedulable"] = unschedulable
    if label is not None:
        after["label"] = label
    if not patch:
        return before, before, node, False
    if not check_mode:
        node = client.patch(node_path(name), patch, "merge")
    return before, after, node, True


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _map_ops(node: Dict[str, Any], field: str, wanted: Dict[str, str]) -> List[Dict[str, Any]]:
    """JSON Patch operations that set ``wanted`` in metadata.<field>, only where it differs."""
    current = node.get("metadata", {}).get(field)
    if current is None:
        return [{"op": "add", "path": f"/metadata/{field}", "value": dict(wanted)}] if wanted else []
    return [{"op": "add", "path": f"/metadata/{field}/{_pointer(k)}", "value": v}
            for k, v in wanted.items() if current.get(k) != v]


def cordon_ops(node: Dict[str, Any], label_key: str, run_id: str = "") -> List[Dict[str, Any]]:
    """JSON Patch operations that cordon the node and set the label, only where needed, and
    record that we did (MAINTAINED_BY; LABEL_ADDED when the label was not there before)."""
    ops: List[Dict[str, Any]] = []
    if not node.get("spec", {}).get("unschedulable"):
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": True})
    meta = node.get("metadata", {})
    had_label = (meta.get("labels") or {}).get(label_key) == "true"
    ops += _map_ops(node, "labels", {label_key: "true"})
    notes = {MAINTAINED_BY: run_id or "standalone"}
    if not had_label and (meta.get("annotations") or {}).get(MAINTAINED_BY) is None:
        notes[LABEL_ADDED] = "true"
    if (meta.get("annotations") or {}).get(MAINTAINED_BY) is not None:
        notes.pop(MAINTAINED_BY)  # already ours (a resumed maintenance): keep the first record
    ops += _map_ops(node, "annotations", notes)
    return ops


def ours_to_unlabel(node: Dict[str, Any]) -> bool:
    """Whether the end removes the exclude-from-remediation label: when we added it, or when
    the node carries no record of ours at all (a maintenance begun before marks were kept,
    or by hand), as it always did. A label that was there before we came stays."""
    notes = node.get("metadata", {}).get("annotations") or {}
    return notes.get(LABEL_ADDED) == "true" or MAINTAINED_BY not in notes


def end_marks() -> Dict[str, Optional[str]]:
    """The annotation changes that forget our marks at the end."""
    return {MAINTAINED_BY: None, LABEL_ADDED: None}


def is_ready(node: Dict[str, Any]) -> bool:
    for cond in node.get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def is_control_plane(node: Dict[str, Any]) -> bool:
    labels = node.get("metadata", {}).get("labels", {})
    return any(label in labels for label in CONTROL_PLANE_LABELS)
