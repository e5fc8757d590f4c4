"""One drain between its list and its end (docs/design.md §4.7.2, §4.7.3): evictions on a
bounded pool, one wait on the watches, and at each look the answers taken, the pods' holds
named, the batches and returning pods followed, KubeVirt's migrations stepped. One thread
owns it; its collaborators each keep one part of its state:

| part | file |
| --- | --- |
| the requests and their answers | ``drain_requests.py`` |
| the watches: pods, Node, NodeMaintenance | ``drain_watch.py`` |
| the status fields and the events | ``drain_status.py`` |
| the order batches | ``drain_batches.py`` |
| the holds and the budgets' reasons | ``drain_holds.py`` |
| surge-first | ``drain_surge.py`` |
| the pods that come back | ``drain_returning.py`` |
| KubeVirt's live migrations | ``migrations.py`` |
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional, Set, Tuple

from ..api.client import Client
from ..api.waiter import object_key, wait_until
from ..errors import ApiError, WaitTimeout
from ..model import drain_rules
from ..model.pod_filters import COMPLETE, DELETE, EVICT, SKIP, WAIT, PodPlan, SelectionOptions
from ..model.tracking import (
    EVACUATING,
    FATAL,
    REFUSED,
    Outcome,
    PendingPod,
    Tracker,
    group,
    initial_counts,
    status_fields,
)
from ..stores.events import DRAIN, DRAIN_ERROR
from . import migrations, run
from .drain_batches import OrderBatches
from .drain_holds import Holds
from .drain_options import DrainOptions
from .drain_requests import DrainRequests
from .drain_returning import RETURNING, ReturningPods
from .drain_status import DrainEvents, StatusKeeper
from .drain_surge import Surge
from .drain_watch import DrainWatch

TICK = 0.2  # seconds between looks at retries and status while no pod event arrives


class DrainRun:
    """The state of one drain between its list and its end (one thread owns it)."""

    def __init__(self, client: Client, opts: DrainOptions, nm: Optional[Dict[str, Any]],
                 listing: Dict[str, Any], plans: List[PodPlan], warnings: List[str],
                 node: Optional[Dict[str, Any]] = None, selection: Optional[SelectionOptions] = None) -> None:
        self.client = client
        self.opts = opts
        self.plans = plans
        self.blocker = ""  # what kept the drain from finishing, when it ran out of time (model/blocked.py)
        self.tracker = Tracker.for_drain(plans, opts)
        held = next((p.last_error for p in self.tracker.pending.values() if p.blocked or p.action == COMPLETE), "")
        self.tracker.note(held)  # a do-not-disrupt pod, or one waited for, says so from the start
        self.batches = OrderBatches(self.tracker)
        self.rule_skipped = [p.brief() for p in plans if p.action == SKIP and p.rule]
        self.watch = DrainWatch(client, opts.node, listing, node, nm)
        self.requests = DrainRequests(client, opts.grace_period, self.watch.pods.wake)
        self.status = StatusKeeper(client, nm, warnings)
        self.events = DrainEvents(client, self.status)
        self.holds = Holds(client, opts.node, self.watch, self.events.record)
        self.surge = Surge(client, self.watch, self.events.record)
        self.returning = ReturningPods(client, opts, self.tracker, selection or opts.selection(), self.watch,
                                       self.events.record, listing, plans)
        self.run_guard = run.guard_for(client, opts.run_id, node=opts.node, held=opts.held_leases)
        self.fallen_back: Set[str] = set()  # the pods whose deletion despite their budget was announced
        status = (nm or {}).get("status") or {}
        self.total, self.eviction_pods = initial_counts(status, len(self.tracker.pending), len(listing["items"]))
        self.kubevirt: Optional[migrations.Migrations] = None
        if opts.kubevirt == migrations.MIGRATE:
            actions = {key: pod.action for key, pod in self.tracker.pending.items()}
            evicting = [p for p in listing["items"] if actions.get(object_key(p)) == EVICT]
            self.kubevirt = migrations.for_drain(client, opts.kubevirt, opts.node, opts.maintenance, evicting,
                                                 self.watch.waitable, self.events.record)

    # -- status and events --------------------------------------------------------------------
    def fields(self, finished: bool = False, error: Optional[str] = None) -> Dict[str, Any]:
        last_error = error if error is not None else self.tracker.current_error()
        wanted = status_fields(self.total, self.eviction_pods, self.tracker.pending.values(), last_error, finished)
        if self.kubevirt is not None:
            wanted["migrations"] = self.kubevirt.status()
        if self.batches.several:
            wanted["drainBatch"] = self.batches.status_text(finished)
        if self.rule_skipped:
            wanted["skippedPods"] = self.rule_skipped
        return wanted

    def fatal_text(self) -> str:
        """The errors that stopped the drain: those of pods grouped (one per distinct error,
        counted), then the others (pods that keep coming back) once each."""
        per_pod = {message for _key, message in self.tracker.fatal_pods}
        others = [self.returning.came_back_message() if m == RETURNING else m
                  for m in dict.fromkeys(m for m in self.tracker.fatal if m not in per_pod)]
        return "; ".join(([group(self.tracker.fatal_pods)] if self.tracker.fatal_pods else []) + others)

    def refusal_event(self, pod: PendingPod, outcome: Outcome) -> str:
        if outcome.kind == FATAL:
            return outcome.message
        why = f" {pod.budget_note}." if pod.budget_note else ""
        return (f"{outcome.message}{why} Pod {pod.key} stays pending; retried every "
                f"{self.tracker.retry_interval(outcome.kind):g} s.")

    # -- requests and their answers ------------------------------------------------------------
    def submit_due(self) -> None:
        self.batches.announce(self.opts.node, self.events.record)
        for pod in self.tracker.due(time.monotonic()):
            if pod.fallback and pod.key not in self.fallen_back:
                self.fallen_back.add(pod.key)
                self.events.record(DRAIN, f"Deleting pod {pod.key} although its PodDisruptionBudget refuses the "
                                          f"eviction: refused {self.tracker.fallback_for()}", pod.key, "Warning")
            self.requests.submit(pod.plan, pod.action)

    def take_answers(self, with_events: bool = True) -> None:
        now = time.monotonic()
        for key, outcome in self.requests.answers():
            pod = self.tracker.answer(key, outcome, now)
            if pod is not None and with_events:
                self.heard(key, pod, outcome, now)

    def heard(self, key: str, pod: PendingPod, outcome: Outcome, now: float) -> None:
        """What an answer the tracker took makes the drain say: the VM's migration speaks for
        a refused virt-launcher pod; otherwise a refusal carries its budget's (and surge's)
        note in a ``DrainError`` event, and an evacuation a ``Drain`` event."""
        if outcome.kind == REFUSED and self.kubevirt is not None and self.kubevirt.refused(pod):
            self.tracker.last_error = pod.last_error  # the VM's migration speaks for its pod
            return
        if outcome.kind == REFUSED:
            pod.budget_note = self.holds.budget_note(pod, outcome.message)
            if self.opts.surge and not self.surge.launcher(pod):
                pod.budget_note = "; ".join(filter(None, (pod.budget_note, self.surge.note(pod, now))))
        if outcome.kind in (REFUSED, FATAL):
            self.events.record(DRAIN_ERROR, self.refusal_event(pod, outcome), key)
        if outcome.kind == EVACUATING:
            self.events.record(DRAIN, f"{outcome.message}. Asked again every "
                                      f"{self.tracker.retry_interval(EVACUATING):g} s until it is gone", key)

    # -- the wait ------------------------------------------------------------------------------
    def check(self) -> Optional[bool]:
        """The wait's look: True when the drain is done, False when it must stop, None to wait on."""
        if self.watch.maintenance_ended() or self.watch.node_deleted():
            return False
        # no eviction for a run that is gone, nor for a maintenance another run adopted
        self.run_guard.check()
        if self.watch.maintenance_watcher is not None:
            self.run_guard.check_maintenance(self.watch.maintenance())
        self.take_answers()
        self.tracker.settle(self.watch.pods.objects, time.time())
        self.holds.look(self.tracker, time.time())
        self.look_at_blocked()
        self.returning.look()
        if self.tracker.fatal and not self.tracker.in_flight():
            return False
        if self.kubevirt is not None:
            self.kubevirt.step(self.tracker.pending, time.monotonic())
            note = self.kubevirt.take_note()
            if note is not None:
                self.tracker.note(note)
            if self.kubevirt.busy():  # a migration off the node is not over before KubeVirt says so
                return None
        if self.tracker.pending:
            return None
        if not self.returning.verify_empty():  # pods came back: the drain goes on with them
            return None if not self.tracker.fatal else False
        return True

    def look_at_blocked(self) -> None:
        """Pods whose do-not-disrupt annotation went are evicted in their batch from now on."""
        if not any(p.blocked for p in self.tracker.pending.values()):
            return
        for pod in self.tracker.unblock(self.watch.pods.objects, drain_rules.do_not_disrupt):
            self.events.record(DRAIN, f"Pod {pod.key} is no longer annotated do-not-disrupt: evicted in its batch",
                               pod.key)
        if not any(p.blocked or p.action == COMPLETE for p in self.tracker.pending.values()):
            self.tracker.note("")

    def run(self) -> Tuple[bool, str]:
        """Evict and wait; (finished, error message)."""
        if not self.tracker.pending:
            self.status.offer(self.fields(finished=True), time.monotonic(), force=True)
            return True, ""
        # The first progress goes out after a second, as every later one: a drain done
        # sooner writes its status once, when it ends.
        self.status.throttle.last_time = time.monotonic()
        self.announce()
        error = self.evict_and_wait()
        if error:
            self.events.record(DRAIN_ERROR, error)
            self.status.offer(self.fields(error=error), time.monotonic(), force=True)
            return False, error
        self.status.offer(self.fields(finished=True), time.monotonic(), force=True)
        return True, ""

    def announce(self) -> None:
        """The ``Drain`` event that says what the drain will do."""
        counts = {a: sum(1 for p in self.plans if p.action == a) for a in (EVICT, DELETE, WAIT, SKIP, COMPLETE)}
        orders = self.batches.orders
        extra = ""
        if len(orders) > 1:
            extra += f"; {len(orders)} order batches ({', '.join(str(o) for o in orders)}), lowest first"
        if counts[COMPLETE]:
            extra += f"; {counts[COMPLETE]} waited for until they complete (wait-completed)"
        blocked = [p.plan.key for p in self.tracker.pending.values() if p.blocked]
        if blocked:
            extra += f"; {len(blocked)} annotated do-not-disrupt, never evicted: {', '.join(sorted(blocked)[:5])}"
        self.events.record(DRAIN, f"Drain node {self.opts.node}: {counts[EVICT]} pods to evict, {counts[DELETE]} to "
                                  f"delete, {counts[WAIT]} already terminating, {counts[SKIP]} skipped" + extra)

    def evict_and_wait(self) -> str:
        """The requests and the wait until the pods are gone; the error that stopped them, or ""."""
        self.requests.open(self.opts.requests_at_once())  # pods may come back: not bounded by today's
        self.watch.waitable.start()
        pending = self.tracker.describe_pending
        try:
            self.run_guard.check(force=True)  # no eviction for a node whose leases lapsed since the begin
            self.submit_due()

            def tick() -> None:
                self.submit_due()
                self.status.offer(self.fields(), time.monotonic())

            finished = wait_until(self.watch.waitable, self.check, self.opts.timeout, pending, tick, TICK)
            return "" if finished else self.stopped()
        except WaitTimeout:
            self.blocker = f"drain timed out after {self.opts.timeout:g} s; pending: {pending()}"
            return f"drain of node {self.opts.node} timed out after {self.opts.timeout:g} s; still pending: {pending()}"
        except run.LeaseLost as exc:  # the run is alive, but this node's leases are not its own any more
            return f"drain of node {self.opts.node} stopped: {exc.message}. Not evicted: {pending()}"
        except ApiError as exc:  # the watch failed for good (403, say)
            return f"drain of node {self.opts.node} stopped: {exc.message}. Still pending: {pending()}"
        finally:
            self.watch.waitable.close()
            self.requests.close()
            self.take_answers(with_events=False)

    def stopped(self) -> str:
        """Why the wait ended before the pods were gone: the node deleted, the maintenance ended
        elsewhere, or a fatal answer (or pods that keep coming back)."""
        pending = self.tracker.describe_pending()
        if self.watch.node_deleted():
            return (f"drain of node {self.opts.node} stopped: the node was deleted (its Node object is gone "
                    f"from the cluster; its pods go with it). Not evicted: {pending}")
        if self.watch.maintenance_ended():
            self.status.nm = None
            return (f"drain of node {self.opts.node} stopped: its NodeMaintenance was deleted, so the "
                    f"maintenance was ended elsewhere. Not evicted: {pending}")
        return f"drain of node {self.opts.node} stopped: " + self.fatal_text() + f". Still pending: {pending}"
