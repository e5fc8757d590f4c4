"""The run's heartbeat: a small process on the controller that lives exactly as long as the run.

Every ``RENEW_EVERY`` seconds it lists the lease namespace once: that one list tells whether
the run lease is still there and the run's, and which node leases and maintenance slots the
run holds (annotated ``nmo.maintenance/run``). It renews each of them, the run lease
included, only when it is due: once half of its duration is gone (and never later than three
beats before it lapses; the run lease every second beat), so a work hook may take hours
without its leases lapsing, and a quiet run costs one list a beat and one renewal every
second beat. It watches the
``ansible-playbook`` process (PID and start time, checked every second): when that process
is gone, killed or finished, it deletes the run lease at once, which tells every other run
and every module still waiting for this run that the run is over, and exits. If the
controller's host dies with it, the run lease lapses ``RUN_LEASE_DURATION`` seconds later.

A lease it cannot renew because the API server is away is renewed when the server is back,
if nobody took it meanwhile. While it cannot renew, it says why (credentials refused, 401;
forbidden, 403; no connection) in a local note the run's modules read (``heartbeat_note``:
a warning on the console, the cause in the failure that follows) and in the lastError of
the run's NodeMaintenances. A 401 is first answered by the client itself, which obtains
the credentials again once (client.py).

With an Alertmanager (docs/design.md §17.2) or notification targets (§17.1), each beat also
lists the NodeMaintenances once (``Watches``): the silences they name are extended once half
of them is gone (silences.Extender), and a node held back for longer than the run's
``blocked_after`` gets one node_blocked notification (notify.BlockWatch). Neither ever stops
the beat: what fails there is tried again at the next one.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional

from ..api import webhook
from ..api.client import Client, ConnectionOptions, connect, forget_clients
from ..errors import NmoError
from ..model import leases, renewal
from ..stores import leases as lease_store
from ..stores import maintenance
from . import heartbeat_note, leftovers, notify, run, silences, waiting


def due(lease: leases.Lease, now: Any, left: Optional[float] = None) -> bool:
    """Less than ``left`` seconds to live (default half its duration), or it lapses within
    three beats (renewal.margin): a lease of the shortest duration is renewed every beat."""
    spec = lease.get("spec") or {}
    expires = leases.expiry(lease)
    duration = int(spec.get("leaseDurationSeconds") or 0)
    margin = renewal.margin(duration) if left is None else max(left, 3 * run.RENEW_EVERY)
    return expires is not None and duration > 0 and expires - now <= timedelta(seconds=margin)


def run_lease_due(lease: leases.Lease, now: Any, duration: int) -> bool:
    """The run lease every second beat: it tells other runs this one is alive, so it keeps
    all but two beats of its duration ahead (40 s of 60) for an API server that is away."""
    return due(lease, now, duration - 2 * run.RENEW_EVERY)


def renew_held(client: Client, run_id: str, namespace: str, seen: Optional[List[leases.Lease]] = None) -> int:
    """Renew the leases of ``run_id`` (not its run lease) that are due; how many were renewed.
    ``seen``: the namespace's leases as just listed (listed here when not given)."""
    renewed = 0
    now = client.server_now()
    for lease in lease_store.list_leases(client, namespace) if seen is None else seen:
        if run.run_of(lease) != run_id or lease["metadata"]["name"] == run.lease_name(run_id):
            continue
        if due(lease, now) and run.renew(client, lease, leases.holder(lease)) is not None:
            renewed += 1
    return renewed


def beat(client: Client, run_id: str, namespace: str, duration: int) -> bool:
    """One beat: one list of the lease namespace, then the renewals that are due (the run
    lease's, the leases it holds); False when the run is over (the run lease was deleted or
    taken by someone else)."""
    seen = lease_store.list_leases(client, namespace)
    name = run.lease_name(run_id)
    current = leases.named(seen, name)
    if current is None or leases.holder(current) != run_id:
        return False
    if run_lease_due(current, client.server_now(), duration) and run.renew(client, current, run_id, duration) is None:
        again = run.read_lease(client, run_id, namespace)
        return again is not None and leases.holder(again) == run_id  # a conflict: next beat
    renew_held(client, run_id, namespace, seen)
    return True


class Watches:
    """What a beat does beyond the leases, over one list of the NodeMaintenances."""

    def __init__(self, alertmanager: Optional[Dict[str, Any]] = None, notify_params: Optional[Dict[str, Any]] = None
                 ) -> None:
        self.extender = silences.Extender(alertmanager) if alertmanager and alertmanager.get("url") else None
        targets = list((notify_params or {}).get("targets") or [])
        after = (notify_params or {}).get("blocked_after")
        self.targets = targets
        self.report = (notify_params or {}).get("report")
        self.policy = webhook.Policy(timeout=float((notify_params or {}).get("timeout") or 5.0))
        self.blocks = notify.BlockWatch(targets, float(after), self.policy) if targets and after else None

    def __bool__(self) -> bool:
        return self.extender is not None or self.blocks is not None or bool(self.targets)

    def finish(self, run_id: str, why: str) -> None:
        """The run is over: run_finished to the targets (the heartbeat is the one part of the
        run that outlives a failed playbook)."""
        if self.targets:
            notify.finished(self.targets, run_id, why, self.report, self.policy)

    def beat(self, client: Client, run_id: str) -> None:
        items = maintenance.list_all(client)
        if self.extender is not None:
            self.extender.beat(client, run_id, items)
        if self.blocks is not None:
            self.blocks.beat(run_id, items, run.run_of)


def loop(client: Client, run_id: str, anchor_alive: Callable[[], bool], namespace: str = leases.LEASE_NAMESPACE,
         duration: int = run.RUN_LEASE_DURATION, every: float = run.RENEW_EVERY,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
         watches: Optional[Watches] = None, tracker: Optional[leftovers.Tracker] = None) -> str:
    """Beat until the anchor dies or the run lease is gone; returns why it stopped. With a
    ``tracker``, the anchor's workers are noted every second, and what they left when the
    anchor died is ended before the run lease is deleted (workflows/leftovers.py)."""
    why = _loop(client, run_id, anchor_alive, namespace, duration, every, sleep, clock, watches, tracker)
    if watches:
        watches.finish(run_id, why)
    return why


def _loop(client: Client, run_id: str, anchor_alive: Callable[[], bool], namespace: str, duration: int,
          every: float, sleep: Callable[[float], None], clock: Callable[[], float], watches: Optional[Watches],
          tracker: Optional[leftovers.Tracker] = None) -> str:
    trouble = Trouble(run_id)
    try:
        return _beats(client, run_id, anchor_alive, namespace, duration, every, sleep, clock, watches, trouble,
                      tracker)
    finally:
        trouble.over()


class Trouble:
    """The heartbeat cannot renew: said once a cause (in the local note the run's modules read,
    docs/design.md §6.2, and in the lastError of the run's NodeMaintenances), cleared when a
    beat works again."""

    def __init__(self, run_id: str, now: Callable[[], float] = time.time) -> None:
        self.run_id = run_id
        self.now = now
        self.since: Optional[float] = None
        self.told = ""

    def failed(self, client: Client, error: BaseException) -> None:
        why = heartbeat_note.cause(error)
        if self.since is None:
            self.since = self.now()
        heartbeat_note.write(self.run_id, self.since, why)
        kind = why.split(":", 1)[0]
        if kind != self.told:
            self.told = kind
            tell_maintenances(client, self.run_id, f"run {self.run_id}: " + heartbeat_note.sentence(
                (self.since, why), self.now()))

    def over(self) -> None:
        if self.since is not None or self.told:
            heartbeat_note.clear(self.run_id)
        self.since, self.told = None, ""


def tell_maintenances(client: Client, run_id: str, message: str) -> int:
    """Put ``message`` in the lastError of the run's NodeMaintenances, as far as the API
    server lets us (a 403 on leases may still allow it; no connection allows nothing)."""
    told = 0
    try:
        for nm in maintenance.list_all(client):
            if run.run_of(nm) == run_id:
                maintenance.update_status(client, nm, {"lastError": message[:1000]})
                told += 1
    except NmoError:
        pass
    return told


def _beats(client: Client, run_id: str, anchor_alive: Callable[[], bool], namespace: str, duration: int,
           every: float, sleep: Callable[[float], None], clock: Callable[[], float], watches: Optional[Watches],
           trouble: Trouble, tracker: Optional[leftovers.Tracker] = None) -> str:
    next_beat = clock()
    while True:
        if not anchor_alive():
            # docs/design.md §6.2: a SIGKILLed ansible-playbook leaves its workers running (each
            # leads a session of its own); what they run is ended before the run is released, so
            # no rerun's hook overlaps a hook of this run
            _ended(tracker, client)
            try:  # the run's waiting taints (docs/design.md §3.7): a failed or interrupted run ends here
                if waiting.noted(client, run_id, namespace):
                    waiting.clear(client, run_id)
            except NmoError:
                pass  # the next run's start removes them
            try:
                run.stop(client, run_id, namespace)
            except NmoError:
                pass  # the lease lapses by itself
            if tracker is not None:
                tracker.forget()
            return "controller gone"
        _noted(tracker)
        if clock() >= next_beat:
            worked = False
            try:
                if not beat(client, run_id, namespace, duration):
                    return "run lease gone"
                next_beat = clock() + every
                worked = True
                trouble.over()
            except NmoError as error:
                next_beat = clock() + renewal.RETRY_PAUSE  # the API server is away: try again soon
                trouble.failed(client, error)
            if worked and watches and (watches.extender is not None or watches.blocks is not None):
                try:
                    watches.beat(client, run_id)
                except NmoError:
                    pass  # the NodeMaintenances could not be listed: the next beat lists them again
        sleep(1.0)


def _noted(tracker: Optional[leftovers.Tracker]) -> None:
    if tracker is None:
        return
    try:
        tracker.note()
    except Exception:  # pylint: disable=broad-except
        pass  # /proc unreadable for a moment: noted at the next second


def _ended(tracker: Optional[leftovers.Tracker], client: Client) -> None:
    if tracker is None:
        return
    try:
        tracker.controller_gone(client)
    except Exception:  # pylint: disable=broad-except
        pass  # the next run's start on this controller ends what is left (leftovers.settle_gone)


def anchor_check(pid: int, started: Optional[str]) -> Callable[[], bool]:
    """Whether ``ansible-playbook`` still runs; exited and not yet reaped (a zombie) is gone."""
    return lambda: started is not None and leftovers.anchor_runs(pid, int(started))


def daemonize_and_loop(options: ConnectionOptions, run_id: str, anchor_pid: int, namespace: str,
                       duration: int, alertmanager: Optional[Dict[str, Any]] = None,
                       notify_params: Optional[Dict[str, Any]] = None) -> int:
    """Fork a detached heartbeat process (returns its PID in the caller)."""
    started = run.process_start(anchor_pid)
    read_end, write_end = os.pipe()
    first = os.fork()
    if first:
        os.close(write_end)
        os.waitpid(first, 0)
        with os.fdopen(read_end, "rb") as pipe:
            data = pipe.read()
        return int(data or b"0")
    # first child: a new session, then a grandchild that init adopts (never a zombie)
    try:
        os.close(read_end)
        os.setsid()
        second = os.fork()
        if second:
            os.write(write_end, str(second).encode())
            os._exit(0)
        os.close(write_end)
        _detach()
        forget_clients()  # never share the parent's connections
        client = connect(options, pool_size=2)
        # A request may retry for a beat, not a minute (client.py): the loop must keep
        # looking at the controller process while the API server is away.
        client.retry = replace(client.retry, budget=renewal.BEAT_RETRY_BUDGET)
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        if started is not None:  # a controller gone before the fork: nothing to beat for
            tracker = leftovers.Tracker(run_id, anchor_pid, started, client.host)
            # between two looks it waits on the controller's exit, not a plain second: the run
            # lease goes the moment ansible-playbook does (workflows/ending_runs.py)
            loop(client, run_id, anchor_check(anchor_pid, started), namespace, duration,
                 sleep=leftovers.exit_waiter(anchor_pid), watches=Watches(alertmanager, notify_params),
                 tracker=tracker)
    except BaseException:  # pylint: disable=broad-except
        pass
    os._exit(0)


def _detach() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, 65536)  # the worker's pipes to ansible-playbook among them
    os.chdir("/")


def describe(info: Dict[str, Any]) -> str:
    return f"run {info['run']} (heartbeat PID {info.get('heartbeat_pid')})"
