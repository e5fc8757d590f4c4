"""A node's maintenance state as one thing: taints, cordon and our marks, in one JSON Patch.

Cordon and the ``node.kubernetes.io/unschedulable:NoSchedule`` taint are one concept on
the wire: Kubernetes' node-lifecycle controller keeps that taint equal to
``spec.unschedulable``. It puts it back on a cordoned node and takes it off a schedulable
one, whoever wrote it. So the taint follows the cordon here too:

- a change of cordon writes the taint with it (in the same request, so nothing sees one
  without the other and nothing waits on the controller);
- a taint change alone never adds the taint to a schedulable node nor removes it from a
  cordoned one: that would be undone within seconds and reported as changed on every run.
  It is left as it is and said so (``Plan.held``); cordoning is what adds it.

Everything else (other taints, the exclude-from-remediation label, our annotations) is
written only where it differs. The patch tests what it changes as read (the taint list,
each label or annotation it removes, a map it creates), so a concurrent writer is never
overwritten: the API server refuses the patch, and ``apply`` (stores/nodes.py) reads again
and retries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .taints import (
    UNSCHEDULABLE_TAINT,
    Taint,
    guarded_patch,
    same_taint,
    with_taints,
    without_taints,
)

Op = Dict[str, Any]
MIRROR = UNSCHEDULABLE_TAINT


@dataclass
class Wanted:
    """What a call wants of a node; anything not named is left as it is.

    ``labels`` and ``annotations`` map a key to its value, None to remove it.
    """

    add: List[Taint] = field(default_factory=list)
    remove: List[Taint] = field(default_factory=list)
    unschedulable: Optional[bool] = None
    labels: Dict[str, Optional[str]] = field(default_factory=dict)
    annotations: Dict[str, Optional[str]] = field(default_factory=dict)


@dataclass
class Plan:
    """The patch for one node as read, and the node's state before and after it."""

    ops: List[Op]
    before: Dict[str, Any]
    after: Dict[str, Any]
    held: List[str]

    @property
    def changed(self) -> bool:
        return any(op["op"] != "test" for op in self.ops)


def view(node: Dict[str, Any]) -> Dict[str, Any]:
    """The parts of a node this module writes: taints, unschedulable, labels, annotations."""
    meta = node.get("metadata", {})
    return {"taints": list(node.get("spec", {}).get("taints") or []),
            "unschedulable": bool(node.get("spec", {}).get("unschedulable")),
            "labels": dict(meta.get("labels") or {}), "annotations": dict(meta.get("annotations") or {})}


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _has(taints: List[Taint], taint: Taint) -> bool:
    return any(same_taint(t, taint) for t in taints)


def taint_lists(wanted: Wanted, cordoned_now: bool) -> Tuple[List[Taint], List[Taint], List[str]]:
    """(add, remove, held): the taint changes once the mirror taint follows the cordon."""
    cordoned = cordoned_now if wanted.unschedulable is None else wanted.unschedulable
    add = [t for t in wanted.add if not same_taint(t, MIRROR)]
    remove = [t for t in wanted.remove if not same_taint(t, MIRROR)]
    held: List[str] = []
    if wanted.unschedulable is not None:  # a cordon change writes its mirror with it
        (add if cordoned else remove).insert(0, dict(MIRROR))
    elif _has(wanted.add, MIRROR) and not cordoned:
        held.append(f"{MIRROR['key']}:{MIRROR['effect']} not added: the node is not cordoned, and Kubernetes' "
                    "node-lifecycle controller removes that taint from a schedulable node; cordon it (nmo_cordon) "
                    "and the taint comes with the cordon")
    elif _has(wanted.add, MIRROR):
        add.insert(0, dict(MIRROR))  # cordoned: the taint is wanted and stays
    elif _has(wanted.remove, MIRROR) and cordoned:
        held.append(f"{MIRROR['key']}:{MIRROR['effect']} kept: the node is cordoned, and Kubernetes' "
                    "node-lifecycle controller puts that taint back on a cordoned node; uncordon it (nmo_cordon) "
                    "and the taint goes with the cordon")
    elif _has(wanted.remove, MIRROR):
        remove.insert(0, dict(MIRROR))
    return add, remove, held


def _map_ops(meta: Dict[str, Any], name: str, wanted: Dict[str, Optional[str]]) -> List[Op]:
    """Set or remove the keys of ``wanted`` in metadata.<name>, only where they differ; a
    removal tests the value it removes, a new map tests that there was none."""
    current = meta.get(name)
    sets = {k: v for k, v in wanted.items() if v is not None and (current or {}).get(k) != v}
    ops: List[Op] = []
    if current is None:
        if sets:
            ops += [{"op": "test", "path": f"/metadata/{name}", "value": None},
                    {"op": "add", "path": f"/metadata/{name}", "value": sets}]
        return ops
    for key, value in sets.items():  # a key set over what the plan did not read fails the test
        path = f"/metadata/{name}/{_pointer(key)}"
        ops += [{"op": "test", "path": path, "value": current.get(key)}, {"op": "add", "path": path, "value": value}]
    for key in (k for k, v in wanted.items() if v is None and k in current):
        path = f"/metadata/{name}/{_pointer(key)}"
        ops += [{"op": "test", "path": path, "value": current[key]}, {"op": "remove", "path": path}]
    return ops


def _read_tests(node: Dict[str, Any], wanted: Wanted, taints_written: bool) -> List[Op]:
    """Tests of the fields the plan decided from but does not write: the cordon, the taints
    and the wanted keys left as they are. A plan made from an older read (the begin reads the
    node before its lease wait) is then refused if any of them changed, and planned again."""
    spec, meta = node.get("spec", {}), node.get("metadata", {})
    tests: List[Op] = [{"op": "test", "path": "/spec/unschedulable", "value": spec.get("unschedulable")}]
    if not taints_written:  # a taint write tests them itself (guarded_patch)
        tests.append({"op": "test", "path": "/spec/taints", "value": spec.get("taints")})
    for name, keys in (("labels", wanted.labels), ("annotations", wanted.annotations)):
        current = meta.get(name)
        if current is None:
            if keys:
                tests.append({"op": "test", "path": f"/metadata/{name}", "value": None})
            continue
        tests += [{"op": "test", "path": f"/metadata/{name}/{_pointer(k)}", "value": current.get(k)}
                  for k, v in keys.items() if current.get(k) == v or (v is None and k not in current)]
    return tests


def _updated(current: Dict[str, str], wanted: Dict[str, Optional[str]]) -> Dict[str, str]:
    merged = {**current, **{k: v for k, v in wanted.items() if v is not None}}
    return {k: v for k, v in merged.items() if not (k in wanted and wanted[k] is None)}


def plan(node: Dict[str, Any], wanted: Wanted) -> Plan:
    """The one JSON Patch that takes ``node`` (as read) to ``wanted``; empty when it is there."""
    before = view(node)
    cordoned = before["unschedulable"] if wanted.unschedulable is None else wanted.unschedulable
    add, remove, held = taint_lists(wanted, before["unschedulable"])
    raw = node.get("spec", {}).get("taints")
    taints = without_taints(with_taints(before["taints"], add), remove) if add or remove else before["taints"]
    taint_ops = guarded_patch(raw, taints) if taints != before["taints"] else []
    ops: List[Op] = []
    if cordoned != before["unschedulable"]:
        ops.append({"op": "add", "path": "/spec/unschedulable", "value": cordoned})
    meta = node.get("metadata", {})
    ops += _map_ops(meta, "labels", wanted.labels)
    ops += _map_ops(meta, "annotations", wanted.annotations)
    if taint_ops or ops:
        ops = taint_ops + _read_tests(node, wanted, bool(taint_ops)) + ops
    after = {"taints": taints, "unschedulable": cordoned, "labels": _updated(before["labels"], wanted.labels),
             "annotations": _updated(before["annotations"], wanted.annotations)}
    return Plan(ops, before, after, held)
