"""The Node's lifecycle conditions as read and written (model/node_conditions.py; docs/design.md
§4.11): whether the API server knows them (its version, then its gate in ``/metrics``, read as
a stream that stops at the gate's line), and one strategic merge patch of ``nodes/status`` a
change. Never a failure of the maintenance: what cannot be read or written is a warning."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..api import paths, server
from ..api.client import Client, iter_lines
from ..errors import ApiError
from ..model import node_conditions as model

METRICS = "/metrics"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def gate_from_metrics(client: Client) -> Tuple[Optional[bool], str]:
    """(the gate as ``/metrics`` says, why it could not be read)."""
    try:
        resp = client.stream(METRICS, {}, read_timeout=30)
    except ApiError as exc:
        return None, f"GET /metrics answered {exc.status} {exc.reason}"
    try:  # read up to the gate's line (the whole text is megabytes), then the connection is dropped
        return model.gate_in_metrics(line.decode("utf-8", "replace") for line in iter_lines(resp)), ""
    finally:
        resp.close()
        resp.release_conn()


def support(client: Client) -> Tuple[bool, str]:
    """(written on this server?, why not): /version, and /metrics only on 1.37 or later."""
    try:
        version = server.read(client)
    except ApiError as exc:
        return False, f"GET /version answered {exc.status} {exc.reason}"
    if version.minor is None or version.minor < model.FIRST:
        return model.support(version.minor, None)
    gate, error = gate_from_metrics(client)
    return model.support(version.minor, gate, error)


def write(client: Client, node: str, put: Iterable[Dict[str, Any]] = (), remove: Iterable[str] = ()) -> List[str]:
    """One patch of ``nodes/status`` (none in a dry run or with nothing to change); the
    warnings (a refusal is one, never a failure)."""
    body = model.patch(put, remove)
    if not body["status"]["conditions"] or client.dry_run:
        return []
    try:
        client.patch(paths.node(node) + "/status", body, "strategic")
    except ApiError as exc:
        return [f"the node lifecycle conditions of node {node} were not written: {exc.message}"]
    return []


def set_maintenance(client: Client, node: Dict[str, Any], reason: str, maintenance: str,
                    known: Optional[Tuple[bool, str]] = None) -> Dict[str, Any]:
    """The begin: ``MaintenanceInProgress=True`` where the server knows it (not again when ours
    is there: a rerun writes nothing). The result's ``active`` tells the drain to write its own.
    ``known``: the support as the run already found it (its run lease); otherwise read here,
    and the result's ``support`` says it, for the caller to keep."""
    name = node.get("metadata", {}).get("name", "")
    if model.maintained(node):
        return {"active": True, "changed": False, "set": [], "warnings": []}
    supported, why = known if known is not None else support(client)
    found = {} if known is not None else {"support": (supported, why)}
    if not supported:
        return {"active": False, "changed": False, "set": [], "why_not": why, "warnings": [], **found}
    put = [model.condition(model.MAINTENANCE, model.REASON_MAINTENANCE, model.begin_message(reason, maintenance),
                           now())]
    warnings = write(client, name, put)
    return {"active": not warnings, "changed": not warnings, "set": [model.MAINTENANCE] if not warnings else [],
            "warnings": warnings, **found}


def drain_started(client: Client, node: str) -> List[str]:
    """The drain's start: ``DrainInProgress=True`` (a ``Drained`` of an earlier drain goes)."""
    put = [model.condition(model.DRAINING, model.REASON_DRAINING, f"drain of node {node} started", now())]
    return write(client, node, put, [model.DRAINED])


def drained(client: Client, node: str, message: str) -> List[str]:
    """The drain's end: ``Drained=True`` with what it did, ``DrainInProgress`` removed."""
    put = [model.condition(model.DRAINED, model.REASON_DRAINED, message, now())]
    return write(client, node, put, [model.DRAINING])


def clear(client: Client, node: Dict[str, Any]) -> Dict[str, Any]:
    """The end and the rollback: every lifecycle condition of ours removed, in one patch; none
    written (and no request) when the node carries none."""
    name = node.get("metadata", {}).get("name", "")
    found = model.ours(node)
    warnings = write(client, name, remove=found)
    return {"removed": found if not warnings else [], "changed": bool(found) and not warnings, "warnings": warnings}
