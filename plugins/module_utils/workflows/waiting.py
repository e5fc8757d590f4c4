"""Waiting nodes repel pods (docs/design.md §3.7): the run's ``PreferNoSchedule`` taint on the
nodes still to be maintained, and its removal.

Every call reads the nodes once (one paginated list) and the lease namespace once (which
runs are alive), then writes one guarded patch per node that changes (stores/nodes.py):

* ``mark``: our taint on ``nodes``; a waiting taint of a run that is not alive (killed: its
  run lease lapsed or is gone) off every other node.
* ``clear``: our taint off every node (``nodes``: off those only); with ``dead_too`` a dead
  run's too (``recover.yml``, the heartbeat's last act).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set

from ..api import paths
from ..api.client import Client
from ..model import leases as lease_utils
from ..model import validation
from ..model.leases import LEASE_NAMESPACE
from ..model.node_state import Wanted
from ..model.taints import WAITING_ANY, waiting_run, waiting_taint
from ..stores import nodes
from ..stores.leases import list_leases
from ..stores.node_list import each_node
from . import run

# On the run lease once the run has tainted nodes: its heartbeat then clears them at its end
# (a run without the option costs its heartbeat no node list)
MARKED_ANNOTATION = "nmo.maintenance/waiting-taints"

Decide = Callable[[str, Optional[str]], Optional[Wanted]]


def alive_runs(client: Client, namespace: str = LEASE_NAMESPACE) -> Set[str]:
    return lease_utils.alive_run_ids(list_leases(client, namespace), client.server_now())


def _walk(client: Client, decide: Decide) -> Dict[str, List[str]]:
    """Apply ``decide(node name, the waiting run it carries)`` to every node; what changed."""
    done: Dict[str, List[str]] = {"tainted": [], "untainted": []}
    for node in each_node(client):
        name = node["metadata"]["name"]
        wanted = decide(name, waiting_run(node.get("spec", {}).get("taints") or []))
        if wanted is None:
            continue

        def again(read: Dict[str, Any], name: str = name) -> Wanted:  # a retry decides from its own read
            return decide(name, waiting_run(read.get("spec", {}).get("taints") or [])) or Wanted()

        try:
            applied = nodes.apply(client, name, again, node=node)
        except nodes.NodeGone:  # deleted since the list: nothing to do on it
            continue
        if applied.changed:
            done["tainted" if wanted.add else "untainted"].append(name)
    return done


def note_on_run_lease(client: Client, run_id: str, namespace: str = LEASE_NAMESPACE) -> None:
    lease = run.read_lease(client, run_id, namespace)
    if lease is None or client.dry_run:
        return
    if (lease["metadata"].get("annotations") or {}).get(MARKED_ANNOTATION) != "true":
        client.patch(paths.leases(namespace, lease["metadata"]["name"]),
                     {"metadata": {"annotations": {MARKED_ANNOTATION: "true"}}}, "merge")


def noted(client: Client, run_id: str, namespace: str = LEASE_NAMESPACE) -> bool:
    lease = run.read_lease(client, run_id, namespace)
    return (((lease or {}).get("metadata") or {}).get("annotations") or {}).get(MARKED_ANNOTATION) == "true"


def mark(client: Client, run_id: str, names: List[str]) -> Dict[str, List[str]]:
    """Our taint on ``names``; a dead run's off every other node."""
    validation.taints([waiting_taint(run_id)])
    if names:
        note_on_run_lease(client, run_id)
    ours, alive = set(names), alive_runs(client) | {run_id}

    def decide(name: str, carried: Optional[str]) -> Optional[Wanted]:
        if name in ours:
            return None if carried == run_id else Wanted(add=[waiting_taint(run_id)])
        if carried is not None and carried not in alive:
            return Wanted(remove=[dict(WAITING_ANY)])
        return None

    return _walk(client, decide)


def clear(client: Client, run_id: str = "", names: Optional[List[str]] = None,
          dead_too: bool = False) -> Dict[str, List[str]]:
    """Our taint (``run_id``'s) off every node, or off ``names``; with ``dead_too`` also the
    taint of any run that is not alive."""
    chosen = set(names) if names is not None else None
    alive = alive_runs(client) - {run_id} if dead_too else set()

    def decide(name: str, carried: Optional[str]) -> Optional[Wanted]:
        if carried is None or (chosen is not None and name not in chosen):
            return None
        if (run_id and carried == run_id) or (dead_too and carried not in alive):
            return Wanted(remove=[dict(WAITING_ANY)])
        return None

    return _walk(client, decide)
