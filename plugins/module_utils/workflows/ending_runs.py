"""Runs of this controller that are ending: their ``ansible-playbook`` is gone, and their
heartbeat is about to delete their run lease (it first ends what the run left running,
docs/design.md §6.2).

A command started the moment a run ended (``recover.yml`` after a failed run, as the failure's
last line prescribes; a rerun from a script or a workflow) would otherwise read that run lease
in the short time it is still valid and take the run for alive: it would refuse the run's
nodes ("in maintenance by run ..., which is alive"). Such a run is told by its run lease alone:
its controller annotation names this host and a process that no longer runs (or is a zombie),
its boot annotation this boot; and its heartbeat, as this user's record of the run names it
(workflows/leftovers.py), still runs. The command waits, on one watch of the lease namespace
and for at most ``ENDING_WAIT`` seconds, until those leases are gone. A lease whose heartbeat is
gone too, or still there after the wait, is left to lapse, as it always was.
"""

from __future__ import annotations

import socket
from datetime import datetime
from typing import Callable, List, Optional, Tuple

from ..api.client import Client
from ..api.waiter import Watcher, list_objects, wait_until
from ..errors import WaitTimeout
from ..model import leases
from ..stores import leases as lease_store
from . import leftovers, run

# the heartbeat's longest way to the deletion: the run's leftovers get SIGTERM, the grace,
# SIGKILL and its wait (workflows/leftovers.py), then the delete itself
ENDING_WAIT = leftovers.GRACE + leftovers.KILL_WAIT + 5.0

Running = Callable[[int, int], bool]  # (pid, start ticks): that process still runs


def controller_of(lease: leases.Lease) -> Optional[Tuple[str, int, int]]:
    """(host, pid, start ticks) of the process the run lease says its run lives in; None when it
    says none that can be read (an older release's lease, a hand-made one)."""
    note = ((lease.get("metadata") or {}).get("annotations") or {}).get(run.CONTROLLER_ANNOTATION) or ""
    host, _sep, rest = note.rpartition("/")
    host, _sep2, pid = host.rpartition("/")
    try:
        return (host, int(pid), int(rest)) if host else None
    except ValueError:
        return None


def ending_here(seen: List[leases.Lease], now: datetime, host: str, boot: str, running: Running,
                beating: Callable[[str], bool]) -> List[str]:
    """The names of the valid run leases in ``seen`` whose controller process was of this host
    and boot and runs no more, and whose heartbeat still runs (``beating``, by run id): runs
    whose heartbeat is deleting their lease right now. A heartbeat gone too (killed with the
    run, or another user's, whose record this user cannot read) deletes nothing: its lease is
    left to lapse, and nothing waits for it."""
    names = []
    for lease in seen:
        name = (lease.get("metadata") or {}).get("name") or ""
        if not name.startswith(run.RUN_LEASE_PREFIX) or not leases.is_valid(lease, now):
            continue
        controller = controller_of(lease)
        their_boot = ((lease["metadata"].get("annotations") or {}).get(run.BOOT_ANNOTATION) or "")
        if controller is None or controller[0] != host or not boot or their_boot != boot:
            continue  # another machine's run, or one that says too little to tell: alive
        if controller[2] and not running(controller[1], controller[2]) and beating(name[len(run.RUN_LEASE_PREFIX):]):
            names.append(name)
    return names


def settle(client: Client, namespace: str = leases.LEASE_NAMESPACE, seen: Optional[List[leases.Lease]] = None,
           timeout: float = ENDING_WAIT) -> Tuple[List[leases.Lease], List[str]]:
    """Wait until the ending runs of this controller are gone. (The leases of the namespace as
    they are after the wait, or ``seen`` when nothing was ending; the runs waited for.)"""
    listing = None
    if seen is None:
        listing = list_objects(client, lease_store.leases_path(namespace))
        seen = listing.get("items", [])
    ending = ending_here(seen, client.server_now(), socket.gethostname(), leftovers.boot_id(), leftovers.anchor_runs,
                         leftovers.beats)
    if not ending:
        return seen, []
    with Watcher(client, lease_store.leases_path(namespace), initial=listing) as watcher:
        def gone() -> Optional[bool]:
            names = {(o.get("metadata") or {}).get("name") for o in watcher.objects.values()}
            return True if not names & set(ending) else None
        try:
            wait_until(watcher, gone, timeout, lambda: f"the run lease(s) {', '.join(ending)} to be deleted")
        except WaitTimeout:
            pass  # their heartbeat died with the run: the leases lapse by themselves
        after = list(watcher.objects.values())
    return after, [name[len(run.RUN_LEASE_PREFIX):] for name in ending]
