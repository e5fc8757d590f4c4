"""The drain's bookkeeping, free of I/O: which pods are still pending, what their last
request answered, when to retry, and what the NodeMaintenance status should say.

The rules of three drain options live here, with the words that tell of them: how often a
refused pod is asked again (``retry_delay``), when a budget's refusals turn its eviction into
a deletion (``delete_fallback_after``), and when a pod still terminating is let go
(``skip_wait_for_delete_timeout``, as kubectl does). The drain hands its options whole
(``Tracker.for_drain``).

Time comes in as arguments (monotonic seconds for retries and throttles, epoch seconds for
deletion timestamps), so unit tests drive every path without a cluster or a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ..errors import ApiError, DisruptionBudgetRefusal, EvacuationStarted, TlsVerifyError
from .drain_rules import blocked_message
from .drain_spec import DISABLE_EVICTION_OPTION, Drain
from .pod_filters import COMPLETE, DELETE, EVICT, WAIT, PodPlan, deletion_age, is_finished

# Outcomes of one eviction or deletion request.
ACCEPTED = "accepted"  # the pod is deleting; the watch tells when it is gone
REFUSED = "refused"  # 429 from a PodDisruptionBudget: not now
RETRY = "retry"  # a transient failure (throttling, 5xx, conflict, connection) outlasting the client's retries
FATAL = "fatal"  # retrying cannot help: the drain fails
EVACUATING = "evacuating"  # 429 from an owner that evacuates the pod itself (KubeVirt, descheduler protocol)
EVACUATION_RETRY = 10.0  # seconds at least between two evictions of a pod its owner evacuates

MULTIPLE_PDBS = "more than one PodDisruptionBudget"
NAMES_SHOWN = 5  # pods named per distinct error in a message; the others are counted


@dataclass(frozen=True)
class Outcome:
    kind: str
    message: str = ""


def outcome_of(error: Optional[ApiError], key: str) -> Outcome:
    """What an eviction's (or deletion's) answer means for the drain; ``None`` is success."""
    if error is None:
        return Outcome(ACCEPTED)
    text = server_text(error)
    if error.status == 404:
        return Outcome(ACCEPTED, "already gone")
    if isinstance(error, EvacuationStarted):  # before the budget: its owner moves it, no budget keeps it
        return Outcome(EVACUATING, f"pod {key} is being evacuated by its owner (not blocked by a budget): {text}")
    if isinstance(error, DisruptionBudgetRefusal):
        return Outcome(REFUSED, text)
    if error.status == 429:  # the client retried it for its whole budget: ask again later, blame nobody
        return Outcome(RETRY, f"the API server is throttling requests (not a PodDisruptionBudget): {text}")
    if error.status == 500 and MULTIPLE_PDBS in text:
        return Outcome(FATAL, f"pod {key} cannot be evicted: {text} Make at most one PodDisruptionBudget "
                              f"select it, or drain with {DISABLE_EVICTION_OPTION}=true")
    if isinstance(error, TlsVerifyError):  # the same certificate is refused on every attempt
        return Outcome(FATAL, error.message)
    if error.status in (0, 409) or error.status >= 500:
        return Outcome(RETRY, text)
    return Outcome(FATAL, f"pod {key}: {error.message}")


def server_text(error: ApiError) -> str:
    """The server's message plus its causes (a 429 names the PodDisruptionBudget there)."""
    causes = [c.get("message", "") for c in (error.body.get("details") or {}).get("causes") or []
              if c.get("message")]
    text = error.server_message or error.message
    return f"{text} ({'; '.join(causes)})" if causes else text


@dataclass
class PendingPod:
    plan: PodPlan
    action: str  # EVICT, DELETE (finished pods, eviction disabled, fallback), WAIT or COMPLETE
    attempts: int = 0
    in_flight: bool = False
    accepted: bool = False
    next_attempt: float = 0.0
    first_refusal: Optional[float] = None
    fallback: bool = False  # deleted despite its PodDisruptionBudget (Tracker.fallback_after)
    last_error: str = ""
    blocked: str = ""  # the do-not-disrupt annotation that holds it (never sent while set)
    accepted_at: Optional[float] = None  # when our request was accepted (the end of a refusal)
    refusal: str = ""  # the first PodDisruptionBudget refusal's message
    # pods that do not leave (stuck_pods.py): why it is still there (a finalizer, a node
    # without its kubelet), from the watch's view; and why its budget refuses (unhealthy pods)
    held: str = ""
    held_since: Optional[float] = None  # epoch seconds, when ``held`` was first said
    held_until: Optional[float] = None  # epoch seconds, when it left (deleted, or let go)
    budget_note: str = ""
    left_terminating: bool = False  # let go still terminating (Tracker.skip_after)
    surged: str = ""  # surge-first: the Deployment restarted for it (model/surge.py)
    surge_text: str = ""  # how that rollout goes, as last read

    @property
    def note(self) -> str:
        """Its current reason, in the operator's words: a hold, else its budget's, else its last error."""
        return self.held or self.budget_note or self.last_error

    @property
    def key(self) -> str:
        return self.plan.key

    @property
    def order(self) -> int:
        return self.plan.order


def pending_pod(plan: PodPlan, action: Optional[str] = None) -> PendingPod:
    """A pod the drain waits for; one held by do-not-disrupt, or waited for to complete, says so."""
    pod = PendingPod(plan, action or plan.action, blocked=plan.blocked)
    if plan.blocked:
        pod.last_error = blocked_message(plan.key, plan.blocked)
    elif pod.action == COMPLETE:
        pod.last_error = f"not evicted: waiting for it to complete (wait-completed by {plan.rule or 'rule'})"
    return pod


def is_gone(uid: str, current: Optional[Dict[str, Any]], now: float, skip_after: float = 0,
            complete: bool = False) -> bool:
    """Deleted, or replaced (same name, other UID: a StatefulSet's new pod), or, with
    ``skip_after``, terminating for longer than that many seconds (``now`` in epoch seconds);
    with ``complete`` (wait-completed), finished too (Succeeded or Failed)."""
    if current is None or current.get("metadata", {}).get("uid") != uid:
        return True
    if complete and is_finished(current):
        return True
    age = deletion_age(current, now) if skip_after > 0 else None
    return age is not None and age > skip_after


@dataclass
class Tracker:
    """The pods the drain still waits for, and what happened to the others."""
    retry_delay: float = 1.0  # seconds between two requests for a pod (retry_delay)
    fallback_after: Optional[float] = None  # refused that long, a pod is deleted (delete_fallback_after)
    skip_after: float = 0  # terminating that long, a pod is let go (skip_wait_for_delete_timeout; 0: never)
    pending: Dict[str, PendingPod] = field(default_factory=dict)
    done: List[PendingPod] = field(default_factory=list)
    retries: int = 0
    last_error: str = ""
    last_error_key: str = ""  # the pod whose answer set last_error ("" when not one pod's)
    fatal: List[str] = field(default_factory=list)
    fatal_pods: List[Tuple[str, str]] = field(default_factory=list)  # (pod key, message), for grouping

    @classmethod
    def of(cls, plans: Iterable[PodPlan], **kwargs: Any) -> Tracker:
        tracker = cls(**kwargs)
        for plan in plans:
            if plan.action in (EVICT, DELETE, WAIT, COMPLETE):
                tracker.pending[plan.key] = pending_pod(plan)
        return tracker

    @classmethod
    def for_drain(cls, plans: Iterable[PodPlan], opts: Drain) -> Tracker:
        """The bookkeeping of a drain with these options (drain_spec.Drain)."""
        return cls.of(plans, retry_delay=opts.retry_delay, fallback_after=opts.delete_fallback_after,
                      skip_after=opts.skip_wait_for_delete_timeout)

    # -- the words of the options' rules ----------------------------------------------------
    def retry_interval(self, kind: str = REFUSED) -> float:
        """Seconds until a pod whose request had this outcome is asked again: retry_delay, and
        at least EVACUATION_RETRY for a pod its owner evacuates."""
        return max(EVACUATION_RETRY, self.retry_delay) if kind == EVACUATING else self.retry_delay

    def fallback_for(self) -> str:
        """How long a budget refused a pod the drain then deleted (its event's and its result's words)."""
        return f"for {self.fallback_after or 0:g} s (delete_fallback_after)"

    def left_reason(self, pod: PendingPod) -> str:
        """Why a pod let go still terminating is left behind (its entry in left_terminating)."""
        return (f"still terminating after skip_wait_for_delete_timeout ({self.skip_after} s), "
                f"left as kubectl drain leaves it" + (f": {pod.held}" if pod.held else ""))

    def left_warning(self, node: str, left: List[Dict[str, Any]]) -> str:
        """The console's line for the pods let go still terminating."""
        names = group([(f"{p['namespace']}/{p['name']}", p["reason"]) for p in left])
        return (f"node {node}: {len(left)} pod(s) still terminating were left behind after "
                f"skip_wait_for_delete_timeout ({self.skip_after} s): {names}")

    def current_order(self) -> Optional[int]:
        """The order batch being drained: the lowest of the pods still to go (those waited for
        to complete belong to no batch); None when only those are left."""
        orders = [p.order for p in self.pending.values() if p.action != COMPLETE]
        return min(orders) if orders else None

    def orders(self) -> List[int]:
        return sorted({p.order for p in self.pending.values() if p.action != COMPLETE} | set(self.done_orders))

    @property
    def done_orders(self) -> List[int]:
        return [p.order for p in self.done if p.action != COMPLETE]

    def batch(self, order: int) -> List[PendingPod]:
        return [p for p in self.pending.values() if p.action != COMPLETE and p.order == order]

    def unblock(self, objects: Dict[str, Dict[str, Any]], still_blocked: Any) -> List[PendingPod]:
        """Pods whose do-not-disrupt annotation was removed (per the watch): sent from now on."""
        freed = []
        for pod in self.pending.values():
            current = objects.get(pod.key)
            if pod.blocked and current is not None and not still_blocked(current):
                pod.blocked, pod.last_error = "", ""
                freed.append(pod)
        return freed

    def due(self, now: float) -> List[PendingPod]:
        """Pods whose (next) request should go out now, of the current order batch only (a
        batch is gone, by UID, before the next one's first request); marks them in flight."""
        if self.fatal:
            return []
        current = self.current_order()
        ready = []
        for pod in self.pending.values():
            if pod.action in (WAIT, COMPLETE) or pod.blocked or pod.order != current:
                continue
            if pod.in_flight or pod.accepted or pod.next_attempt > now:
                continue
            if (pod.action == EVICT and self.fallback_after is not None and pod.first_refusal is not None
                    and now - pod.first_refusal >= self.fallback_after):
                pod.action, pod.fallback = DELETE, True
            if pod.attempts:
                self.retries += 1
            pod.attempts += 1
            pod.in_flight = True
            ready.append(pod)
        return ready

    def answer(self, key: str, outcome: Outcome, now: float) -> Optional[PendingPod]:
        """Record a request's outcome; returns the pod when it is still pending."""
        pod = self.pending.get(key)
        if pod is None:  # gone already, the watch was quicker than the answer
            gone = next((p for p in self.done if p.key == key), None)
            if gone is not None and outcome.kind == ACCEPTED:
                gone.accepted = True
                gone.accepted_at = now
            return None
        pod.in_flight = False
        if outcome.kind == ACCEPTED:
            pod.budget_note = ""
            pod.accepted = True
            pod.accepted_at = now
            return pod
        pod.last_error = outcome.message
        self.last_error, self.last_error_key = outcome.message, key
        if outcome.kind == FATAL:
            self.fatal.append(outcome.message)
            self.fatal_pods.append((key, outcome.message))
        else:  # an evacuation is asked again at a slower pace: the owner is at work
            pod.next_attempt = now + self.retry_interval(outcome.kind)
            if outcome.kind == REFUSED and pod.first_refusal is None:
                pod.first_refusal = now
                pod.refusal = outcome.message
        return pod

    def settle(self, objects: Dict[str, Dict[str, Any]], epoch_now: float) -> List[PendingPod]:
        """Move the pods that are gone (per the watch's view of the node) to done."""
        gone = [p for p in self.pending.values()
                if is_gone(p.plan.uid, objects.get(p.key), epoch_now, self.skip_after, p.action == COMPLETE)]
        for pod in gone:
            current = objects.get(pod.key)
            # still there, same pod: let go after skip_after, as kubectl does
            pod.left_terminating = (current is not None and current.get("metadata", {}).get("uid") == pod.plan.uid
                                    and not (pod.action == COMPLETE and is_finished(current)))
            if pod.held_since is not None:
                pod.held_until = epoch_now
            del self.pending[pod.key]
            self.done.append(pod)
        return gone

    def note(self, text: str) -> None:
        """A last error that is no single pod's answer (a migration's, say)."""
        self.last_error, self.last_error_key = text, ""

    def current_error(self) -> str:
        """What the NodeMaintenance's lastError says now: the holds of the pods still pending
        (finalizers, a node without its kubelet, unhealthy budgets), grouped; else the last
        answer, unless its pod is gone (then the error of a pod still pending, or none): never
        an old refusal of a pod that left."""
        pods = sorted(self.pending.values(), key=lambda p: p.key)
        holds = [(p.key, p.held or p.budget_note) for p in pods if p.held or p.budget_note]
        if holds:
            return group(holds)
        if self.last_error_key and self.last_error_key not in self.pending:
            return next((p.last_error for p in pods if p.last_error), "")
        return self.last_error

    def left(self) -> List[PendingPod]:
        """The pods let go while still terminating (skip_after)."""
        return sorted((p for p in self.done if p.left_terminating), key=lambda p: p.key)

    def blocked(self, now: float, epoch_now: float) -> List[Dict[str, Any]]:
        """The pods a PodDisruptionBudget refused, each with when (epoch seconds) the refusals
        began and ended (the accepted request, or ``now`` for a pod still refused) and the first
        refusal's message: what blocked the drain and for how long (the run report's)."""
        out = []
        for pod in sorted(self.done + list(self.pending.values()), key=lambda p: p.key):
            if pod.held_since is not None:  # held by a finalizer, or on a node without its kubelet
                end = pod.held_until if pod.held_until is not None else epoch_now
                out.append({"namespace": pod.plan.namespace, "name": pod.plan.name, "reason": pod.held,
                            "since": round(pod.held_since, 3), "until": round(end, 3),
                            "seconds": round(end - pod.held_since, 3), "still_refused": pod.held_until is None})
            if pod.first_refusal is None:
                continue
            until = pod.accepted_at if pod.accepted_at is not None else now
            reason = pod.refusal + (f"; {pod.budget_note}" if pod.budget_note else "")
            out.append({"namespace": pod.plan.namespace, "name": pod.plan.name, "reason": reason,
                        "since": round(epoch_now - (now - pod.first_refusal), 3),
                        "until": round(epoch_now - (now - until), 3),
                        "seconds": round(until - pod.first_refusal, 3), "still_refused": pod.accepted_at is None})
        return out

    def in_flight(self) -> int:
        return sum(1 for p in self.pending.values() if p.in_flight)

    def pending_summary(self) -> List[Dict[str, Any]]:
        return [{"namespace": p.plan.namespace, "name": p.plan.name, "action": p.action,
                 "accepted": p.accepted, "attempts": p.attempts, "last_error": p.last_error}
                for p in sorted(self.pending.values(), key=lambda p: p.key)]

    def describe_pending(self, limit: int = NAMES_SHOWN) -> str:
        """The pending pods grouped by their last error, one part per distinct error with a
        count (the same 403 for 30 pods is said once, not 30 times)."""
        pods = sorted(self.pending.values(), key=lambda p: p.key)
        entries = [(p.key, p.note or ("deleting" if p.accepted else "")) for p in pods]
        return group(entries, limit=max(1, limit)) if entries else "none"

    def fatal_summary(self) -> str:
        """The errors that stopped the drain, one per distinct error with its count and pods."""
        return group(self.fatal_pods) if self.fatal_pods else "; ".join(self.fatal)


# -- errors grouped ----------------------------------------------------------------------------


def generic(key: str, message: str) -> str:
    """The message with this pod's name taken out, so the same error of many pods reads the
    same: ``pod ns/a: ... /namespaces/ns/pods/a/eviction ... pods "a" is forbidden`` becomes
    ``... /namespaces/ns/pods/*/eviction ... pods "*" is forbidden``."""
    namespace, _sep, name = key.partition("/")
    text = message.removeprefix(f"pod {key}: ").removeprefix(f"pod {key} ")
    if name:
        text = text.replace(f"/pods/{name}/", "/pods/*/").replace(f"/pods/{name})", "/pods/*)")
        text = text.replace(f'"{name}"', '"*"').replace(f"Pod {key} ", "The pod ")
    return text


def group(entries: List[Tuple[str, str]], limit: int = NAMES_SHOWN) -> str:
    """``403 ...: pods "*" is forbidden (x30 pods: ns/a, ns/b, ... and 25 more)``: one part per
    distinct message (in the order first seen), its pods counted and the first few named."""
    by_message: Dict[str, List[str]] = {}
    for key, message in entries:
        by_message.setdefault(generic(key, message), []).append(key)
    parts = []
    for message, keys in by_message.items():
        more = len(keys) - limit
        names = ", ".join(keys[:limit]) + (f" and {more} more" if more > 0 else "")
        if not message:
            parts.append(names)
        elif len(keys) == 1:
            parts.append(f"{keys[0]} ({message})")
        else:
            parts.append(f"{message} (x{len(keys)} pods: {names})")
    return "; ".join(parts)


# -- the NodeMaintenance status --------------------------------------------------------------
def drain_progress(eviction_pods: int, pending: int) -> int:
    """Percent of the pods to evict that are gone; 100 when there was nothing to evict."""
    if eviction_pods <= 0:
        return 100
    done = max(eviction_pods - max(pending, 0), 0)
    return min(100, done * 100 // eviction_pods)


def initial_counts(status: Dict[str, Any], to_act: int, total: int) -> Tuple[int, int]:
    """(totalpods, evictionPods) for this drain: kept from a drain this one resumes (phase
    Running, progress below 100, as many or more pods counted) so progress never goes back,
    and from a finished drain when there is nothing left to do (a rerun writes nothing)."""
    previous = status.get("evictionPods")
    if not isinstance(previous, int):
        return total, to_act
    resumed = (status.get("phase") == "Running" and previous >= to_act and previous > 0
               and (status.get("drainProgress") or 0) < 100)
    if resumed or to_act == 0:
        return int(status.get("totalpods") or total), previous
    return total, to_act


def status_fields(total: int, eviction_pods: int, pending: Iterable[PendingPod], last_error: str,
                  finished: bool = False) -> Dict[str, Any]:
    pods = sorted(pending, key=lambda p: p.key)
    fields: Dict[str, Any] = {
        "phase": "Succeeded" if finished else "Running",
        "totalpods": total,
        "evictionPods": eviction_pods,
        "drainProgress": 100 if finished else drain_progress(eviction_pods, len(pods)),
        "pendingPods": [p.plan.name for p in pods],
        "pendingPodsRefs": [{"namespace": p.plan.namespace, "name": p.plan.name} for p in pods],
        "lastError": "" if finished else last_error,
    }
    return fields


@dataclass
class Throttle:
    """At most one write per ``interval`` seconds, and none when nothing changed."""
    interval: float = 1.0
    last_value: Any = None
    last_time: Optional[float] = None

    def due(self, value: Any, now: float, force: bool = False) -> bool:
        if value == self.last_value:
            return False
        return force or self.last_time is None or now - self.last_time >= self.interval

    def mark(self, value: Any, now: float) -> None:
        self.last_value, self.last_time = value, now


@dataclass
class EventThrottle:
    """A refusal is recorded when first seen for a pod, and again (a count bump) only
    after ``repeat_every`` seconds, however often it is retried meanwhile."""
    repeat_every: float = 30.0
    seen: Dict[Tuple[str, str], float] = field(default_factory=dict)

    def due(self, key: str, message: str, now: float) -> bool:
        last = self.seen.get((key, message))
        if last is not None and now - last < self.repeat_every:
            return False
        self.seen[(key, message)] = now
        return True
