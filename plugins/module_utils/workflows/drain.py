"""Drain a node: one list of its pods, evictions in parallel, one watch to see them go.

The pods are listed once (``fieldSelector=spec.nodeName``) and sorted by the filters of
``pod_filters``. Evictions (or deletions) go out on a bounded thread pool; their answers
come back to the one thread that owns the bookkeeping (``drain_tracking``). A single
watch on the node's pods, started from the list's resourceVersion so nothing is missed,
says when each pod is gone: deleted, or replaced by a pod of the same name and another
UID. A PodDisruptionBudget's refusal (429) keeps the pod pending; it is retried on the
waiter's tick, never bypassed unless ``delete_fallback_after`` says so. The drain returns
when the pods are gone, not when their evictions were accepted.
"""

from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any, Dict, List, Optional, Set, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher, list_objects, object_key, wait_until
from ..errors import ApiError, InputError, NmoError, NotFound, WaitTimeout
from ..model import drain_rules, returning, stuck_pods, surge, validation
from ..model.kubevirt import MODES as KUBEVIRT_MODES
from ..model.kubevirt import is_launcher
from ..model.marks import not_ready
from ..model.node_conditions import maintained
from ..model.pod_filters import (
    COMPLETE,
    DELETE,
    EVICT,
    REFUSE,
    SKIP,
    WAIT,
    PodPlan,
    SelectionOptions,
    classify,
    refusal_message,
)
from ..model.tracking import (
    EVACUATING,
    EVACUATION_RETRY,
    FATAL,
    REFUSED,
    RETRY,
    EventThrottle,
    Outcome,
    PendingPod,
    Throttle,
    Tracker,
    group,
    initial_counts,
    outcome_of,
    pending_pod,
    status_fields,
)
from ..stores import maintenance, workloads
from ..stores.events import DRAIN, DRAIN_ERROR, EventRecorder
from ..stores.node_conditions import drain_started
from ..stores.nodes import read_node
from ..stores.preflight_reads import namespace_labels
from . import dry_run, run
from . import migrations as kubevirt

PODS = paths.PODS
NODES = paths.NODES
TICK = 0.2  # seconds between looks at retries and status while no pod event arrives
STATUS_INTERVAL = 1.0  # at most one status write a second
EVENT_MESSAGE_LIMIT = 1000
MAX_PARALLELISM = 500
MAX_RETURNING_EVICTIONS = 100
RETURNING = "pods keep coming back"  # Tracker.fatal's entry for it; fatal_text says which and why
SURGE_LOOK = 2.0  # seconds between two reads of a surged Deployment's rollout
FINISH_BUDGET = 15.0  # seconds after the drain's timeout for its last status write and event


class DrainFailed(NmoError):
    """The drain stopped before every pod was gone; ``details`` carry the drain's result."""


@dataclass(frozen=True)
class DrainOptions:
    node: str
    maintenance: Optional[str] = None
    force: bool = True
    delete_emptydir_data: bool = True
    ignore_daemonsets: bool = True
    pod_selector: str = ""
    grace_period: Optional[int] = None
    timeout: float = 600
    disable_eviction: bool = False
    delete_fallback_after: Optional[float] = None
    skip_wait_for_delete_timeout: int = 0
    parallelism: int = 32
    retry_delay: float = 1.0
    run_id: str = ""  # the playbook run the drain is for (run.py): it stops when that run is gone
    kubevirt: str = "wait"  # migrate: live-migrate the VMs whose pods a budget keeps (migrations.py)
    # pods that land on the node after the drain began (returning.py), evicted again at most
    # this many times per workload before the drain fails naming them
    returning_pod_evictions: int = 3
    held_leases: str = run.HELD_NONE  # the node's leases the run must still hold at each look (run.Guard)
    # drain rules (model/drain_rules.py): order batches, skip, wait-completed; None: no rule
    rules: Optional[List[Dict[str, Any]]] = None
    # surge-first (model/surge.py): a pod its budget refuses, of a Deployment that can roll out
    # with a new pod first, gets its Deployment restarted once instead of waiting
    surge: bool = False

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> DrainOptions:
        return cls(**{f.name: params[f.name] for f in fields(cls) if params.get(f.name) is not None})

    def selection(self, now: Optional[float] = None) -> SelectionOptions:
        return SelectionOptions.of(self, now)

    def validate(self) -> None:
        """Every option, before any request; one error that lists every problem."""
        v = validation
        checks = [lambda: v.node_name(self.node),
                  lambda: v.positive_seconds(self.timeout, "timeout"),
                  lambda: v.number(self.parallelism, "parallelism", 1, MAX_PARALLELISM, "requests", integer=True),
                  lambda: v.seconds(self.retry_delay, "retry_delay", 0.1, 3600),
                  lambda: v.number(self.skip_wait_for_delete_timeout, "skip_wait_for_delete_timeout", 0,
                                   v.MAX_WAIT_SECONDS, "seconds", integer=True),
                  lambda: v.label_selector(self.pod_selector or "", "pod_selector"),
                  lambda: v.one_of(self.kubevirt, "kubevirt", KUBEVIRT_MODES),
                  lambda: v.number(self.returning_pod_evictions, "returning_pod_evictions", 0,
                                   MAX_RETURNING_EVICTIONS, "evictions", integer=True),
                  lambda: v.one_of(self.held_leases, "held_leases", run.HELD_CHOICES),
                  lambda: drain_rules.parse_rules(self.rules)]
        if self.maintenance is not None:
            checks.append(lambda: v.dns_subdomain(self.maintenance, "maintenance", "NodeMaintenance name"))
        if self.grace_period is not None:  # unset: each pod's own
            checks.append(lambda: v.number(self.grace_period, "grace_period", 0, v.MAX_WAIT_SECONDS, "seconds",
                                           integer=True))
        if self.delete_fallback_after is not None:
            checks.append(lambda: v.seconds(self.delete_fallback_after, "delete_fallback_after"))
        if self.run_id:
            checks.append(lambda: run.validate_id(self.run_id))
        v.problems(*checks)
        self.selection()  # a malformed pod_selector raises here, before any request


# -- requests ---------------------------------------------------------------------------------
def delete_options(plan: PodPlan, grace_period: Optional[int]) -> Dict[str, Any]:
    # The UID precondition keeps a request from hitting a replacement of the same name.
    options: Dict[str, Any] = {"preconditions": {"uid": plan.uid}}
    if grace_period is not None:
        options["gracePeriodSeconds"] = grace_period
    return options


def send(client: Client, plan: PodPlan, action: str, grace_period: Optional[int]) -> Outcome:
    """Evict (policy/v1) or delete one pod; the outcome says what the drain does next."""
    options = delete_options(plan, grace_period)
    try:
        if action == EVICT:
            client.post(paths.eviction(plan.namespace, plan.name), {
                "apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": plan.name, "namespace": plan.namespace}, "deleteOptions": options})
        else:
            client.delete(paths.pod(plan.namespace, plan.name), {"apiVersion": "v1", "kind": "DeleteOptions", **options})
    except ApiError as exc:
        return outcome_of(exc, plan.key)
    return outcome_of(None, plan.key)


def read_maintenance(client: Client, opts: DrainOptions,
                     known: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
    """``opts.maintenance``, checked to name the node; ``known`` when the caller has it as the
    API server answered a moment ago (the drain phase's record write), not read again."""
    if not opts.maintenance:
        return None
    same = known is not None and (known.get("metadata") or {}).get("name") == opts.maintenance
    nm = known if same else maintenance.get(client, opts.maintenance)
    if nm is None and client.dry_run:  # a dry run's begin only imagined it: the drain's dry run goes on without
        return None
    if nm is None:
        raise InputError(f"NodeMaintenance {opts.maintenance} not found: create it first, "
                         "or leave maintenance unset to drain without one")
    named = nm.get("spec", {}).get("nodeName")
    if named != opts.node:
        raise InputError(f"NodeMaintenance {opts.maintenance} is for node {named}, not {opts.node}")
    return nm


# -- the NodeMaintenance status, kept current -----------------------------------------------------
class StatusKeeper:
    """Writes the drain's status fields when they changed, at most once a second."""

    def __init__(self, client: Client, nm: Optional[Dict[str, Any]], warnings: List[str]) -> None:
        self.client = client
        self.nm = nm
        self.warnings = warnings
        self.throttle = Throttle(STATUS_INTERVAL)
        self.writes = 0

    def offer(self, wanted: Dict[str, Any], now: float, force: bool = False) -> None:
        if self.nm is None or not self.throttle.due(wanted, now, force):
            return
        try:
            self.nm, changed = maintenance.update_status(self.client, self.nm, wanted)
        except NotFound:
            self.warnings.append(f"NodeMaintenance {self.nm['metadata']['name']} was deleted during the drain; "
                                 "its status is no longer written")
            self.nm = None
            return
        except ApiError as exc:  # a status write must not stop the drain; the next offer retries
            self.warnings.append(f"cannot write the NodeMaintenance status: {exc.message}")
            return
        self.throttle.mark(wanted, now)
        self.writes += int(changed)


# -- one drain ------------------------------------------------------------------------------------
class DrainRun:
    """The state of one drain between its list and its end (one thread owns it)."""

    def __init__(self, client: Client, opts: DrainOptions, nm: Optional[Dict[str, Any]],
                 listing: Dict[str, Any], plans: List[PodPlan], warnings: List[str],
                 node: Optional[Dict[str, Any]] = None, selection: Optional[SelectionOptions] = None) -> None:
        self.client = client
        self.opts = opts
        self.plans = plans
        self.blocker = ""  # what kept the drain from finishing, when it ran out of time (model/blocked.py)
        self.selection = selection or opts.selection()
        self.tracker = Tracker.of(plans, retry_delay=opts.retry_delay, fallback_after=opts.delete_fallback_after,
                                  skip_after=opts.skip_wait_for_delete_timeout)
        held = next((p.last_error for p in self.tracker.pending.values() if p.blocked or p.action == COMPLETE), "")
        self.tracker.note(held)  # a do-not-disrupt pod, or one waited for, says so from the start
        self.node = node
        # budgets read to say why they refuse (stuck_pods.unhealthy_budget): (budget, refusal) -> the budget
        self.budgets_read: Dict[Tuple[str, str], Optional[Dict[str, Any]]] = {}
        # surge-first: each refused pod judged once (pod key -> verdict), the Deployments restarted
        self.surge_verdicts: Dict[str, surge.Verdict] = {}
        self.surge_looked: Dict[str, float] = {}  # pod key -> when its Deployment's rollout was last read
        # order batches (drain rules): one batch is the drain as it always was
        self.orders = self.tracker.orders()
        self.batch_order: Optional[int] = None  # the batch announced last
        self.rule_skipped = [p.brief() for p in plans if p.action == SKIP and p.rule]
        self.watcher = Watcher(client, PODS, {"fieldSelector": f"spec.nodeName={opts.node}"}, initial=listing)
        # Pods that land on the node after the list (returning.py): every pod seen so far, by UID,
        # and the returning ones per workload, with why they could come back.
        self.seen_uids: Set[str] = {p.get("metadata", {}).get("uid", "") for p in listing.get("items", [])}
        self.returned: Dict[str, List[Tuple[str, str]]] = {}
        self.returned_pods: List[Dict[str, Any]] = []
        self.looked_at = -1  # the watch batch the returning pods were last looked for at
        # A node left schedulable (the caller did not cordon it; the result warns) takes pods
        # back because it is schedulable, not because they tolerate the maintenance: as kubectl
        # drain does, only the pods of the list are evicted, and whatever lands later stays.
        self.takes_returning = node is None or bool(node.get("spec", {}).get("unschedulable"))
        evicting = {plan.uid for plan in plans if plan.action in (EVICT, DELETE)}
        self.may_return = any(returning.may_come_back(p) for p in listing.get("items", [])
                              if p.get("metadata", {}).get("uid") in evicting)
        self.overflowed = False  # a workload came back more often than returning_pod_evictions
        self.verified = not self.may_return  # the last look at the node, by a fresh list, found none back
        waited: List[Watcher] = [self.watcher]
        # The Node is watched too: a node deleted mid-drain (its pods then go with the pod
        # garbage collector, tens of seconds later) stops the drain at once, saying so.
        self.node_watcher: Optional[Watcher] = None
        if node is not None and node.get("metadata", {}).get("resourceVersion"):
            self.node_watcher = Watcher(client, NODES, {"fieldSelector": f"metadata.name={opts.node}"},
                                        initial={"items": [node], "metadata": {
                                            "resourceVersion": node["metadata"]["resourceVersion"]}})
            waited.append(self.node_watcher)
        # The NodeMaintenance is watched too: when someone ends the maintenance (recover.yml,
        # kubectl delete nm) the drain stops instead of evicting from a node back in service,
        # also when the run that started it was killed and left it running in the background.
        self.maintenance_watcher: Optional[Watcher] = None
        if nm is not None:
            self.maintenance_watcher = Watcher(
                client, maintenance.API, {"fieldSelector": f"metadata.name={nm['metadata']['name']}"},
                initial={"items": [nm], "metadata": {"resourceVersion": nm["metadata"]["resourceVersion"]}})
            waited.append(self.maintenance_watcher)
        self.waitable = MultiWatcher(*waited)
        self.answers: queue.Queue[Tuple[str, Outcome]] = queue.Queue()
        self.status = StatusKeeper(client, nm, warnings)
        self.events = EventRecorder(client)
        self.run_guard = run.guard_for(client, opts.run_id, node=opts.node, held=opts.held_leases)
        self.event_throttle = EventThrottle()
        self.fallen_back: Set[str] = set()
        self.warnings = warnings
        status = (nm or {}).get("status") or {}
        self.total, self.eviction_pods = initial_counts(status, len(self.tracker.pending), len(listing["items"]))
        self.kubevirt: Optional[kubevirt.Migrations] = None
        if opts.kubevirt == kubevirt.MIGRATE:
            actions = {key: pod.action for key, pod in self.tracker.pending.items()}
            evicting = [p for p in listing["items"] if actions.get(object_key(p)) == EVICT]
            self.kubevirt = kubevirt.for_drain(client, opts.kubevirt, opts.node, opts.maintenance, evicting,
                                               self.waitable, self.record)

    # -- status and events --------------------------------------------------------------------
    def fields(self, finished: bool = False, error: Optional[str] = None) -> Dict[str, Any]:
        last_error = error if error is not None else self.tracker.current_error()
        wanted = status_fields(self.total, self.eviction_pods, self.tracker.pending.values(), last_error, finished)
        if self.kubevirt is not None:
            wanted["migrations"] = self.kubevirt.status()
        if len(self.orders) > 1:
            wanted["drainBatch"] = "all batches drained" if finished else self.batch_text()
        if self.rule_skipped:
            wanted["skippedPods"] = self.rule_skipped
        return wanted

    def batch_text(self) -> str:
        current = self.tracker.current_order()
        if current is None:
            waiting = sum(1 for p in self.tracker.pending.values() if p.action == COMPLETE)
            return f"all batches drained; waiting for {waiting} pod(s) to complete"
        return drain_rules.batch_text(self.orders, current, len(self.tracker.batch(current)))

    def announce_batch(self) -> None:
        """A ``Drain`` event when a new order batch starts (only when there are several)."""
        current = self.tracker.current_order()
        if len(self.orders) < 2 or current is None or current == self.batch_order:
            return
        self.batch_order = current
        self.orders = sorted(set(self.orders) | {current})
        self.record(DRAIN, f"Drain node {self.opts.node}: {self.batch_text()}", f"batch {current}")

    def record(self, reason: str, message: str, key: str = "", etype: Optional[str] = None) -> None:
        nm = self.status.nm
        if nm is None or not self.event_throttle.due(key, message, time.monotonic()):
            return
        self.events.record(nm, reason, message[:EVENT_MESSAGE_LIMIT], etype)

    # -- requests on the pool ------------------------------------------------------------------
    def submit_due(self, pool: ThreadPoolExecutor) -> None:
        self.announce_batch()
        for pod in self.tracker.due(time.monotonic()):
            if pod.fallback and pod.key not in self.fallen_back:
                self.fallen_back.add(pod.key)
                self.record(DRAIN, f"Deleting pod {pod.key} although its PodDisruptionBudget refuses the eviction: "
                                   f"refused for {self.opts.delete_fallback_after:g} s (delete_fallback_after)",
                            pod.key, "Warning")
            pool.submit(self._send, pod.plan, pod.action)

    def _send(self, plan: PodPlan, action: str) -> None:
        try:
            outcome = send(self.client, plan, action, self.opts.grace_period)
        except Exception as exc:  # never lose an answer: the main thread decides
            outcome = Outcome(RETRY, f"{type(exc).__name__}: {exc}")
        self.answers.put((plan.key, outcome))
        self.watcher.wake()

    def take_answers(self, with_events: bool = True) -> None:
        now = time.monotonic()
        while True:
            try:
                key, outcome = self.answers.get_nowait()
            except queue.Empty:
                return
            pod = self.tracker.answer(key, outcome, now)
            if (pod is not None and with_events and outcome.kind == REFUSED and self.kubevirt is not None
                    and self.kubevirt.refused(pod)):
                self.tracker.last_error = pod.last_error  # the VM's migration speaks for its pod
                continue
            if pod is not None and outcome.kind == REFUSED and with_events:
                pod.budget_note = self.budget_note(pod, outcome.message)
                if self.opts.surge and not self.launcher(pod):
                    pod.budget_note = "; ".join(filter(None, (pod.budget_note, self.surge_note(pod, now))))
            if pod is not None and with_events and outcome.kind in (REFUSED, FATAL):
                self.record(DRAIN_ERROR, self.refusal_event(pod, outcome), key)
            if pod is not None and with_events and outcome.kind == EVACUATING:
                self.record(DRAIN, f"{outcome.message}. Asked again every {max(EVACUATION_RETRY, self.opts.retry_delay):g} "
                                   "s until it is gone", key)

    def budget_note(self, pod: PendingPod, message: str) -> str:
        """Why the budget refusing ``pod`` allows 0 disruptions when it is because some of its
        pods are not Ready. The budget is read once per distinct refusal (its message counts
        the healthy pods, so a change reads it again): a drain no budget refuses reads none."""
        named = stuck_pods.budget_named(message)
        if not named:
            return ""
        cache = (f"{pod.plan.namespace}/{named}", message)
        if cache not in self.budgets_read:
            try:  # a list by name: the ClusterRole grants list on budgets, not get
                self.budgets_read[cache] = workloads.named(self.client, paths.pdbs(pod.plan.namespace), named)
            except ApiError:  # not readable: the server's words are all there is
                self.budgets_read[cache] = None
        pdb = self.budgets_read[cache]
        current = self.watcher.objects.get(pod.key)
        return stuck_pods.unhealthy_budget(pdb, current is not None and stuck_pods.is_ready(current)) if pdb else ""

    def surge_note(self, pod: PendingPod, now: float) -> str:
        """Surge-first for a pod its budget refuses: judged once (two reads); when its Deployment
        can roll out with a new pod first, restarted once (one patch) and a ``Drain`` event; then
        its rollout read at most every SURGE_LOOK seconds to say how it goes, and whether its
        new pod cannot be scheduled. The text says what surge does or why it cannot help."""
        current = self.watcher.objects.get(pod.key)
        verdict = self.surge_verdicts.get(pod.key)
        if verdict is None and current is not None:
            try:
                verdict = workloads.judge(self.client, current)
                if verdict.can:
                    workloads.restart(self.client, pod.plan.namespace, verdict.deployment,
                                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                    pod.surged = verdict.deployment
                    self.record(DRAIN, f"Pod {pod.key} surged: its PodDisruptionBudget allows no disruption, so "
                                       f"Deployment {verdict.deployment} was restarted (kubectl rollout restart) to "
                                       "make its new pod elsewhere before this one goes", pod.key)
            except ApiError as exc:
                verdict = surge.Verdict(False, f"surge cannot help: {exc.message}")
            self.surge_verdicts[pod.key] = verdict
            self.surge_looked[pod.key] = now
        if verdict is None or not verdict.can:
            return verdict.why if verdict else ""
        if now - self.surge_looked.get(pod.key, 0) < SURGE_LOOK:
            return pod.surge_text or verdict.why
        self.surge_looked[pod.key] = now
        try:
            deployment, pods = workloads.look(self.client, pod.plan.namespace, verdict.deployment)
        except ApiError:
            return pod.surge_text or verdict.why
        stuck = surge.unschedulable(pods, pod.plan.uid)
        if stuck:
            text = f"surge blocked: Deployment {verdict.deployment} restarted, but {stuck}"
            if text != pod.surge_text:
                self.record(DRAIN_ERROR, f"Pod {pod.key}: {text}", pod.key, "Warning")
        else:
            text = (f"surging: Deployment {verdict.deployment} restarted, "
                    f"{surge.ready_replicas(deployment or {})}; this pod goes when its new one is Ready")
        pod.surge_text = text
        return text

    def launcher(self, pod: PendingPod) -> bool:
        """A VM's pod (virt-launcher): KubeVirt's to move, never a Deployment's to surge."""
        current = self.watcher.objects.get(pod.key)
        return current is not None and is_launcher(current)

    def node_state(self) -> Optional[str]:
        """The node's ``not_ready`` as the Node watch last saw it (no request)."""
        node = self.node
        if self.node_watcher is not None:
            node = next(iter(self.node_watcher.objects.values()), node)
        return not_ready(node) if node else None

    def look_at_holds(self, epoch_now: float) -> None:
        """Name what holds each pending pod being deleted (stuck_pods.held), from the watch's view;
        a Warning event when a pod is first seen held."""
        state = self.node_state()
        for pod in self.tracker.pending.values():
            text = stuck_pods.held(self.watcher.objects.get(pod.key), self.opts.node, state, epoch_now)
            if text and not pod.held:
                if pod.held_since is None:
                    pod.held_since = epoch_now
                self.record(DRAIN_ERROR, f"Pod {pod.key} does not leave: {text}", pod.key, "Warning")
            pod.held = text

    def fatal_text(self) -> str:
        """The errors that stopped the drain: those of pods grouped (one per distinct error,
        counted), then the others (pods that keep coming back) once each."""
        per_pod = {message for _key, message in self.tracker.fatal_pods}
        others = [returning.came_back_message(self.opts.node, self.opts.returning_pod_evictions, self.returned)
                  if m == RETURNING else m
                  for m in dict.fromkeys(m for m in self.tracker.fatal if m not in per_pod)]
        return "; ".join(([group(self.tracker.fatal_pods)] if self.tracker.fatal_pods else []) + others)

    def refusal_event(self, pod: PendingPod, outcome: Outcome) -> str:
        if outcome.kind == FATAL:
            return outcome.message
        why = f" {pod.budget_note}." if pod.budget_note else ""
        return f"{outcome.message}{why} Pod {pod.key} stays pending; retried every {self.opts.retry_delay:g} s."

    # -- pods that come back ---------------------------------------------------------------------
    def look_for_returning(self, pods: Optional[List[Dict[str, Any]]] = None) -> int:
        """Track the pods on the node that were not there at the list (or at the last look),
        as the drain's own filters take them; how many were new. From the watch's view of the
        node, and only when the watch brought something since the last look (no request)."""
        if not self.takes_returning:
            return 0
        if pods is None:
            if self.waitable.changes == self.looked_at:
                return 0
            self.looked_at = self.waitable.changes
            pods = list(self.watcher.objects.values())
        new = 0
        for pod in pods:
            uid = pod.get("metadata", {}).get("uid", "")
            if not uid or uid in self.seen_uids:
                continue
            self.seen_uids.add(uid)
            plan = classify(pod, self.selection)
            if plan.action == SKIP:  # DaemonSet, mirror, not selected: the drain leaves it, as at the start
                continue
            new += 1
            why = returning.why_here(pod)
            came = self.returned.setdefault(returning.workload(pod), [])
            came.append((plan.key, why))
            self.returned_pods.append({"namespace": plan.namespace, "name": plan.name, "reason": why})
            self.may_return = self.may_return or returning.may_come_back(pod)
            # pending in every case: the status never says 100 % while it is on the node
            self.tracker.pending[plan.key] = pending_pod(plan, EVICT if plan.action == REFUSE else plan.action)
            if plan.action == REFUSE:
                self.tracker.fatal.append(refusal_message(self.opts.node, [plan]))
                continue
            if len(came) > self.opts.returning_pod_evictions:
                if not self.overflowed:
                    self.overflowed = True
                    self.tracker.fatal.append(RETURNING)  # the message is made at the end, naming them all
                continue
            if self.may_return:
                self.verified = False  # its replacement may come back too: look again before the end
            self.record(DRAIN, f"Pod {plan.key} came back to node {self.opts.node} after the drain began: {why}. "
                               f"Evicted again ({len(came)} of at most {self.opts.returning_pod_evictions} for "
                               f"{returning.workload(pod)}, returning_pod_evictions)", plan.key, "Warning")
        return new

    def verify_empty(self) -> bool:
        """Before the drain says it is done while replacements may come back: one fresh list of
        the node's pods (a consistent read, so nothing bound before it is missed by a watch
        event still on its way). True when no pod came back. Not made on the normal path."""
        if self.verified:
            return True
        self.verified = True
        fresh = list_objects(self.client, PODS, {"fieldSelector": f"spec.nodeName={self.opts.node}"})
        return self.look_for_returning(fresh.get("items", [])) == 0

    # -- the wait ------------------------------------------------------------------------------
    def maintenance_ended(self) -> bool:
        return self.maintenance_watcher is not None and not self.maintenance_watcher.objects

    def node_deleted(self) -> bool:
        return self.node_watcher is not None and not self.node_watcher.objects

    def check(self) -> Optional[bool]:
        if self.maintenance_ended() or self.node_deleted():
            return False
        # no eviction for a run that is gone, nor for a maintenance another run adopted
        self.run_guard.check()
        if self.maintenance_watcher is not None:
            self.run_guard.check_maintenance(next(iter(self.maintenance_watcher.objects.values()), None))
        self.take_answers()
        self.tracker.settle(self.watcher.objects, time.time())
        self.look_at_holds(time.time())
        if any(p.blocked for p in self.tracker.pending.values()):
            for pod in self.tracker.unblock(self.watcher.objects, drain_rules.do_not_disrupt):
                self.record(DRAIN, f"Pod {pod.key} is no longer annotated do-not-disrupt: evicted in its batch",
                            pod.key)
            if not any(p.blocked or p.action == COMPLETE for p in self.tracker.pending.values()):
                self.tracker.note("")
        self.look_for_returning()
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
        if not self.verify_empty():  # pods came back: the drain goes on with them
            return None if not self.tracker.fatal else False
        return True

    def run(self) -> Tuple[bool, str]:
        """Evict and wait; (finished, error message)."""
        if not self.tracker.pending:
            self.status.offer(self.fields(finished=True), time.monotonic(), force=True)
            return True, ""
        counts = {a: sum(1 for p in self.plans if p.action == a) for a in (EVICT, DELETE, WAIT, SKIP, COMPLETE)}
        # The first progress goes out after a second, as every later one: a drain done
        # sooner writes its status once, when it ends.
        self.status.throttle.last_time = time.monotonic()
        extra = ""
        if len(self.orders) > 1:
            extra += f"; {len(self.orders)} order batches ({', '.join(str(o) for o in self.orders)}), lowest first"
        if counts[COMPLETE]:
            extra += f"; {counts[COMPLETE]} waited for until they complete (wait-completed)"
        blocked = [p.plan.key for p in self.tracker.pending.values() if p.blocked]
        if blocked:
            extra += f"; {len(blocked)} annotated do-not-disrupt, never evicted: {', '.join(sorted(blocked)[:5])}"
        self.record(DRAIN, f"Drain node {self.opts.node}: {counts[EVICT]} pods to evict, {counts[DELETE]} to delete, "
                           f"{counts[WAIT]} already terminating, {counts[SKIP]} skipped" + extra)
        pool = ThreadPoolExecutor(max_workers=self.opts.parallelism, thread_name_prefix="nmo-drain")
        self.waitable.start()
        error = ""
        try:
            self.run_guard.check(force=True)  # no eviction for a node whose leases lapsed since the begin
            self.submit_due(pool)

            def tick() -> None:
                self.submit_due(pool)
                self.status.offer(self.fields(), time.monotonic())

            finished = wait_until(self.waitable, self.check, self.opts.timeout, self.tracker.describe_pending,
                                  tick, TICK)
            if not finished and self.node_deleted():
                error = (f"drain of node {self.opts.node} stopped: the node was deleted (its Node object is gone "
                         "from the cluster; its pods go with it). Not evicted: "
                         f"{self.tracker.describe_pending()}")
            elif not finished and self.maintenance_ended():
                self.status.nm = None
                error = (f"drain of node {self.opts.node} stopped: its NodeMaintenance was deleted, so the "
                         f"maintenance was ended elsewhere. Not evicted: {self.tracker.describe_pending()}")
            elif not finished:
                error = (f"drain of node {self.opts.node} stopped: " + self.fatal_text()
                         + f". Still pending: {self.tracker.describe_pending()}")
        except WaitTimeout:
            error = (f"drain of node {self.opts.node} timed out after {self.opts.timeout:g} s; "
                     f"still pending: {self.tracker.describe_pending()}")
            self.blocker = f"drain timed out after {self.opts.timeout:g} s; pending: {self.tracker.describe_pending()}"
        except run.LeaseLost as exc:  # the run is alive, but this node's leases are not its own any more
            error = f"drain of node {self.opts.node} stopped: {exc.message}. Not evicted: {self.tracker.describe_pending()}"
        except ApiError as exc:  # the watch failed for good (403, say)
            error = f"drain of node {self.opts.node} stopped: {exc.message}. Still pending: {self.tracker.describe_pending()}"
        finally:
            self.waitable.close()
            pool.shutdown(wait=True, cancel_futures=True)
            self.take_answers(with_events=False)
        if error:
            self.record(DRAIN_ERROR, error)
            self.status.offer(self.fields(error=error), time.monotonic(), force=True)
            return False, error
        self.status.offer(self.fields(finished=True), time.monotonic(), force=True)
        return True, ""


def brief(pod: PendingPod, reason: Optional[str] = None) -> Dict[str, Any]:
    return {"namespace": pod.plan.namespace, "name": pod.plan.name, "reason": reason or pod.plan.reason}


def left_reason(pod: PendingPod, opts: DrainOptions) -> str:
    return (f"still terminating after skip_wait_for_delete_timeout ({opts.skip_wait_for_delete_timeout} s), "
            f"left as kubectl drain leaves it" + (f": {pod.held}" if pod.held else ""))


def left_warning(node: str, left: List[Dict[str, Any]], opts: DrainOptions) -> str:
    """The console's line for the pods let go by skip_wait_for_delete_timeout."""
    names = group([(f"{p['namespace']}/{p['name']}", p["reason"]) for p in left])
    return (f"node {node}: {len(left)} pod(s) still terminating were left behind after skip_wait_for_delete_timeout "
            f"({opts.skip_wait_for_delete_timeout} s): {names}")


def outcome_lists(tracker: Tracker, opts: DrainOptions) -> Dict[str, List[Dict[str, Any]]]:
    """evicted / deleted: our request was accepted; gone: it left without one (already
    terminating, or removed by someone else meanwhile)."""
    out: Dict[str, List[Dict[str, Any]]] = {"evicted": [], "deleted": [], "gone": [], "completed": [],
                                            "left_terminating": [], "surged": []}
    for pod in sorted(tracker.done, key=lambda p: p.key):
        if pod.surged:
            out["surged"].append({**brief(pod, f"Deployment {pod.surged} restarted (surge): its new pod was made "
                                               "elsewhere before this one went"), "deployment": pod.surged})
        if pod.left_terminating:
            out["left_terminating"].append(brief(pod, left_reason(pod, opts)))
        elif pod.action == COMPLETE:
            out["completed"].append(brief(pod))
        elif not pod.accepted:
            out["gone"].append(brief(pod, "already terminating" if pod.action == WAIT else "gone before our request"))
        elif pod.action == EVICT:
            out["evicted"].append(brief(pod))
        else:
            reason = (f"refused by its PodDisruptionBudget for {opts.delete_fallback_after:g} s (delete_fallback_after)"
                      if pod.fallback else None)
            out["deleted"].append(brief(pod, reason))
    return out


def check_plan(client: Client, opts: DrainOptions, acting: List[PodPlan]) -> Dict[str, Any]:
    """The drain's dry run: each pod it would act on, and whether its PodDisruptionBudget lets
    it go now (a server-side dry-run eviction, nothing written), as a diff of the pods on the
    node before and after."""
    evicting = [p for p in acting if p.action == EVICT and not p.blocked]
    answers = dry_run.dry_run_all(client, evicting, opts.parallelism)
    plan = {}
    for p in acting:
        if p.action == EVICT and p.blocked:
            plan[p.key] = f"blocked: annotated {p.blocked}, never evicted"
        elif p.action == EVICT:
            plan[p.key] = "evict: " + dry_run.verdict_text(answers[p.key])
        elif p.action == DELETE and p.blocked:
            plan[p.key] = f"blocked: annotated {p.blocked}, never deleted"
        elif p.action == DELETE:
            plan[p.key] = "delete (finished, or eviction disabled)"
        elif p.action == COMPLETE:
            plan[p.key] = "wait until it completes (wait-completed)"
        else:
            plan[p.key] = "wait for it (already being deleted)"
    refused = [k for k, a in answers.items() if a.answer != dry_run.ALLOWED]
    return {"would_evict_now": {"allowed": [k for k, a in answers.items() if a.answer == dry_run.ALLOWED],
                                "refused": refused},
            "diff": {"before": {"pods": sorted(plan)},
                     "after": {"pods": [], "plan": plan}}}


def rule_result(plans: List[PodPlan]) -> Dict[str, Any]:
    """What the drain rules made of the node: its order batches (lowest first, each with its
    pods counted), the pods annotated do-not-disrupt and those waited for to complete."""
    orders: Dict[int, int] = {}
    for p in plans:
        if p.action in (EVICT, DELETE, WAIT):
            orders[p.order] = orders.get(p.order, 0) + 1
    return {"batches": [{"order": o, "pods": n} for o, n in sorted(orders.items())],
            "do_not_disrupt": [{**p.brief(), "annotation": p.blocked} for p in plans if p.blocked],
            "wait_completed": [p.brief() for p in plans if p.action == COMPLETE]}


def drain(client: Client, opts: DrainOptions, node_conditions: Optional[bool] = False,
          nm_read: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Drain ``opts.node``; returns the result, raises DrainFailed (result in details).

    ``node_conditions`` (docs/design.md §4.11): ``DrainInProgress`` before the first eviction;
    None, when the node read here carries our ``MaintenanceInProgress`` (the begin set it), so
    that no caller carries the begin's answer and no request is added. The result's
    ``node_conditions`` says whether the drain wrote them (the caller then writes ``Drained``).
    ``nm_read``: its NodeMaintenance as the caller just wrote it (read_maintenance)."""
    started, first_request = time.monotonic(), client.requests
    opts.validate()
    node = read_node(client, opts.node)
    lifecycle = (maintained(node) if node_conditions is None else node_conditions) and not client.dry_run
    condition_warnings = drain_started(client, opts.node) if lifecycle else []
    nm = read_maintenance(client, opts, nm_read)
    listing = list_objects(client, PODS, {"fieldSelector": f"spec.nodeName={opts.node}"})
    selection = opts.selection(time.time())
    if selection.needs_namespaces():  # a rule's namespace_selector: one read of each namespace on the node
        selection = replace(selection, namespace_labels=namespace_labels(
            client, [p.get("metadata", {}).get("namespace", "") for p in listing.get("items", [])]))
    plans = [classify(pod, selection) for pod in listing.get("items", [])]
    warnings: List[str] = list(condition_warnings)
    if not node.get("spec", {}).get("unschedulable") and not client.dry_run:  # a dry run's begin cordoned nothing
        warnings.append(f"node {opts.node} is schedulable: evicted pods may be scheduled back onto it; cordon it first")
    result: Dict[str, Any] = {
        "node": opts.node, "maintenance": opts.maintenance, "pods_found": len(plans), "node_conditions": lifecycle,
        "skipped_pods": [p.brief() for p in plans if p.action == SKIP],
    }
    refused = [p for p in plans if p.action == REFUSE]
    if refused:
        said = refusal_message(opts.node, refused)  # pods that never leave: a block (model/blocked.py)
        raise DrainFailed(said, refused=[p.brief() for p in refused], blocker=said, **result)
    acting = [p for p in plans if p.action in (EVICT, DELETE, WAIT, COMPLETE)]
    result.update(rule_result(plans))
    if client.dry_run:  # the plan, with the API server's dry-run verdict a pod
        result.update({f"would_{a}": [p.brief() for p in acting if p.action == a] for a in (EVICT, DELETE, WAIT)})
        result["would_wait_completed"] = [p.brief() for p in acting if p.action == COMPLETE]
        result.update(check_plan(client, opts, acting))
        result.update(changed=bool(acting), elapsed=round(time.monotonic() - started, 3),
                      api_requests=client.requests - first_request, warnings=warnings)
        return result

    run = DrainRun(client, opts, nm, listing, plans, warnings, node, selection)
    # A request retried while the API server restarts or throttles (client.py) never
    # outlasts the drain's own timeout, plus a little to write the final status.
    with client.time_budget(opts.timeout + FINISH_BUDGET):
        finished, error = run.run()
    result.update(outcome_lists(run.tracker, opts))
    result.update(
        changed=run.status.writes > 0 or any(p.attempts for p in run.tracker.done + list(run.tracker.pending.values())),
        pending=run.tracker.pending_summary(),
        elapsed=round(time.monotonic() - started, 3),
        eviction_retries=run.tracker.retries,
        blocked=run.tracker.blocked(time.monotonic(), time.time()),
        api_requests=client.requests - first_request,
        status_writes=run.status.writes,
        status=maintenance.summary(run.status.nm),
        warnings=warnings + run.events.warnings + run.run_guard.warnings,
    )
    result["returned"] = run.returned_pods
    if result["left_terminating"]:
        result["warnings"].append(left_warning(opts.node, result["left_terminating"], opts))
    if run.kubevirt is not None:
        result.update(migrations=run.kubevirt.status(), migrations_created=run.kubevirt.created)
    if not finished:
        raise DrainFailed(error, blocker=run.blocker, **result)
    return result
