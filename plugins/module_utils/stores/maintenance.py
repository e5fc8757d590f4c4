"""The NodeMaintenance object: find it by node, create it (or refuse to), keep its status.

One NodeMaintenance per node, found by ``spec.nodeName`` whatever its name, so a rerun or
an object made by hand is resumed rather than duplicated. Status goes through the status
subresource as a merge patch of just the fields that changed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import Watcher, list_objects, listed, wait_until
from ..errors import Conflict, InputError, NotFound, RefusedError, WaitTimeout
from ..model.leases import RUN_ANNOTATION
from ..model.times import now_rfc3339, parse_time
from ..model.turns import TURN_ANNOTATION
from .crd import GROUP, KIND, PHASES, PLURAL, VERSION
from .nodes import read_node

API = paths.custom(GROUP, VERSION, PLURAL)
API_VERSION = f"{GROUP}/{VERSION}"
ADOPTED_ANNOTATION = "nmo.maintenance/adopted-from"
MODE_ANNOTATION = "nmo.maintenance/mode"  # standalone: this collection did the work; operator: NMO did
STATUS_FIELDS = ("phase", "drainProgress", "totalpods", "evictionPods", "pendingPods", "pendingPodsRefs",
                 "lastError", "errorOnLeaseCount", "migrations", "drainBatch", "skippedPods", "progress")


def default_name(node: str) -> str:
    """``maintenance-worker-01`` for ``node-worker-01``, as docs/design.md §2.1 names them."""
    return "maintenance-" + (node[len("node-"):] if node.startswith("node-") else node)


def path(name: str, subresource: str = "") -> str:
    return paths.custom(GROUP, VERSION, PLURAL, name=name, subresource=subresource)


def list_all(client: Client) -> List[Dict[str, Any]]:
    """Every NodeMaintenance; a wait that follows watches from this list (api/waiter.py's Listed)."""
    try:
        items = listed(client, API)
    except NotFound:  # the CRD is not installed: there are none
        return []
    for item in items:
        item.setdefault("apiVersion", API_VERSION)
        item.setdefault("kind", KIND)
    return items


def find(client: Client, node: str, items: Optional[List[Dict[str, Any]]] = None) -> Optional[Dict[str, Any]]:
    """The NodeMaintenance that names ``node`` (the oldest if, against the rules, several do)."""
    matching = [nm for nm in (items if items is not None else list_all(client))
                if nm.get("spec", {}).get("nodeName") == node]
    matching.sort(key=lambda nm: nm["metadata"].get("creationTimestamp", ""))
    return matching[0] if matching else None


def locate(client: Client, node: str, name: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The node's NodeMaintenance, without listing them all where its name is known: one GET of
    ``name`` (the run's) or ``default_name(node)``, kept when it names ``node``; the list (``find``)
    only when that misses: none of that name, or one of another node (the node's was made by
    hand under another name). A list grows with every NodeMaintenance of the cluster; a GET does not."""
    nm = get(client, name or default_name(node))
    if names_node(nm, node):
        return nm
    return find(client, node)


def names_node(nm: Optional[Dict[str, Any]], node: str) -> bool:
    return bool(nm) and (nm.get("spec") or {}).get("nodeName") == node


def get(client: Client, name: str) -> Optional[Dict[str, Any]]:
    nm = client.get_or_none(path(name))
    if nm:
        nm.setdefault("apiVersion", API_VERSION)
        nm.setdefault("kind", KIND)
    return nm


def ensure(client: Client, node: str, reason: str = "", name: Optional[str] = None,
           run_id: str = "", operator: bool = False,
           items: Optional[List[Dict[str, Any]]] = None, node_read: bool = False,
           turn: Optional[int] = None) -> Tuple[Dict[str, Any], bool]:
    """The node's NodeMaintenance, created (phase Pending) when there is none; ``turn``: the
    node's position in its run's order, written on it (model/turns.py).

    Refused before anything is written when the node does not exist, or when ``name`` is
    given and a NodeMaintenance of another name already names the node. A caller that has
    just read the node (``node_read``) or every NodeMaintenance (``items``) saves the reads.
    """
    if not node:
        raise InputError("node is required")
    if not node_read:
        read_node(client, node)  # refuses with 'node "X" not found in cluster'
    existing = find(client, node, items)
    if existing is not None:
        if name and existing["metadata"]["name"] != name:
            raise RefusedError(f"a NodeMaintenance for node {node} already exists "
                               f"({existing['metadata']['name']}); resume that one or delete it first")
        return existing, False
    name = name or default_name(node)
    if client.dry_run:  # the create would be refused when the name is taken: look first
        taken = get(client, name)
        if taken is not None:
            raise RefusedError(taken_message(name, taken))
    body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name},
            "spec": {"nodeName": node, "reason": reason or ""}}
    notes = {MODE_ANNOTATION: "operator" if operator else "standalone"}
    if run_id:
        notes[RUN_ANNOTATION] = run_id
    if run_id and turn is not None:
        notes[TURN_ANNOTATION] = str(turn)
    body["metadata"]["annotations"] = notes
    if client.dry_run:
        body["status"] = {"phase": "Pending"}
        return body, True
    try:  # created without a read first: the name is free at almost every maintenance
        created = client.post(API, body)
    except Conflict as exc:
        # AlreadyExists after a retry (exc.attempts > 1): our first create was applied and
        # its answer lost. On a first attempt the name is taken: by another node's (refused),
        # or by this node's made meanwhile (a conflict, as before).
        raced = get(client, name)
        if raced is not None and raced.get("spec", {}).get("nodeName") != node:
            raise RefusedError(taken_message(name, raced)) from None
        if raced is None or exc.attempts == 1:
            raise
        created = raced
    created.setdefault("apiVersion", API_VERSION)
    created.setdefault("kind", KIND)
    if not operator:  # NMO sets its status up only while the phase is empty: its object, its status
        created = update_status(client, created, {"phase": "Pending"})[0]
    return created, True


def taken_message(name: str, taken: Dict[str, Any]) -> str:
    return (f"NodeMaintenance {name} already exists for node {taken.get('spec', {}).get('nodeName')}; "
            "choose another name")


def adopt(client: Client, nm: Dict[str, Any], run_id: str, previous: str,
          turn: Optional[int] = None) -> Dict[str, Any]:
    """Make ``run_id`` the NodeMaintenance's run, only if nobody changed it since it was read
    (two runs adopting at once: one wins, the other gets Conflict); its turn in this run's order
    replaces the gone run's (None: removed)."""
    annotations: Dict[str, Optional[str]] = {RUN_ANNOTATION: run_id, ADOPTED_ANNOTATION: previous or "none",
                                             TURN_ANNOTATION: None if turn is None else str(turn)}
    if client.dry_run:
        merged = dict(nm)
        kept = nm["metadata"].get("annotations") or {}
        merged["metadata"] = {**nm["metadata"], "annotations": {k: v for k, v in {**kept, **annotations}.items()
                                                                if v is not None}}
        return merged
    body = {"metadata": {"resourceVersion": nm["metadata"].get("resourceVersion"), "annotations": annotations}}
    updated = client.patch(path(nm["metadata"]["name"]), body, "merge")
    updated.setdefault("apiVersion", API_VERSION)
    updated.setdefault("kind", KIND)
    return updated


def status_changes(nm: Dict[str, Any], wanted: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of ``wanted`` that differ from the object's status."""
    unknown = set(wanted) - set(STATUS_FIELDS)
    if unknown:
        raise InputError(f"unknown status fields: {', '.join(sorted(unknown))} (known: {', '.join(STATUS_FIELDS)})")
    if "phase" in wanted and wanted["phase"] not in PHASES:
        raise InputError(f"phase must be one of {', '.join(PHASES)}, got {wanted['phase']!r}")
    current = nm.get("status") or {}
    return {k: v for k, v in wanted.items() if v is not None and current.get(k) != v}


def update_status(client: Client, nm: Dict[str, Any], wanted: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
    """Write the status fields that differ (plus lastUpdate); no request when none do."""
    changes = status_changes(nm, wanted)
    if not changes:
        return nm, False
    changes["lastUpdate"] = now_rfc3339()
    if client.dry_run:
        merged = dict(nm)
        merged["status"] = {**(nm.get("status") or {}), **changes}
        return merged, True
    updated = client.patch(path(nm["metadata"]["name"], "status"), {"status": changes}, "merge")
    updated.setdefault("apiVersion", API_VERSION)
    updated.setdefault("kind", KIND)
    return updated, True


NMO_FINALIZER = "foregroundDeleteNodeMaintenance"  # NMO's: it ends the maintenance, then lets go
FINALIZER_WAIT = 120.0


def terminating(nm: Optional[Dict[str, Any]]) -> bool:
    return bool(nm and nm.get("metadata", {}).get("deletionTimestamp"))


def finalizer_advice(name: str) -> str:
    return (f"NodeMaintenance {name} keeps the Node Maintenance Operator's finalizer {NMO_FINALIZER}: NMO ends the "
            "maintenance and then removes it. If NMO is no longer installed or running, remove the finalizer "
            f"yourself (kubectl patch nodemaintenance {name} --type=json "
            "-p '[{\"op\": \"remove\", \"path\": \"/metadata/finalizers\"}]') and run again")


def delete(client: Client, nm: Dict[str, Any], wait: float = FINALIZER_WAIT) -> bool:
    """Delete it, and wait until it is gone: a finalizer (NMO's) keeps it until its owner lets go."""
    if client.dry_run:
        return True
    name = nm["metadata"]["name"]
    try:
        answer = client.delete(path(name))
    except NotFound as exc:
        return exc.attempts > 1  # a retried delete finds gone what its first attempt deleted
    if (answer.get("metadata") or {}).get("finalizers"):  # kept until its owner lets go
        _wait_gone(client, name, wait)
    return True


def _wait_gone(client: Client, name: str, timeout: float) -> None:
    query = {"fieldSelector": f"metadata.name={name}"}
    listing = list_objects(client, API, query)
    if not listing.get("items"):
        return
    with Watcher(client, API, query, initial=listing) as watcher:
        try:
            wait_until(watcher, lambda: True if not watcher.objects else None, timeout,
                       lambda: f"NodeMaintenance {name} to go")
        except WaitTimeout:
            raise RefusedError(f"deleted, but still there after {timeout:g} s: {finalizer_advice(name)}",
                               maintenance=name) from None


def summary(nm: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """What an operator looks at first: name, phase, progress, pending pods, last error."""
    if nm is None:
        return None
    status = nm.get("status") or {}
    return {
        "name": nm["metadata"]["name"],
        "nodeName": nm.get("spec", {}).get("nodeName"),
        "reason": nm.get("spec", {}).get("reason", ""),
        "phase": status.get("phase", ""),
        "drainProgress": status.get("drainProgress", 0),
        "totalpods": status.get("totalpods"),
        "evictionPods": status.get("evictionPods"),
        "pendingPods": status.get("pendingPods", []),
        "lastError": status.get("lastError", ""),
        "lastUpdate": status.get("lastUpdate", ""),
        "created": nm["metadata"].get("creationTimestamp", ""),
        "mode": (nm["metadata"].get("annotations") or {}).get(MODE_ANNOTATION, ""),
        "migrations": status.get("migrations") or [],
        "drainBatch": status.get("drainBatch", ""),
        "skippedPods": status.get("skippedPods") or [],
    }


def progress_line(node: str, nm: Optional[Dict[str, Any]], elapsed: float) -> str:
    """One line on a running drain, for the playbook output: node, drainProgress, pending pods."""
    if nm is None:
        return f"{node}: draining for {elapsed:.0f} s (no NodeMaintenance to read progress from)"
    status = nm.get("status") or {}
    pending = status.get("pendingPods") or []
    line = f"{node}: drainProgress {status.get('drainProgress', 0)}%, {len(pending)} pending pod(s)"
    if status.get("drainBatch"):  # drain rules: the order batch being drained
        line += f" ({status['drainBatch']})"
    if pending:
        line += ": " + ", ".join(pending)
    moving = migration_lines(status.get("migrations") or [])
    if moving:
        line += "; " + "; ".join(moving)
    elif status.get("lastError"):
        line += "; last error: " + status["lastError"]
    return line + f" ({elapsed:.0f} s)"


IN_FLIGHT = ("queued", "migrating")


def migration_lines(migrations: List[Dict[str, Any]], now: Optional[datetime] = None) -> List[str]:
    """``vm-order-processing: migrating, phase TargetReady, 40 s`` for each KubeVirt migration
    the drain is waiting for (status ``migrations``, written by workflows/migrations.py)."""
    now = now or datetime.now(timezone.utc)
    lines = []
    for m in migrations:
        if m.get("state") not in IN_FLIGHT:
            continue
        line = f"{m.get('vmi')}: {m.get('state')}"
        if m.get("phase"):
            line += f", phase {m['phase']}"
        started = parse_time(m.get("started") or "")
        if started is not None and m.get("state") == "migrating":
            line += f", {max(0, (now - started).total_seconds()):.0f} s"
        lines.append(line)
    return lines
