"""Waiting for a node to be Ready: one watch on that node, with a deadline.

The role waits for this after the work hooks (a node that was rebooted or upgraded comes
back NotReady for a while). The kubelet's status updates arrive as watch events, so the wait
ends at the first one that says Ready, and costs one list and one watch however long it
lasts; a node already Ready costs the list alone.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

from ..api import paths
from ..api.client import Client
from ..api.waiter import Watcher, list_objects, wait_until
from ..errors import WaitTimeout
from ..model import validation
from ..model.marks import is_ready
from .nodes import NodeGone


def ready_condition(node: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    for cond in (node or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def not_ready_text(name: str, node: Optional[Dict[str, Any]]) -> str:
    """What an operator needs to know about a node that is not Ready (yet)."""
    if node is None:
        return f"node {name} was deleted while we waited for it to be Ready"
    cond = ready_condition(node)
    if cond is None:
        return f"node {name} reports no Ready condition (is its kubelet running?)"
    said = ", ".join(f"{k} {cond[k]}" for k in ("reason", "message", "lastHeartbeatTime") if cond.get(k))
    return f"node {name} is not Ready (Ready={cond.get('status', 'Unknown')}{': ' + said if said else ''})"


def wait_ready(client: Client, name: str, timeout: float,
               clock: Callable[[], float] = time.monotonic, guard: Optional[Any] = None) -> Dict[str, Any]:
    """The node once its Ready condition is True; WaitTimeout after ``timeout`` seconds,
    NodeGone (a RefusedError) when there is no such node or it is deleted meanwhile. A node Ready at
    once costs the one list; the watch starts from that list only when it is not.
    ``guard`` (run.Guard) is asked while the wait lasts: the run and its leases for the node."""
    validation.node_name(name)  # '' or '..' would list other nodes
    query = {"fieldSelector": f"metadata.name={name}"}
    listing = list_objects(client, paths.NODES, query)
    found = listing.get("items") or []
    if not found:
        # as everywhere a node is read; the role waits only for a node it has maintained
        raise NodeGone(f'node "{name}" not found in cluster: it was deleted (or never existed), so it cannot '
                       'become Ready')
    if is_ready(found[0]):
        return found[0]
    key = f"/{name}"
    with Watcher(client, paths.NODES, query, initial=listing) as watcher:
        def check() -> Optional[Dict[str, Any]]:
            if guard is not None:
                guard.check()  # at most every few seconds, one request
            node = watcher.objects.get(key)
            if node is None:
                raise NodeGone(not_ready_text(name, None))
            return node if is_ready(node) else None

        try:
            return wait_until(watcher, check, timeout, lambda: not_ready_text(name, watcher.objects.get(key)),
                              clock=clock)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}. Look at the node's kubelet: a work hook may have left it stopped or "
                              "still rebooting") from None
