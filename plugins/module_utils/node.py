"""A node's marks for maintenance besides taints: cordon and the remediation label."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .client import Client
from .taints import node_path, read_node

EXCLUDE_FROM_REMEDIATION = "remediation.medik8s.io/exclude-from-remediation"
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


def cordon_ops(node: Dict[str, Any], label_key: str) -> List[Dict[str, Any]]:
    """JSON Patch operations that cordon the node and set the label, only where needed."""
    ops: List[Dict[str, Any]] = []
    if not node.get("spec", {}).get("unschedulable"):
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": True})
    labels = node.get("metadata", {}).get("labels")
    if labels is None:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {label_key: "true"}})
    elif labels.get(label_key) != "true":
        pointer = label_key.replace("~", "~0").replace("/", "~1")
        ops.append({"op": "add", "path": f"/metadata/labels/{pointer}", "value": "true"})
    return ops


def is_ready(node: Dict[str, Any]) -> bool:
    for cond in node.get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def is_control_plane(node: Dict[str, Any]) -> bool:
    labels = node.get("metadata", {}).get("labels", {})
    return any(label in labels for label in CONTROL_PLANE_LABELS)
