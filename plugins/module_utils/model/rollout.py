"""The rollout scheduler: what a node of a run may do next (docs/design.md §18).

One pure rule over the run's state, asked before a node's begin takes anything and again at
every change while the node waits for a place:

* ``begin``: go on (take the places, or keep the ones the node already holds).
* ``wait``: the places it needs are held by nodes whose maintenance goes on; wait for them.
* ``stop``: do not begin. Either the run has stopped (a node of this run failed: the run
  lease carries the mark, ``STOPPED_AFTER``), or a place the node needs is held by a node
  kept out of service after its maintenance failed, whose run is this one or is gone:
  nothing will release that place but the command named in the line.

A domain (the concurrency's slots, a topology budget's domain) may also be full of nodes that
hold no place of it but are out of service all the same (docs/design.md §18.1): quarantined,
kept after a failure, cordoned by an administrator. Those that nothing in flight will put back
(``OutOfService.stuck``) are weighed with the kept holders: when they alone fill the domain's
limit, a wait could only end with a lease lapse, so the node stops at once and names them.

A node already past its begin (it holds places of its own) always goes on: it is out of
service already, and finishing returns capacity. The rule does not depend on how many nodes
Ansible runs at once (``serial``, the strategy, ``max_fail_percentage``): the state it reads
is the cluster's, which every node of every batch sees the same.

What it reads (docs/design.md §18.2):

* the leases namespace: which nodes hold places (slots, topology places, node leases) and
  which runs are alive; ``STOPPED_AFTER`` on the run lease, ``<node>/<phase>``, the first
  node of the run that failed, written by the failure path before it rolls back or keeps the
  node. The run's own record: a node rolled back, or refused before its first write, leaves
  no record of its own to say the run stopped.
* each holder's progress record (model/record.py, its NodeMaintenance): the run that wrote it
  last, and once it failed, the phase and the run it failed in (``failed_run``). A later run
  that resumes the node writes its own run there and clears the failure.

``resumes_first`` is the order of a rerun (docs/design.md §18.3): nodes holding places first,
``Pending`` NodeMaintenances of gone runs, which hold nothing, taken as new.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence

from . import leases, rollout_record
from .failure import recover_command
from .marks import MAINTAINED_BY, QUARANTINED, is_ready
from .record import Record

BEGIN, WAIT, STOP = "begin", "wait", "stop"
STOPPED_AFTER = rollout_record.STOPPED_AFTER  # on the run lease (or the rollout's): <node>/<phase>
STOPPED_PLAN = "stopped"  # the plan a node gets when the scheduler says stop (model/plan.py's kind)


@dataclass(frozen=True)
class Mark:
    """Who failed (a node, or a run) and in which phase: the run lease's ``<node>/<phase>``."""

    who: str
    phase: str

    @classmethod
    def parse(cls, text: Optional[str]) -> Optional[Mark]:
        if not text or "/" not in text:
            return None
        who, phase = text.rsplit("/", 1)
        return cls(who, phase) if who and phase else None

    def text(self) -> str:
        return f"{self.who}/{self.phase}"


@dataclass(frozen=True)
class Holder:
    """A node holding places of this collection, as its leases and its record say."""

    node: str
    run: str = ""  # the run its record names (else its places' annotation)
    failed: Optional[Mark] = None  # who=the run it failed in, phase=the phase that failed


def failure_of(progress: Optional[Record]) -> Optional[Mark]:
    """A record's failure as the scheduler weighs it: the run it failed in (a record written
    before ``failedRun`` existed: the run that wrote it) and the phase."""
    if progress is None or not progress.failed:
        return None
    return Mark(progress.failed_run or progress.run, progress.failed_phase or "unknown")


@dataclass(frozen=True)
class OutOfService:
    """A node of a full domain that is out of service without a place of that domain, as the
    node list shows it (model/topology_budgets.py ``disrupted``)."""

    node: str
    cordoned: bool = False  # spec.unschedulable, whoever set it
    ready: bool = True
    quarantined: bool = False  # marks.QUARANTINED: only recover.yml lifts it
    ours: bool = False  # it carries our begin's marks (marks.MAINTAINED_BY)
    busy: bool = False  # it holds a valid lease of ours (a slot, a place, its node lease)

    @classmethod
    def of(cls, node: Dict[str, Any], busy: bool) -> OutOfService:
        meta = node.get("metadata") or {}
        return cls(meta.get("name", ""), bool((node.get("spec") or {}).get("unschedulable")), is_ready(node),
                   (meta.get("labels") or {}).get(QUARANTINED) == "true",
                   MAINTAINED_BY in (meta.get("annotations") or {}), busy)


@dataclass(frozen=True)
class State:
    """The run's state: one list of the leases namespace and the holders' records."""

    run_id: str
    alive: FrozenSet[str] = frozenset()
    stopped_after: Optional[Mark] = None  # who=the node that failed first in this run (or its rollout)
    holders: Dict[str, Holder] = field(default_factory=dict)  # by node
    records: Dict[str, Record] = field(default_factory=dict)  # the progress records read, by node
    # a rollout of several runs (model/rollout_record.py): its id, its other live runs, and the
    # run whose node stopped it when that was another run than this one
    rollout: str = ""
    siblings: FrozenSet[str] = frozenset()
    stopped_run: str = ""

    def ours(self, run_id: str) -> bool:
        """Whether ``run_id`` is this run or another live run of its rollout."""
        return bool(run_id) and (run_id == self.run_id or run_id in self.siblings)


@dataclass(frozen=True)
class Decision:
    action: str
    say: str = ""  # the node's line, for wait and stop
    outcome: str = ""  # the node's result in the run's summary, for stop
    blocker: str = ""  # stop: the node whose failure stopped it
    # stop: the node fails the run. Not when the run stopped after one of its own nodes failed
    # (that node fails it); yes when a kept node of a gone run holds its place: nothing else in
    # this run would fail, and a run that left a node undone must not end as a success
    fails_run: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return {"action": self.action, "say": self.say, "outcome": self.outcome, "blocker": self.blocker,
                "fails_run": self.fails_run}


def _annotations(lease: Dict[str, Any]) -> Dict[str, str]:
    return (lease.get("metadata") or {}).get("annotations") or {}


def _held_by(lease: Dict[str, Any], prefix: str) -> str:
    """The node a lease of ours is held for: a slot's or place's holder, a node lease's node."""
    name = (lease.get("metadata") or {}).get("name", "")
    node = leases.node_of_lease_name(name)
    if node:
        return node if leases.holder(lease) == leases.HOLDER else ""
    return leases.holder(lease) if name.startswith(prefix + "-") else ""


def state_of(seen: Sequence[Dict[str, Any]], run_id: str, now: datetime,
             prefix: str = leases.SLOT_PREFIX, records: Optional[Mapping[str, Record]] = None,
             unwritten_rollout: str = "") -> State:
    """The scheduler's state from one list of the leases namespace, at the server's ``now``,
    and the progress records of the holders (by node; a holder without one failed nowhere).
    ``unwritten_rollout``: the run's rollout when its run lease is not there to say it (check mode)."""
    alive = frozenset(leases.alive_run_ids(list(seen), now))
    run_lease = leases.named(list(seen), leases.RUN_LEASE_PREFIX + run_id) if run_id else None
    rollout_id = rollout_record.rollout_of(run_lease) if run_lease is not None else unwritten_rollout
    record = rollout_record.record_lease(seen, run_id, rollout_id)
    stopped = Mark.parse(_annotations(record or {}).get(STOPPED_AFTER))
    shared = rollout_record.shared(run_id, rollout_id)
    siblings = rollout_record.runs_of(seen, rollout_id, now) - {run_id} if shared else frozenset()
    stopped_run = _annotations(record or {}).get(rollout_record.STOPPED_RUN, "") if shared and stopped else ""
    runs: Dict[str, str] = {}
    for lease in seen:
        node = _held_by(lease, prefix)
        if node and leases.is_valid(lease, now):
            runs[node] = leases.run_annotation(lease) or runs.get(node, "")
    holders: Dict[str, Holder] = {}
    for node, places_run in runs.items():
        progress = (records or {}).get(node)
        holders[node] = Holder(node, (progress.run if progress is not None and progress.run else places_run),
                               failure_of(progress))
    return State(run_id, alive, stopped, holders, dict(records or {}), rollout_id if shared else "", siblings,
                 "" if stopped_run == run_id else stopped_run)


def releases(node: str) -> str:
    """The commands that release a kept node's places."""
    return f"{recover_command(node)} (end it), or run again with -l {node} (resume it)"


def kept_stops(holder: Holder, state: State) -> bool:
    """A failed, kept holder whose places nothing in flight will release: it failed in a run
    that is gone and no live run has taken it since (one of this run stopped the run)."""
    if holder.failed is None or holder.failed.who == state.run_id:
        return False
    if holder.failed.who in state.alive:
        return False  # that run is alive: its failure stops it, and it may still end the node
    taken_since = holder.run and holder.run != holder.failed.who and holder.run in state.alive
    return not taken_since


def stopped_by(state: State, blockers: Sequence[str]) -> Optional[Mark]:
    """The failure that stopped the run: the run lease's mark, or else a blocker whose record
    failed in this run. The failure path writes the record first, then the mark, then rolls
    the node back: a waiter woken by the record in between is stopped the same way, never
    left waiting for a place that is being released."""
    if state.stopped_after is not None:
        return state.stopped_after
    for name in blockers:
        holder = state.holders.get(name)
        if holder is not None and holder.failed is not None and state.ours(holder.failed.who):
            return Mark(name, holder.failed.phase)
    return None


def stuck(out: OutOfService, state: State) -> str:
    """Why nothing in flight will put ``out`` back in service ('' when something will): the
    words of the node's line, what it is and what releases it."""
    holder = state.holders.get(out.node)
    if holder is not None:  # it holds leases of ours: a node in maintenance, released when it ends
        failed = holder.failed
        if failed is not None and kept_stops(holder, state):
            return (f"{out.node} (kept out of service after its maintenance failed in the "
                    f"{failed.phase.replace('_', '-')} phase, run {failed.who}, which is gone: {releases(out.node)})")
        return ""
    if out.quarantined:
        return f"{out.node} (quarantined: only {recover_command(out.node)} lifts it)"
    if not out.cordoned:
        return ""  # NotReady and schedulable: its kubelet may come back by itself
    progress = state.records.get(out.node)
    if out.ours:
        if progress is not None and progress.run in state.alive and not progress.failed:
            return ""  # a live run's node between two of its steps
        return (f"{out.node} (cordoned by a maintenance that holds no lease any more: {releases(out.node)})")
    return f"{out.node} (cordoned by someone else, not by this collection: kubectl uncordon {out.node})"


def kept_stop(name: str, holder: Holder) -> Decision:
    """The stop of a node whose place a failed, kept node of a gone run holds."""
    failed = holder.failed or Mark("", "unknown")
    return Decision(
        STOP, blocker=name, fails_run=True,
        say=(f"not started: it waits for a place that {name} holds, kept out of service after its "
             f"maintenance failed (in the {failed.phase.replace('_', '-')} phase, run {failed.who}, which is "
             f"gone); nothing releases it but {releases(name)}"),
        outcome=f"not started (its place is held by {name}, failed and kept)")


def full_of_stuck(state: State, blockers: Sequence[str], limit: Optional[int],
                  out: Sequence[OutOfService], domain: str) -> Optional[Decision]:
    """STOP when the nodes of a full domain that nothing in flight releases fill its limit
    alone (without a limit: any kept holder, the slots' rule before budgets counted nodes out
    of service); None while a wait can end (a holder finishes, a place lapses with its run)."""
    kept = [name for name in blockers if (h := state.holders.get(name)) is not None
            and h.failed is not None and kept_stops(h, state)]
    named = {o.node: text for o in out if o.node not in blockers and (text := stuck(o, state))}
    if (limit is None and kept) or (limit is not None and kept and not named and len(kept) >= limit):
        return kept_stop(kept[0], state.holders[kept[0]])
    if limit is None or not named or len(kept) + len(named) < limit:
        return None
    texts = [stuck(OutOfService(name, busy=True), state) for name in kept] + list(named.values())
    who = kept + list(named)
    where = domain or "its places"
    return Decision(
        STOP, blocker=who[0], fails_run=True,
        say=(f"not started: {where} allows {limit} node(s) out of service at once, and {len(who)} are out of "
             f"service with nothing in flight to put them back: {'; '.join(texts)}"),
        outcome=f"not started ({where} is full of nodes out of service: {', '.join(who)})")


def stopped_decision(state: State, after: Mark, blockers: Sequence[str]) -> Decision:
    """The stop after a failure of this run, or of another run of its rollout: then nothing of
    this run fails by itself, and a run that left its nodes undone must not end as a success."""
    phase = after.phase.replace("_", "-")
    other = state.stopped_run
    if not other and state.rollout:
        holder = state.holders.get(after.who) if after.who in blockers else None
        failed_in = holder.failed.who if holder is not None and holder.failed is not None else ""
        other = failed_in if failed_in and failed_in != state.run_id else ""
    if not other:
        return Decision(STOP, say=f"not started: the run stopped after {after.who} failed (in the {phase} phase)",
                        outcome=f"not started (the run stopped after {after.who} failed)", blocker=after.who)
    return Decision(
        STOP, blocker=after.who, fails_run=True,
        say=(f"not started: rollout {state.rollout} stopped after {after.who} failed (in the {phase} phase, run "
             f"{other}, another run of the rollout); no node of the rollout begins after a failure"),
        outcome=f"not started (rollout {state.rollout} stopped after {after.who} failed in run {other})")


def decide(node: str, state: State, blockers: Sequence[str] = (), limit: Optional[int] = None,
           out: Sequence[OutOfService] = (), domain: str = "") -> Decision:
    """What ``node`` may do next. ``blockers``: the nodes holding the places it waits for
    (empty before the begin's first look, or when nothing blocks it); ``limit``, ``out`` and
    ``domain``: the full domain's limit, its nodes out of service without a place of it, and
    its description, for the stop when those that nothing releases fill it."""
    own = state.holders.get(node)
    if own is not None and (own.run in ("", state.run_id) or own.run not in state.alive):
        return Decision(BEGIN, say=f"{node} holds its places already: it finishes its maintenance")
    after = stopped_by(state, blockers)
    if after is not None:
        return stopped_decision(state, after, blockers)
    full = full_of_stuck(state, blockers, limit, out, domain)
    if full is not None:
        return full
    if blockers or out:
        waits = list(blockers) + [o.node for o in out if o.node not in blockers]
        return Decision(WAIT, say=f"{node} waits for a place held by {', '.join(waits)}")
    return Decision(BEGIN)


# -- Ansible's workers ------------------------------------------------------------------------
def forks_refusal(concurrency: Any, forks: Any) -> str:
    """Why a run cannot go at ``concurrency`` with Ansible's ``forks`` ('' when it can).

    The maintenance playbook runs its nodes with the strategy ``host_pinned``: ``min(forks,
    batch)`` nodes at once, each keeping its Ansible worker until it ends (``batch`` below). A
    begin that waits for a place (a budget, the control plane's, another run's slots) keeps its
    worker, and never the one of the node holding that place. With fewer forks than the
    concurrency the run could not have the concurrency's nodes out at once; with the free
    strategy (the playbook's before, and a playbook of one's own) every worker could be a
    waiting begin while the holders wait for a worker. So the run refuses such a concurrency
    before it writes anything.
    ``forks`` unknown (0, None: an ansible-core that does not say) refuses nothing."""
    try:
        want, have = int(concurrency), int(forks or 0)
    except (TypeError, ValueError):
        return ""
    if have <= 0 or want <= have:
        return ""
    return (f"node_maintenance_concurrency {want} needs at least {want} Ansible forks, and this run has {have}: "
            f"a node waiting for a place would hold the worker that the node holding it needs, and the batch "
            f"would stand still. Run with -f {want} (--forks {want}) or ANSIBLE_FORKS={want} (forks = {want} in "
            f"ansible.cfg; under AWX, the job template's forks), or a lower concurrency. Nothing was written")


# Ansible's batch (``serial``) for the maintenance plays with the strategy ``host_pinned``: a
# started node keeps its worker until its play ends, and the next node of the batch starts as
# soon as one ends, so a place a node leaves is taken at once instead of when a batch of
# ``concurrency`` nodes has finished. ``min(forks, batch)`` nodes are started at once (the forks
# refusal above keeps that at least the concurrency, so no node waiting for a place ever holds
# the worker of the node holding it); those beyond the concurrency get ready and wait in their
# begin for a place. The batch stays bounded: the strategy scans its hosts at every result, and
# each waiting node holds a watch and a module process. Its tail (its last nodes run below the
# concurrency) comes once every BATCH_TIMES x concurrency nodes.
BATCH_TIMES = 4


def batch(concurrency: Any) -> int:
    """``serial`` for the maintenance plays: BATCH_TIMES x the concurrency; one node at a time
    (the linear strategy, in order): 1."""
    try:
        want = max(1, int(concurrency))
    except (TypeError, ValueError):
        return 1
    return 1 if want == 1 else BATCH_TIMES * want


# -- a rerun's order --------------------------------------------------------------------------
def holds_places(report: Dict[str, Any]) -> bool:
    """Whether a node's report (workflows/info.describe) shows a lease of ours it holds."""
    return any(lease.get("slot") or lease.get("holder") == leases.HOLDER
               for lease in report.get("leases") or [])


def resumes_first(report: Dict[str, Any]) -> bool:
    """Whether a node in flight is finished before anything new begins: it holds places, or its
    maintenance got past ``Pending`` (Running, Succeeded not ended, Failed and kept), or the node
    carries our cordon. A ``Pending`` NodeMaintenance holding nothing is taken as new: resumed
    first, it could wait for a place held by a node whose turn comes after it."""
    nm = report.get("maintenance") or {}
    if not nm:
        return False
    return (holds_places(report) or (nm.get("phase") or "Pending") != "Pending"
            or bool(report.get("unschedulable") and report.get("maintenance_taints")))


def places_first(order: Sequence[str], resumed: Mapping[str, bool], holding: Mapping[str, bool]) -> List[str]:
    """``order`` with the resumed nodes that still hold places before the resumed nodes that
    lost theirs (their leases lapsed), each group in the order given; every other node where it
    was. The resumed nodes run first, a batch at a time: one that lost its leases and went first
    would wait for a place that a resumed node after it holds, until that lease lapsed too (the
    heartbeat renews a lease once half of it is gone, so a killed run's leases need not lapse
    together; docs/design.md §18.3)."""
    spots = [i for i, name in enumerate(order) if resumed.get(name)]
    ranked = sorted((order[i] for i in spots), key=lambda name: 0 if holding.get(name) else 1)
    out = list(order)
    for i, name in zip(spots, ranked):
        out[i] = name
    return out


def stopped_mark(node: str, phase: str) -> str:
    return Mark(node, phase).text()


def kept_leases(seen: List[Dict[str, Any]], node: str, prefix: str = leases.SLOT_PREFIX) -> List[Dict[str, Any]]:
    """The leases of ours a kept node holds: its slots, its topology places, its node lease."""
    return [lease for lease in seen if _held_by(lease, prefix) == node]
