"""Read-only diagnosis of nodes: the five-step checklist of docs/design.md §12.5 in one pass.

Reads nodes, NodeMaintenances, leases and events once each, for all the nodes asked
about, and groups them by node; 500 nodes cost four requests, not two thousand.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..errors import InputError, NotFound, RefusedError
from ..model import leases as lease_utils
from ..model import validation
from ..model.marks import EXCLUDE_FROM_REMEDIATION, is_ready
from ..model.taints import DRAIN_TAINT, MAINTENANCE_TAINTS, same_taint
from ..stores import maintenance
from ..stores.events import EVENT_NAMESPACE

LEASE_NAMESPACE = "medik8s-leases"
MARK_PREFIX = "nmo.maintenance/"  # the node annotations the role writes (a campaign's done mark)
FEW = 20  # up to this many named nodes are read one by one rather than listed


def leases_of(client: Client) -> List[Dict[str, Any]]:
    try:
        return client.get(paths.leases(LEASE_NAMESPACE)).get("items", [])
    except NotFound:
        return []


def _events_by_object(client: Client, names: set, limit: int) -> Dict[str, List[Dict[str, Any]]]:
    grouped: Dict[str, List[Dict[str, Any]]] = {}
    for e in client.get(paths.events(EVENT_NAMESPACE)).get("items", []):
        obj = e.get("involvedObject", {})
        if obj.get("kind") in ("NodeMaintenance", "Node") and obj.get("name") in names:
            grouped.setdefault(obj["name"], []).append({
                "object": f"{obj.get('kind')}/{obj.get('name')}", "type": e.get("type"), "reason": e.get("reason"),
                "message": e.get("message"), "count": e.get("count", 1),
                "lastTimestamp": e.get("lastTimestamp") or e.get("eventTime") or ""})
    for items in grouped.values():
        items.sort(key=lambda e: e["lastTimestamp"])
        del items[:-limit]
    return grouped


def _run_of(nm: Optional[Dict[str, Any]], alive_runs: set) -> Optional[Dict[str, Any]]:
    """The run that holds the NodeMaintenance and whether it is alive (its run lease valid)."""
    if nm is None:
        return None
    run_id = lease_utils.run_annotation(nm)
    return {"id": run_id, "alive": bool(run_id) and run_id in alive_runs}


def in_maintenance(report: Dict[str, Any]) -> bool:
    """Any sign of maintenance: an object, our taints, cordon, the label, or a lease naming it."""
    return bool(report["maintenance"] or report["maintenance_taints"] or report["unschedulable"]
                or report["excluded_from_remediation"] or report["leases"])


def validate(node: Optional[str], label_selector: Optional[str], label_key: str, events_limit: int,
             only: Optional[List[str]]) -> None:
    """The options of a diagnosis. Names in ``only`` are a filter: one that cannot be a node
    name is reported missing, like any other name no node has."""
    if node is not None:
        validation.node_name(node)
    if label_selector is not None:
        validation.label_selector(label_selector, "label_selector")
    validation.qualified_name(label_key, "label_key")
    validation.number(events_limit, "events_limit", 0, validation.MAX_EVENTS_LIMIT, "events", integer=True)
    for i, name in enumerate(only or []):
        if not isinstance(name, str):
            raise InputError(f"nodes[{i}]: {name!r} must be a string")


def missing(only: Optional[List[str]], reports: List[Dict[str, Any]]) -> List[str]:
    """The names of ``only`` that no node has, nor a NodeMaintenance (in the order asked, once each)."""
    found = {r["node"] for r in reports} | {r["maintenance"]["name"] for r in reports if r.get("maintenance")}
    return [name for name in dict.fromkeys(only or []) if name not in found]


def orphans(client: Client, nms: List[Dict[str, Any]], names: set, only: Optional[List[str]],
            everything: bool) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The NodeMaintenances to report beside the nodes read: those of a node that is gone
    (deleted mid-maintenance: its NodeMaintenance, and our slot, outlive it), and, for a
    NodeMaintenance asked for by its own name, the node it names. (nodes to add, gone names)"""
    if everything:
        return [], sorted({nm.get("spec", {}).get("nodeName", "") for nm in nms} - names - {""})
    if only is None:
        return [], []
    wanted = set(only)
    added: List[Dict[str, Any]] = []
    gone: List[str] = []
    for nm in nms:
        node = nm.get("spec", {}).get("nodeName", "")
        if not node or node in names or node in gone or any(n["metadata"]["name"] == node for n in added):
            continue
        if node in wanted:  # asked for by name and not read: it is not in the cluster
            gone.append(node)
        elif nm["metadata"]["name"] in wanted and validation.is_node_name(node):
            read = client.get_or_none(paths.node(node))
            if read:
                added.append(read)
            else:
                gone.append(node)
    return added, gone


def gone_report(name: str) -> Dict[str, Any]:
    """What there is to say of a node that is not in the cluster any more."""
    return {"node": name, "node_deleted": True, "ready": False, "unschedulable": False,
            "excluded_from_remediation": False, "taints": [], "annotations": {}, "maintenance_taints": [],
            "drain_taint": False}


def node_report(n: Dict[str, Any], label_key: str) -> Dict[str, Any]:
    """What the node itself says: readiness, cordon, label, taints, our marks."""
    taints = n.get("spec", {}).get("taints") or []
    return {
        "node": n["metadata"]["name"],
        "node_deleted": False,
        "ready": is_ready(n),
        "unschedulable": bool(n.get("spec", {}).get("unschedulable")),
        "excluded_from_remediation": n.get("metadata", {}).get("labels", {}).get(label_key) == "true",
        "taints": taints,
        "annotations": {k: v for k, v in (n.get("metadata", {}).get("annotations") or {}).items()
                        if k.startswith(MARK_PREFIX)},
        "maintenance_taints": [t for t in taints if any(same_taint(t, m) for m in MAINTENANCE_TAINTS)],
        "drain_taint": any(same_taint(t, DRAIN_TAINT) for t in taints),
        "created": n.get("metadata", {}).get("creationTimestamp") or "",
    }


def describe(client: Client, node: Optional[str] = None, label_selector: Optional[str] = None,
             label_key: str = EXCLUDE_FROM_REMEDIATION, events_limit: int = 10,
             only: Optional[List[str]] = None, node_read: Optional[Dict[str, Any]] = None,
             leases_read: Optional[List[Dict[str, Any]]] = None,
             keep_labels: Tuple[str, ...] = ()) -> List[Dict[str, Any]]:
    """Reports of ``node``, or of the nodes matching ``label_selector``, kept to ``only`` when given.
    ``keep_labels``: the node labels each report carries (``labels``; the run's order reads them).
    ``node_read``: ``node`` as the caller has just read it (the Ready wait), not read again;
    ``leases_read``: the lease namespace as the caller has just listed it."""
    validate(node, label_selector, label_key, events_limit, only)
    if only is not None:  # a name that cannot be a node's is never asked for ('..' would read /api/v1)
        only = [name for name in only if validation.is_node_name(name)]
    if node and node_read is not None:
        nodes = [node_read]
    elif node:
        try:
            nodes = [client.get(paths.node(node))]
        except NotFound:
            raise RefusedError(f'node "{node}" not found in cluster') from None
    elif only is not None and len(only) <= FEW and not label_selector:
        # a few nodes of a large cluster: read those, not the whole node list
        nodes = [n for n in (client.get_or_none(paths.node(name)) for name in dict.fromkeys(only)) if n]
    else:
        nodes = client.get(paths.NODES, {"labelSelector": label_selector}).get("items", [])
        if only is not None:
            wanted = set(only)
            nodes = [n for n in nodes if n["metadata"]["name"] in wanted]
    # one node (the Ready wait, status.yml's node): its NodeMaintenance by name, not every one listed
    nms = (([found] if (found := maintenance.locate(client, node)) else []) if node and only is None
           else maintenance.list_all(client))
    leases = leases_of(client) if leases_read is None else leases_read
    names = {n["metadata"]["name"] for n in nodes}
    added, gone = orphans(client, nms, names, only, everything=not node and only is None and not label_selector)
    nodes += added
    names |= {n["metadata"]["name"] for n in added}
    nm_by_node = {name: maintenance.find(client, name, nms) for name in names | set(gone)}
    alive_runs = lease_utils.alive_run_ids(leases, client.server_now())
    event_names = names | set(gone) | {nm["metadata"]["name"] for nm in nm_by_node.values() if nm}
    # events_limit 0 asks for none: the cluster's events are not read at all
    events = _events_by_object(client, event_names, events_limit) if events_limit > 0 else {}
    reports = []
    shown = [(n["metadata"]["name"], n) for n in nodes] + [(name, None) for name in gone]
    for name, n in sorted(shown, key=lambda pair: pair[0]):
        nm = nm_by_node[name]
        node_leases = [
            {"name": lease["metadata"]["name"], "holder": lease.get("spec", {}).get("holderIdentity"),
             "renewTime": lease.get("spec", {}).get("renewTime"),
             "leaseDurationSeconds": lease.get("spec", {}).get("leaseDurationSeconds"),
             # a maintenance slot of this collection, whatever its prefix
             "slot": all((lease["metadata"].get("labels") or {}).get(k) == v
                         for k, v in lease_utils.SLOT_LABELS.items())}
            for lease in leases
            if lease["metadata"]["name"] == f"node-{name}" or lease.get("spec", {}).get("holderIdentity") == name]
        node_events = list(events.get(name, []))
        if nm:
            node_events = sorted(node_events + events.get(nm["metadata"]["name"], []), key=lambda e: e["lastTimestamp"])
        labels = (n or {}).get("metadata", {}).get("labels") or {}
        reports.append({
            **(node_report(n, label_key) if n is not None else gone_report(name)),
            **({"labels": {k: labels[k] for k in keep_labels if k in labels}} if keep_labels else {}),
            "maintenance": maintenance.summary(nm),
            "run": _run_of(nm, alive_runs),
            "leases": node_leases,
            "events": node_events[-events_limit:] if events_limit > 0 else [],
        })
    return reports
