"""The Node as read and written: one read (a node that is not there is NodeGone), and
``apply``, which takes a node to the state model/node_state.py plans in one JSON Patch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from ..api import paths
from ..api.client import Client
from ..errors import ApiError, ConcurrentUpdateError, NotFound, RefusedError, UnprocessableEntity
from ..model import validation
from ..model.node_state import Plan, Wanted, plan, view
from ..model.taints import MAX_ATTEMPTS, is_test_failure, validate_taints


class NodeGone(RefusedError):
    """The node is not in the cluster (never was, or was deleted during its maintenance)."""


def read_node(client: Client, name: str) -> Dict[str, Any]:
    validation.node_name(name)  # '' or '..' would read another URL (/api/v1/nodes/, /api/v1)
    try:
        return client.get(paths.node(name))
    except NotFound:
        raise NodeGone(f'node "{name}" not found in cluster') from None


PAGE = 500  # nodes a page when listing them (a topology budget's count)


def list_nodes(client: Client, label_selector: str = "") -> List[Dict[str, Any]]:
    """Every node matching ``label_selector`` ('' every node), read page by page."""
    items: List[Dict[str, Any]] = []
    token = ""
    while True:
        query: Dict[str, Any] = {"limit": PAGE}
        if label_selector:
            query["labelSelector"] = label_selector
        if token:
            query["continue"] = token
        page = client.get(paths.NODES, query)
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


@dataclass
class Applied:
    before: Dict[str, Any]  # the node as first read (view)
    after: Dict[str, Any]  # as written, or as it would be in check mode
    node: Dict[str, Any]  # the node the API server returned (as read when nothing was written)
    changed: bool
    held: List[str]


Want = Union[Wanted, Callable[[Dict[str, Any]], Wanted]]


def apply(client: Client, name: str, want: Want, node: Optional[Dict[str, Any]] = None,
          before_write: Optional[Callable[[int], None]] = None) -> Applied:
    """Take the node to ``want`` (a Wanted, or a function of the node as read) in one request.

    A patch refused because its ``test`` failed (someone else wrote the node meanwhile) is
    planned again from a new read, up to MAX_ATTEMPTS times. ``before_write`` is called
    before each write (tests use it to race a writer).
    """
    node = node or read_node(client, name)
    first: Optional[Plan] = None
    for attempt in range(MAX_ATTEMPTS):
        wanted = want(node) if callable(want) else want
        validate_taints(wanted.add + wanted.remove)
        current = plan(node, wanted)
        first = first or current
        if not current.changed:
            return Applied(first.before, current.after, node, attempt > 0, current.held)
        if client.dry_run:
            return Applied(first.before, current.after, node, True, current.held)
        if before_write:
            before_write(attempt)
        try:
            node = client.patch(paths.node(name), current.ops, "json")
            return Applied(first.before, view(node), node, True, current.held)
        except UnprocessableEntity as exc:
            if not is_test_failure(exc):  # the API server refused the change itself: say why, as it did
                raise ApiError(exc.status, exc.reason, f"the API server refused the change of node {name}: "
                               f"{exc.server_message or exc.reason}", "PATCH", paths.node(name), exc.body) from None
            node = read_node(client, name)  # someone else wrote the node: start from theirs
    raise ConcurrentUpdateError(
        f"node {name} kept changing while we wrote its taints and cordon ({MAX_ATTEMPTS} attempts); "
        "another controller is writing them: find it, then run again")
