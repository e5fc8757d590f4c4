"""A node's marks for maintenance besides taints: cordon and the remediation label."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from .drain_spec import SKIP_WAIT_OPTION
from .node_state import Wanted
from .taints import MAINTENANCE_TAINTS, UNSCHEDULABLE_TAINT, WAITING_ANY, Taint, same_taint

EXCLUDE_FROM_REMEDIATION = "remediation.medik8s.io/exclude-from-remediation"
# This collection's own marks on a node it put in maintenance, so that the end and
# recover.yml undo only what it did: the run that cordoned it, and whether the
# exclude-from-remediation label was added by us (an administrator's own label is kept).
MAINTAINED_BY = "nmo.maintenance/maintained-by"
LABEL_ADDED = "nmo.maintenance/label-added"
# What the node had before the begin, written in the begin's own patch (so a run killed right
# after it, and recover.yml, still know): an administrator's cordon, and maintenance taints
# someone else had put on. The end, a rollback and recover.yml leave those as they found them.
CORDONED_BEFORE = "nmo.maintenance/cordoned-before"
TAINTS_BEFORE = "nmo.maintenance/taints-before"
# A node the rollout could not drain and, with node_maintenance_on_blocked: quarantine, left
# cordoned out of the rollout (docs/design.md, the rollout scheduler): the label selects them
# (status.yml, recover.yml), the annotation of the same key says what blocked the drain.
QUARANTINED = "nmo.maintenance/quarantined"
# The drain's settle snapshot (model/settle.py, docs/design.md §4.9.1), on the node until it
# settled: here with the other marks, so that the begin, the end and recover.yml, which only
# remove it, do not import the settle's model (and, through it, the pod filters and budgets)
# in every module task that runs them.
SETTLE_SNAPSHOT = "nmo.maintenance/settle"
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def marking(view: Dict[str, Any], label_key: str) -> Dict[str, Any]:
    """Cordon and the label, from a node's ``state.view``: what nmo_cordon reports."""
    return {"unschedulable": view["unschedulable"], "label": view["labels"].get(label_key) == "true"}


Marks = Dict[str, Optional[str]]


def begin_marks(node: Dict[str, Any], label_key: str, run_id: str = "") -> Tuple[Marks, Marks]:
    """(labels, annotations) the begin sets with the cordon: the label, and the record that
    we did (MAINTAINED_BY; LABEL_ADDED when the label was not there before; CORDONED_BEFORE
    and TAINTS_BEFORE for what someone else had put on). A resumed maintenance
    (MAINTAINED_BY already there) keeps its first record."""
    meta = node.get("metadata", {})
    notes = meta.get("annotations") or {}
    if notes.get(MAINTAINED_BY) is not None:
        return {label_key: "true"}, {}
    had_label = (meta.get("labels") or {}).get(label_key) == "true"
    record: Marks = {MAINTAINED_BY: run_id or "standalone", **({} if had_label else {LABEL_ADDED: "true"})}
    if node.get("spec", {}).get("unschedulable"):
        record[CORDONED_BEFORE] = "true"
    # the unschedulable taint follows the cordon (node_state.py): the cordon's record says it
    had = [t for t in MAINTENANCE_TAINTS if not same_taint(t, UNSCHEDULABLE_TAINT)
           and any(same_taint(t, n) for n in node.get("spec", {}).get("taints") or [])]
    if had:
        record[TAINTS_BEFORE] = ",".join(f"{t['key']}:{t['effect']}" for t in had)
    return {label_key: "true"}, record


def found_before(node: Dict[str, Any]) -> Tuple[bool, List[Taint]]:
    """(cordoned before the begin, the maintenance taints the node had before it), from the
    begin's record on the node."""
    notes = node.get("metadata", {}).get("annotations") or {}
    kept = [t for t in MAINTENANCE_TAINTS
            if f"{t['key']}:{t['effect']}" in (notes.get(TAINTS_BEFORE) or "").split(",")]
    return notes.get(CORDONED_BEFORE) == "true", kept


def left_as_found(name: str, node: Dict[str, Any], ending: bool = True) -> List[str]:
    """What the end leaves in place because it was there before the maintenance began, said
    for the operator: by the end (``ending``), or ahead of it by the begin."""
    cordoned, taints = found_before(node)
    said = [f"node {name} was cordoned before the maintenance began: "
            + ("left cordoned" if ending else "it stays cordoned after it")] if cordoned else []
    said += [f"node {name} had the taint {t['key']}:{t['effect']} before the maintenance began: "
             + ("left in place" if ending else "it stays after it") for t in taints]
    return said


def ours_to_unlabel(node: Dict[str, Any]) -> bool:
    """Whether the end removes the exclude-from-remediation label: when we added it, or when
    the node carries no record of ours at all (a maintenance begun before marks were kept,
    or by hand), as it always did. A label that was there before we came stays."""
    notes = node.get("metadata", {}).get("annotations") or {}
    return notes.get(LABEL_ADDED) == "true" or MAINTAINED_BY not in notes


def end_marks() -> Dict[str, Optional[str]]:
    """The annotation changes that forget our marks at the end."""
    return {MAINTAINED_BY: None, LABEL_ADDED: None, CORDONED_BEFORE: None, TAINTS_BEFORE: None}


def cordon_wanted(node: Dict[str, Any], unschedulable: bool, label_key: str, label: bool,
                  annotations: Optional[Dict[str, Optional[str]]] = None) -> Wanted:
    """nmo_cordon's wanted state: cordon (its mirror taint with it) and the label; uncordoning
    removes the label only when it is ours (``ours_to_unlabel``) and forgets our marks."""
    notes = dict(annotations or {})
    labels: Dict[str, Optional[str]] = {}
    if label and unschedulable:
        labels[label_key] = "true"
    elif label:
        if ours_to_unlabel(node):
            labels[label_key] = None
        notes = {**end_marks(), **notes}
    return Wanted(unschedulable=unschedulable, labels=labels, annotations=notes)


def begin_wanted(node: Dict[str, Any], label_key: str, run_id: str = "") -> Wanted:
    """The begin's node: the maintenance taints, cordoned, labelled, and our record of it."""
    labels, notes = begin_marks(node, label_key, run_id)
    return Wanted(add=list(MAINTENANCE_TAINTS), unschedulable=True, labels=labels, annotations=notes)


def quarantine_wanted(node: Dict[str, Any], label_key: str, run_id: str, blocker: str) -> Wanted:
    """Operator mode: the quarantined node once the Node Maintenance Operator has let it go (it
    uncordons, untaints and unlabels when its NodeMaintenance is deleted): cordoned, tainted and
    labelled as the standalone begin leaves a node, with our record of it (so the end, as
    recover.yml lifts the quarantine, undoes exactly that) and the quarantine's label and
    annotation naming ``blocker``: the same node a standalone quarantine leaves."""
    wanted = begin_wanted(node, label_key, run_id)
    wanted.labels[QUARANTINED] = "true"
    wanted.annotations[QUARANTINED] = blocker
    return wanted


def end_wanted(node: Dict[str, Any], label_key: str,
               annotations: Optional[Dict[str, Optional[str]]] = None,
               labels: Optional[Dict[str, Optional[str]]] = None) -> Wanted:
    """The end's node (and a rollback's): uncordoned, untainted, our label and marks gone; but
    a cordon and maintenance taints the node had before the begin stay (kured's semantics: a
    node cordoned before stays cordoned after). ``labels``: more labels set or removed in the
    same patch (recover.yml removes the quarantine's)."""
    cordoned, kept = found_before(node)
    wanted = cordon_wanted(node, False, label_key, True, annotations)
    wanted.labels.update(labels or {})
    if cordoned:  # left as it is, and with it the unschedulable taint that follows the cordon
        wanted.unschedulable = None
        kept = kept + [UNSCHEDULABLE_TAINT]
    wanted.remove = [t for t in MAINTENANCE_TAINTS if not any(same_taint(t, k) for k in kept)]
    if any(same_taint(t, WAITING_ANY) for t in node.get("spec", {}).get("taints") or []):
        wanted.remove.append(dict(WAITING_ANY))  # its wait is over too (docs/design.md §3.7): the same patch
    return wanted


def is_ready(node: Dict[str, Any]) -> bool:
    for cond in node.get("status", {}).get("conditions", []):
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def not_ready(node: Dict[str, Any]) -> Optional[str]:
    """Why a node has no kubelet to stop its pods (``NotReady ...``, ``unreachable ...``), or
    None when it is Ready: the pre-flight and the begin say the same."""
    ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    status = ready[0].get("status") if ready else None
    if status == "True":
        return None
    return ("NotReady (its Ready condition is False)" if status == "False" else
            "unreachable (its Ready condition is Unknown: the kubelet stopped posting its status)"
            if status == "Unknown" else "not Ready (it has no Ready condition: no kubelet ever reported)")


def not_ready_refusal(name: str, state: str) -> str:
    """The no-go of a node without its kubelet, as the pre-flight and the begin word it."""
    return (f"node {name} is {state}: evictions there wait for a kubelet that is not there to stop the pods, "
            "so the drain would not finish. Bring the node back, or let the drain go on without its kubelet "
            f"(drain {SKIP_WAIT_OPTION})")


def is_control_plane(node: Dict[str, Any]) -> bool:
    labels = node.get("metadata", {}).get("labels", {})
    return any(label in labels for label in CONTROL_PLANE_LABELS)
