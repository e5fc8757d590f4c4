"""Apply a JSON Patch (RFC 6902) to a node dict as kube-apiserver does, and the node-lifecycle
controller's mirror of cordon into the unschedulable taint: to check what our patches
leave on a node, not only their operations."""

from __future__ import annotations

import copy
from typing import Any, Dict, List


class PatchTestFailed(Exception):
    pass


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def apply(node: Dict[str, Any], ops: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The node after ``ops``; PatchTestFailed when a ``test`` fails (nothing is applied then).
    As kube-apiserver's json-patch, a test of null matches a missing member."""
    doc = copy.deepcopy(node)
    for op in ops:
        *parents, last = [_unescape(p) for p in op["path"].split("/")[1:]]
        target = doc
        for part in parents:
            target = target[part]
        if op["op"] == "test":
            if target.get(last) != op["value"]:
                raise PatchTestFailed(op["path"])
        elif op["op"] in ("add", "replace"):
            target[last] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del target[last]
        else:
            raise AssertionError(f"unexpected op {op['op']}")
    if doc.get("spec", {}).get("unschedulable") is False:
        del doc["spec"]["unschedulable"]  # omitempty: the API server stores no false
    return doc


MIRROR = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def controller(node: Dict[str, Any]) -> Dict[str, Any]:
    """What kube-controller-manager's node-lifecycle controller does next: the taint equals cordon."""
    doc = copy.deepcopy(node)
    taints = doc["spec"].get("taints") or []
    has = any(t["key"] == MIRROR["key"] and t["effect"] == MIRROR["effect"] for t in taints)
    if doc["spec"].get("unschedulable") and not has:
        doc["spec"]["taints"] = taints + [dict(MIRROR)]
    elif not doc["spec"].get("unschedulable") and has:
        kept = [t for t in taints if not (t["key"] == MIRROR["key"] and t["effect"] == MIRROR["effect"])]
        doc["spec"]["taints"] = kept
    if not doc["spec"].get("taints"):
        doc["spec"].pop("taints", None)  # omitempty
    return doc
