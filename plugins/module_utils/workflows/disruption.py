"""May this node be disrupted now, and is that recorded where every other actor looks?

Acquiring takes, in order: the etcd quorum guard (control-plane nodes only), a maintenance
slot, a place in every topology budget the node falls under (model/topology_budgets.py, by
family name: one order for every run), the node lease. An attempt is all or nothing: a slot
or place taken in an attempt that then finds a later budget full, the lease held (or, with
several slots, the etcd quorum no longer safe) is given back, so a waiting run never sits
on a slot. A read-only look at every budget comes first, so a node that would wait takes
nothing at all. Waiting is one watch on the leases namespace (plus
the etcd pods or guard PDB) with a deadline; while it lasts the NodeMaintenance stays
``Pending`` and gets one Warning event per distinct situation. Releasing deletes the node
lease and the node's slots, each only when held by us.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Union

from ..api import paths
from ..api.client import Client
from ..api.waiter import MultiWatcher, Watcher, start_from, wait_until
from ..errors import BlockedError, InputError, RefusedError, WaitTimeout
from ..model import leases, rollout, topology_budgets, turns, validation
from ..model.marks import is_control_plane
from ..model.record import Record
from ..stores import leases as lease_store
from ..stores import maintenance
from ..stores import record as record_store
from ..stores.events import BLOCKED, ETCD_BLOCKED, LEASE_ACQUIRED, LEASE_RELEASED, REASONS, EventRecorder
from ..stores.nodes import list_nodes, read_node
from . import etcd_guard, run

BLOCKED_PREFIX = REASONS[BLOCKED][1]
# how the waits that are not for a place begin (the node lease another run holds, NMO at work
# for someone else): a node saying one of these is no earlier waiter for a place (model/turns.py)
LEASE_HELD = f"{BLOCKED_PREFIX} Lease "
OPERATOR_BUSY = f"{BLOCKED_PREFIX} the Node Maintenance Operator is maintaining"
# Node cordons are not watched (that would be every node of the cluster): the etcd verdict is
# re-read this often while waiting, besides on every lease or etcd pod change.
ETCD_RESYNC_SECONDS = 10.0
NODES_RESYNC_SECONDS = 10.0  # a topology budget's node list is read again after this long


@dataclass
class Request:
    node: str
    concurrency: int = 1
    duration: int = leases.DEFAULT_DURATION
    slot_prefix: str = leases.SLOT_PREFIX
    wait: bool = False
    timeout: float = 600.0
    maintenance: Optional[str] = None
    etcd: etcd_guard.Options = field(default_factory=etcd_guard.Options)
    namespace: str = leases.LEASE_NAMESPACE
    run_id: str = ""  # the playbook run this is for (run.py); empty outside a run
    # its rollout as nmo_run said it: only check mode reads it, since its run wrote no run lease
    rollout: str = ""
    # operator mode: NMO takes the node lease itself, and every NodeMaintenance it is working
    # on (made by anyone) counts against the concurrency like a slot
    operator: bool = False
    # topology budgets as given (model/topology_budgets.py) and the control plane's limit
    budgets: List[Any] = field(default_factory=list)
    control_plane_concurrency: int = 1
    # the node's position in its run's order (model/turns.py): it gives way to the run's earlier
    # nodes that wait for a place it would take; None: it takes what is free
    turn: Optional[int] = None

    @property
    def parsed_budgets(self) -> List[topology_budgets.Budget]:
        return topology_budgets.parse(self.budgets, self.control_plane_concurrency)

    @classmethod
    def from_params(cls, params: Dict[str, Any], maintenance_name: Optional[str] = None) -> Request:
        """The request that the module options of specs.LEASE (plus node) describe."""
        return cls(node=params["node"], concurrency=params["concurrency"], duration=params["duration"],
                   slot_prefix=params["slot_prefix"], wait=params["wait"], timeout=params["timeout"],
                   maintenance=maintenance_name, run_id=params.get("run_id") or "",
                   rollout=params.get("rollout") or "",
                   budgets=params.get("budgets") or [],
                   control_plane_concurrency=1 if params.get("control_plane_concurrency") is None
                   else params["control_plane_concurrency"],
                   turn=params.get("turn"),
                   etcd=etcd_guard.Options(params["etcd_guard"], params["etcd_pod_selector"],
                                           params["etcd_pod_namespace"], params["etcd_guard_namespace"]))

    def validate(self) -> None:
        """Every option, before the first request (the etcd options too, whatever the node)."""
        validation.node_name(self.node)
        validation.derived_name(leases.node_lease_name(self.node), "node", self.node)
        if self.maintenance is not None:
            validation.dns_subdomain(self.maintenance, "maintenance", "NodeMaintenance name")
        leases.validate(self.concurrency, self.duration, self.slot_prefix)
        topology_budgets.validate_names(self.slot_prefix, self.parsed_budgets)
        validation.seconds(self.timeout, "timeout")
        validation.one_of(self.etcd.flavour, "etcd_guard", etcd_guard.FLAVOURS)
        validation.label_selector(self.etcd.member_selector, "etcd_pod_selector")
        validation.namespace(self.etcd.pod_namespace, "etcd_pod_namespace")
        validation.namespace(self.etcd.guard_namespace, "etcd_guard_namespace")
        validation.namespace(self.namespace, "namespace")
        if self.run_id:
            run.validate_id(self.run_id)
        if self.rollout:
            run.validate_id(self.rollout, "rollout")
        if self.turn is not None and (isinstance(self.turn, bool) or not isinstance(self.turn, int) or self.turn < 0):
            raise InputError(f"turn must be a whole number from 0 (the node's position in the run's order), "
                             f"got {self.turn!r}")


def waits_for_a_place(last_error: str) -> bool:
    """Whether a NodeMaintenance's lastError says its node waits for a place (a slot, a budget's
    place, its turn), or nothing yet: its begin is about to ask for one."""
    return not last_error or (last_error.startswith(BLOCKED_PREFIX)
                              and not last_error.startswith((LEASE_HELD, OPERATOR_BUSY)))


@dataclass
class Blocked:
    kind: str  # etcd | slot | lease
    message: str
    reason: str
    event_message: str
    holders: List[Dict[str, Any]]
    never: bool = False
    due: Optional[datetime] = None  # when the earliest blocking lease lapses
    verdict: Optional[etcd_guard.Verdict] = None
    # slot and budget: the full domain's limit and description, and its nodes out of service
    # without a place of it, for the scheduler's stop when nothing in flight releases them
    limit: Optional[int] = None
    domain: str = ""
    out: List[rollout.OutOfService] = field(default_factory=list)


@dataclass
class Acquired:
    slot: leases.Outcome
    lease: leases.Outcome
    verdict: Optional[etcd_guard.Verdict]
    places: List[leases.Outcome] = field(default_factory=list)  # one a topology budget's domain


@dataclass
class Look:
    """One budget domain as read: its limit and the nodes of it already disrupted without a place."""

    domain: topology_budgets.Domain
    limit: int
    disrupted: List[str]
    # the node is out of service already (cordoned, holding leases of ours): its going on adds
    # nothing to the domain's count, so a place is taken when one is free and none is waited for
    optional: bool = False


def records_of(items: List[Dict[str, Any]], nodes: List[str]) -> Dict[str, Record]:
    """The progress records (model/record.py) of ``nodes``, from NodeMaintenances as read."""
    out: Dict[str, Record] = {}
    for nm in items:
        node = (nm.get("spec") or {}).get("nodeName", "")
        found = record_store.of(nm) if node in nodes else None
        if found is not None:
            out[node] = found
    return out


def scheduled(client: Client, req: Request, seen: List[leases.Lease], blockers: List[str],
              records: Optional[Callable[[List[str]], Mapping[str, Record]]] = None,
              blocked: Optional[Blocked] = None) -> None:
    """Ask the rollout scheduler (model/rollout.py, docs/design.md §18) whether the node may go
    on; RunStopped when it says stop. ``blockers``: the nodes holding the places it waits for;
    ``blocked``: the full domain as looked at (its limit and its nodes out of service without a
    place); ``records`` gives their progress records (whether one failed and was kept), read
    only when there are any. Check mode asks too: it tells what the run would do."""
    if not req.run_id:
        return
    out = blocked.out if blocked is not None else []
    asked = blockers + [o.node for o in out if o.node not in blockers]
    found = records(asked) if records is not None and asked else {}
    # check mode: its run wrote no run lease, yet is the run the rule asks for, in its rollout
    state = rollout.state_of(seen, req.run_id, client.server_now(), req.slot_prefix, found,
                             req.rollout if client.dry_run else "")
    if client.dry_run:
        state = replace(state, alive=state.alive | {req.run_id})
    decision = rollout.decide(req.node, state, blockers, blocked.limit if blocked is not None else None, out,
                              blocked.domain if blocked is not None else "")
    if decision.action == rollout.STOP:
        raise run.RunStopped(decision.say, outcome=decision.outcome, blocker=decision.blocker,
                             fails_run=decision.fails_run)


def _lease_holder(role: str, lease: leases.Lease) -> Dict[str, Any]:
    due = leases.expiry(lease)
    return {"kind": role, "lease": f"{lease['metadata'].get('namespace', '')}/{lease['metadata']['name']}",
            "holder": leases.holder(lease) or "unknown", "expires": leases.format_time(due) if due else None}


def _earliest(items: List[leases.Lease]) -> Optional[datetime]:
    dues = [d for d in (leases.expiry(lease) for lease in items) if d is not None]
    return min(dues) if dues else None


class Attempt:
    """One node's try at the guard, a slot and its lease; repeatable while waiting."""

    def __init__(self, client: Client, req: Request, node: Dict[str, Any], flavour: Optional[str]) -> None:
        self.client = client
        self.req = req
        self.node = node
        self.flavour = flavour
        self.run_guard = run.NoGuard() if client.dry_run else run.guard_for(client, req.run_id, req.namespace)
        labels = node.get("metadata", {}).get("labels") or {}
        self.domains = topology_budgets.domains(req.parsed_budgets, labels, req.slot_prefix)
        self.needs_nodes = any(d.needs_nodes for d in self.domains)
        self.foreign: List[str] = []  # operator mode: the nodes NMO maintains for someone else
        self._nodes: Optional[List[Dict[str, Any]]] = None
        self._nodes_at = 0.0
        self._busy: Set[str] = set()  # the nodes holding leases of ours at the last look
        self.seen: Optional[List[leases.Lease]] = None  # the list the last try judged from
        # the NodeMaintenances as the wait's watch sees them (None: read when needed, one list)
        self.maintenances: Optional[Callable[[], List[Dict[str, Any]]]] = None
        self.maintenances_listed: Optional[List[Dict[str, Any]]] = None  # the records' list, which a wait watches from
        # model/turns.py: only a node of a run with a turn gives way; never in check mode (its
        # run made no NodeMaintenance to see) nor in operator mode (the slot comes before it)
        self.takes_turns = req.turn is not None and bool(req.run_id) and not req.operator and not client.dry_run

    def records(self, nodes: List[str]) -> Dict[str, Record]:
        """The progress records of the nodes that hold the places this one waits for: from the
        wait's watch, or one list of the NodeMaintenances (a few: the nodes in maintenance)."""
        if self.maintenances is not None:
            return records_of(self.maintenances(), nodes)
        self.maintenances_listed = maintenance.list_all(self.client)
        return records_of(self.maintenances_listed, nodes)

    def node_selector(self) -> str:
        """What the budgets' nodes are listed (and watched) by: their budget's selector, or every node."""
        selectors = {d.budget.list_selector() for d in self.domains if d.needs_nodes}
        return selectors.pop() if len(selectors) == 1 else ""

    def nodes(self) -> List[Dict[str, Any]]:
        """The nodes the budgets count (one paginated list, read again after NODES_RESYNC_SECONDS)."""
        if self._nodes is None or time.monotonic() - self._nodes_at >= NODES_RESYNC_SECONDS:
            self._nodes = list_nodes(self.client, self.node_selector())
            self._nodes_at = time.monotonic()
        return self._nodes

    def busy_of(self, seen: List[leases.Lease], now: datetime) -> Set[str]:
        """The nodes holding leases of ours (a valid slot or place, a node lease) or NMO's work."""
        busy = {leases.holder(lease) for lease in seen if leases.is_valid(lease, now)
                and (lease.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/component")
                == leases.SLOT_LABELS["app.kubernetes.io/component"]}
        busy |= {other for lease in seen if (other := leases.node_of_lease_name(lease["metadata"]["name"]))
                 and leases.is_valid(lease, now)}
        return busy | set(self.foreign)

    def waiters(self, items: List[Dict[str, Any]], busy: Set[str]) -> List[turns.Waiter]:
        """The run's nodes earlier in its order that wait for a place (model/turns.py); ``busy``:
        the nodes holding places (``busy_of``)."""
        return turns.ahead(items, self.req.run_id, self.req.node, int(self.req.turn or 0), busy, waits_for_a_place)

    def gives_way(self, seen: List[leases.Lease], items: List[Dict[str, Any]], looks: List[Look]) -> Optional[Blocked]:
        """Blocked when earlier nodes of the run, served first in the run's order, would take a
        place this node is about to take (model/turns.py); None when it may go. ``seen``: the
        leases before this node took anything."""
        req, now = self.req, self.client.server_now()
        busy = self.busy_of(seen, now) - {req.node}
        waiting = self.waiters(items, busy)
        if not waiting:
            return None
        nodes = self.nodes() if self.needs_nodes else []
        by_name = {n["metadata"]["name"]: n for n in nodes}
        # an earlier node out of service already is counted by its domains: it takes no place
        waiting = [w for w in waiting if not (w.node in by_name and topology_budgets.out_of_service(by_name[w.node]))]
        domains = {d.family: d for d in self.domains}

        def families_of(name: str) -> List[str]:
            labels = (by_name.get(name, {}).get("metadata") or {}).get("labels") or {}
            of_node = topology_budgets.domains(req.parsed_budgets, labels, req.slot_prefix)
            domains.update({d.family: d for d in of_node if d.family not in domains})
            return [req.slot_prefix] + [d.family for d in of_node]

        def room(family: str) -> int:
            valid = [s for s in leases.slots_of(seen, family)
                     if leases.is_valid(s, now) and leases.holder(s) != req.node]
            if family == req.slot_prefix:
                return req.concurrency - len(valid)
            domain = domains[family]
            of_domain = topology_budgets.members(domain, nodes)
            placed = {leases.holder(s) for s in valid}
            return (topology_budgets.limit(domain, len(of_domain)) - len(valid)
                    - len(topology_budgets.disrupted(of_domain, req.node, placed, busy)))

        mine = [req.slot_prefix] + [look.domain.family for look in looks if not look.optional]
        short = turns.yields_to(waiting, families_of, room, mine)
        if not short:
            return None
        first = list(dict.fromkeys(name for names in short.values() for name in names))
        what = "; ".join(f"the maintenance slots (concurrency {req.concurrency})" if family == req.slot_prefix
                         else domains[family].describe() for family in short)
        message = (f"{BLOCKED_PREFIX} {', '.join(first)} {'goes' if len(first) == 1 else 'go'} first: earlier in "
                   f"the run's order (node_maintenance_order), waiting for the last free place(s) of {what}.")
        return Blocked("turn", message, BLOCKED, message, [{"kind": "turn", "holder": name} for name in first])

    def look(self, seen: List[leases.Lease]) -> Union[Blocked, List[Look]]:
        """Every budget domain of the node judged from ``seen``, writing nothing: Blocked by the
        first that has no place for it, else the limits to take the places with."""
        req = self.req
        now = self.client.server_now()
        alive = leases.alive_run_ids(seen, now)
        busy = self.busy_of(seen, now)
        if self._busy - busy:
            # a node let its places go since the nodes were read: it may stay out of service
            # without them (a quarantine, a failure kept), which only a new read of it shows
            self._nodes = None
        self._busy = busy
        nodes = self.nodes() if self.needs_nodes else []
        # a node resumed out of service (a gone run's, cordoned, its leases ours): every domain
        # counts it already (topology_budgets.disrupted), a place of its or not; finishing it
        # gives capacity back. It never waits for a place, which a domain full of nodes that
        # nothing releases (an administrator's cordon) would make for ever (docs/design.md §18.1)
        already_out = req.node in busy and bool((self.node.get("spec") or {}).get("unschedulable"))
        looks = []
        for domain in self.domains:
            family = leases.slots_of(seen, domain.family)
            disrupted: List[str] = []
            limit = topology_budgets.limit(domain, 1)
            if domain.needs_nodes:
                of_domain = topology_budgets.members(domain, nodes)
                total = len(of_domain) + (req.node not in {n["metadata"]["name"] for n in of_domain})
                limit = topology_budgets.limit(domain, total)
                placed = {leases.holder(s) for s in family if leases.is_valid(s, now)}
                disrupted = topology_budgets.disrupted(of_domain, req.node, placed, busy)
            plan = leases.plan_slot(family, req.node, domain.family, limit, now, req.run_id, alive, len(disrupted))
            if plan.blocked and already_out:
                looks.append(Look(domain, limit, disrupted, optional=True))
                continue
            if plan.blocked:
                blocked = self.budget_blocked(Look(domain, limit, disrupted), plan.blockers)
                by_name = {n["metadata"]["name"]: n for n in nodes}
                blocked.out = [rollout.OutOfService.of(by_name[name], name in busy) for name in disrupted
                               if name in by_name]
                return blocked
            looks.append(Look(domain, limit, disrupted))
        return looks

    def budget_blocked(self, look: Look, blockers: List[leases.Lease]) -> Blocked:
        names = ", ".join(f"{leases.holder(s) or 'unknown'} ({s['metadata']['name']}"
                          f"{', run ' + leases.run_annotation(s) if leases.run_annotation(s) else ''})"
                          for s in blockers) or "none"
        message = (f"{BLOCKED_PREFIX} {look.domain.describe()}: {len(blockers)} of {look.limit} place(s) are held: "
                   f"{names}.")
        if look.disrupted:
            message += (f" {len(look.disrupted)} node(s) of it are already disrupted (NotReady, cordoned or "
                        f"in maintenance) and count against it: {', '.join(look.disrupted)}.")
        holders = [{**_lease_holder("budget", s), "budget": look.domain.describe(),
                    "run": leases.run_annotation(s)} for s in blockers]
        holders += [{"kind": "budget", "budget": look.domain.describe(), "holder": name, "disrupted": True}
                    for name in look.disrupted]
        return Blocked("budget", message, BLOCKED, message, holders, due=_earliest(blockers), limit=look.limit,
                       domain=look.domain.describe())

    def take_places(self, looks: List[Look]) -> Union[Blocked, List[leases.Outcome]]:
        """A place in each domain, in the looks' order; Blocked (what was taken given back) at
        the first that is full by now."""
        req, taken = self.req, []
        for item in looks:
            outcome, others = lease_store.acquire_slot(
                self.client, self.node, item.limit, item.domain.family, req.duration, req.namespace, req.run_id,
                reserved=len(item.disrupted),
                annotations={leases.BUDGET_ANNOTATION: item.domain.describe()})
            if outcome.action == leases.BLOCKED and item.optional:
                continue  # out of service already: it goes on without a place of this domain
            if outcome.action == leases.BLOCKED:
                for place in reversed(taken):
                    self.give_back(place)
                return self.budget_blocked(item, others)
            taken.append(outcome)
        return taken

    def guard(self, our_slot: Optional[leases.Lease]) -> etcd_guard.Verdict:
        req = self.req
        now = self.client.server_now()
        going = leases.disrupting_nodes(lease_store.list_leases(self.client, req.namespace), req.node,
                                        req.slot_prefix, our_slot, now)
        return etcd_guard.verdict(self.client, req.node, self.flavour or "none", req.etcd, going)

    def etcd_blocked(self, verdict: etcd_guard.Verdict) -> Blocked:
        holders = [{"kind": "etcd", "holder": text} for text in verdict.unhealthy]
        return Blocked("etcd", verdict.reason, ETCD_BLOCKED, etcd_guard.blocked_message(self.req.node), holders,
                       never=verdict.never, verdict=verdict)

    def give_back(self, slot: leases.Outcome) -> None:
        if slot.action in (leases.CREATE, leases.TAKE_OVER) and not self.client.dry_run and slot.after is not None:
            lease_store.release(self.client, self.req.namespace, slot.name, self.req.node, run_id=self.req.run_id)

    def run(self, seen: Optional[List[leases.Lease]] = None) -> Union[Blocked, Acquired]:
        """One try, after the rollout scheduler's word (RunStopped when it says stop): before
        anything is taken, and again over the nodes that hold the places the node waits for.
        ``seen``: a list of the leases namespace the caller has just made."""
        self.seen = None
        outcome = self._try(seen)
        if seen is not None and isinstance(outcome, Blocked) and any(o.ours and not o.busy for o in outcome.out):
            # A full domain counts a node our begin marked that holds no lease in ``seen``: a
            # begin takes its leases, then cordons, so a view of the leases a moment older than
            # the node list misses a node just begun, and the scheduler would stop the run for a
            # node out of service that nothing puts back. The leases listed afresh say which.
            outcome = self._try(None)
        if isinstance(outcome, Blocked) and outcome.kind in ("slot", "budget") and self.seen is not None:
            scheduled(self.client, self.req, self.seen,
                      [h["holder"] for h in outcome.holders if h.get("holder") and not h.get("disrupted")],
                      self.records, outcome)
        return outcome

    def _try(self, seen: Optional[List[leases.Lease]] = None) -> Union[Blocked, Acquired]:
        req, client = self.req, self.client
        verdict = None
        if self.flavour:
            verdict = self.guard(None)
            if not verdict.allowed:
                return self.etcd_blocked(verdict)
        # Read-only look first: taking a slot only to give it back would wake every waiter. One
        # list of the namespace shows the node's lease, the run's own lease and the slots.
        seen = lease_store.list_leases(client, req.namespace) if seen is None else seen
        self.seen = seen
        scheduled(client, req, seen, [])
        held = leases.as_ours(leases.named(seen, leases.node_lease_name(req.node)))
        nmos_own = req.operator and leases.holder(held) == leases.NMO_HOLDER  # NMO's lease of this node
        if leases.plan(held, leases.HOLDER, client.server_now(), req.duration)[0] == leases.BLOCKED and not nmos_own:
            return self.lease_blocked(held)
        self.run_guard.check(lease_list=seen)  # never take a slot for a run that is gone
        if req.operator:
            busy = self.operator_busy(seen)
            if busy is not None:
                return busy
        looks = self.look(seen) if self.domains else []
        if isinstance(looks, Blocked):
            return looks  # a budget is full: nothing taken, nothing to give back
        # model/turns.py: a node out of service already never gives way (finishing it frees a place)
        turns_apply = self.takes_turns and not any(look.optional for look in looks) and \
            not rollout.kept_leases(seen, req.node, req.slot_prefix)
        if turns_apply and self.maintenances is not None:  # waiting: the watch shows the waiters
            way = self.gives_way(seen, self.maintenances(), looks)
            if way is not None:
                return way
        slot, others = lease_store.acquire_slot(client, self.node, req.concurrency, req.slot_prefix, req.duration,
                                                req.namespace, req.run_id, seen=seen)
        if slot.action == leases.BLOCKED:
            names = ", ".join(f"{leases.holder(s) or 'unknown'} ({s['metadata']['name']})" for s in others)
            message = (f"{BLOCKED_PREFIX} {len(others)} of {req.concurrency} maintenance slot(s) are held: {names}.")
            return Blocked("slot", message, BLOCKED, message, [_lease_holder("slot", s) for s in others],
                           due=_earliest(others), limit=req.concurrency,
                           domain=f"the maintenance slots (concurrency {req.concurrency})")
        newly = slot.action in (leases.CREATE, leases.TAKE_OVER)
        if self.flavour and newly and req.concurrency > 1 and not self.client.dry_run:
            verdict = self.guard(slot.after)  # another control-plane node may have passed the guard with us
            if not verdict.allowed:
                self.give_back(slot)
                return self.etcd_blocked(verdict)
        places = self.take_places(looks) if looks else []
        if isinstance(places, Blocked):
            self.give_back(slot)
            return places
        if turns_apply and slot.action in (leases.CREATE, leases.TAKE_OVER):
            # an earlier node may have arrived while this one took its places: one fresh list of
            # the NodeMaintenances shows it, and the places go back to it (docs/design.md §18.7).
            # A list, not the wait's watch: an earlier node's NodeMaintenance made a moment ago
            # may not have reached the watch yet, and the later node would go first
            way = self.gives_way(seen, maintenance.list_all(client), looks)
            if way is not None:
                for place in reversed(places):
                    self.give_back(place)
                self.give_back(slot)
                return way
        if req.operator:  # NMO requests the node lease itself, as node-maintenance
            return Acquired(slot, leases.Outcome(leases.HELD, "", None, None), verdict, places)
        lease = lease_store.acquire_node_lease(client, self.node, req.duration, req.namespace,
                                               run_id=req.run_id)
        if lease.action == leases.BLOCKED:
            for place in reversed(places):
                self.give_back(place)
            self.give_back(slot)
            return self.lease_blocked(lease.before)
        return Acquired(slot, lease, verdict, places)

    def operator_busy(self, seen: List[leases.Lease]) -> Optional[Blocked]:
        """Blocked when the NodeMaintenances NMO works on for other nodes, without a slot of
        ours (made by kubectl, by another tool), and the slots of others fill the concurrency."""
        req = self.req
        now = self.client.server_now()
        slotted = {leases.holder(s) for s in leases.slots_of(seen, req.slot_prefix) if leases.is_valid(s, now)}
        foreign = sorted({nm.get("spec", {}).get("nodeName", "") for nm in maintenance.list_all(self.client)}
                         - slotted - {req.node})
        self.foreign = foreign  # disrupted for the topology budgets too
        if not foreign or len(slotted - {req.node}) + len(foreign) < req.concurrency:
            return None
        message = (f"{BLOCKED_PREFIX} the Node Maintenance Operator is maintaining "
                   f"{', '.join(foreign)} for someone else, and {len(slotted - {req.node})} maintenance slot(s) "
                   f"are held: at most {req.concurrency} node(s) at once.")
        return Blocked("slot", message, BLOCKED, message, [{"kind": "nodemaintenance", "holder": n} for n in foreign])

    def lease_blocked(self, held: Optional[leases.Lease]) -> Blocked:
        held = held or {"metadata": {"name": leases.node_lease_name(self.req.node)}}
        message = (f"{BLOCKED_PREFIX} Lease {self.req.namespace}/{held['metadata']['name']} is held by "
                   f"{leases.holder(held) or 'unknown'}.")
        return Blocked("lease", message, BLOCKED, message, [_lease_holder("node", held)], due=leases.expiry(held))


REPORT_EVERY = 10.0  # seconds: a wait whose holders keep changing tells of it at most this often


class Reporter:
    """Tells the NodeMaintenance (or the Node) about each new blocking situation: its status's
    lastError and an event. A wait of another kind, as the run's other nodes read it (a wait
    for a place or not, ``waits_for_a_place``: model/turns.py), is told at once; the same kind
    with other holders or another full domain (nodes of a budget coming and going at
    concurrency 8) at most every REPORT_EVERY seconds, the latest when it is due (``due``,
    from the wait's tick), not at every look: a write and an event each time would be most
    of a waiting node's requests."""

    def __init__(self, client: Client, nm: Optional[Dict[str, Any]], node: Dict[str, Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.nm = nm
        self.involved = nm or node
        self.recorder = EventRecorder(client)
        self.holders: List[Dict[str, Any]] = []
        self.clock = clock
        self._last: Optional[str] = None  # the message as last told
        self._kind: Optional[bool] = None
        self._at = 0.0
        self._pending: Optional[Blocked] = None  # a newer message of the same wait, not told yet

    def blocked(self, blocked: Blocked) -> None:
        for h in blocked.holders:
            if h not in self.holders:
                self.holders.append(h)
        if blocked.message == self._last:
            self._pending = None
            return
        kind = waits_for_a_place(blocked.message)
        if self._last is not None and kind == self._kind and self.clock() - self._at < REPORT_EVERY:
            self._pending = blocked
            return
        self._tell(blocked, kind)

    def due(self) -> None:
        """The wait's tick: the newest message held back, once REPORT_EVERY has passed."""
        if self._pending is not None and self.clock() - self._at >= REPORT_EVERY:
            self._tell(self._pending, waits_for_a_place(self._pending.message))

    def _tell(self, blocked: Blocked, kind: bool) -> None:
        self._last, self._kind, self._at, self._pending = blocked.message, kind, self.clock(), None
        self.recorder.record(self.involved, blocked.reason, blocked.event_message)
        if self.nm is not None:
            # errorOnLeaseCount is NMO's: above 3 it fails the maintenance and undoes the node.
            # A wait for our turn is not a lost lease, so it is never counted there.
            self.nm, _changed = maintenance.update_status(self.client, self.nm, {
                "phase": "Pending", "lastError": blocked.message})

    def acquired(self, outcome: Acquired) -> None:
        taken = [outcome.lease, outcome.slot] + outcome.places
        if any(o.action in (leases.CREATE, leases.TAKE_OVER) for o in taken):
            names = ", ".join(n for n in (o.name for o in taken) if n)
            self.recorder.record(self.involved, LEASE_ACQUIRED, f"{REASONS[LEASE_ACQUIRED][1]}: {names}")
        status = (self.nm or {}).get("status") or {}
        if self.nm is not None and self._last is not None and status.get("lastError") == self._last:
            self.nm = maintenance.update_status(self.client, self.nm, {"lastError": ""})[0]


def _find_maintenance(client: Client, req: Request) -> Optional[Dict[str, Any]]:
    if req.maintenance:
        nm = maintenance.get(client, req.maintenance)
        if nm is None:
            raise InputError(f"NodeMaintenance {req.maintenance} not found: create it first or leave maintenance out")
        if nm.get("spec", {}).get("nodeName") != req.node:
            raise InputError(f"NodeMaintenance {req.maintenance} is for node {nm.get('spec', {}).get('nodeName')}, "
                             f"not {req.node}")
        return nm
    return maintenance.locate(client, req.node)


def _wait(client: Client, req: Request, attempt: Attempt, reporter: Reporter, first: Blocked,
          timeout: float) -> Acquired:
    # The NodeMaintenances, all of them (the nodes in maintenance: a few): the blockers' progress
    # records, so a blocker's failure wakes the wait (the scheduler reads it), and this node's
    # own, whose deletion (recover.yml, a user) ends the wait.
    # The leases and the NodeMaintenances watched from the lists the first look made (when it
    # made them: a view handed in is watched from a list of its own), not listed again: the
    # watch brings what changed since, the wait's first check looks at once (moved -1)
    watchers = [Watcher(client, lease_store.leases_path(req.namespace), initial=start_from(attempt.seen)),
                Watcher(client, maintenance.API, initial=start_from(attempt.maintenances_listed))]
    if attempt.flavour:
        watchers += [Watcher(client, path, query)
                     for path, query in etcd_guard.watched_paths(attempt.flavour, req.etcd)]
    state: Dict[str, Any] = {"blocked": first, "moved": -1, "failures": None, "ahead": None, "at": time.monotonic()}
    multi = MultiWatcher(*watchers)
    maintenances = watchers[1]
    attempt.maintenances = lambda: list(maintenances.objects.values())

    def blockers_failures() -> Any:
        """What the scheduler reads of the NodeMaintenances: the blockers' failures. Another
        node's drain progress moves them often and is no reason to look again (a request)."""
        names = [h["holder"] for h in state["blocked"].holders if h.get("holder")]
        return sorted((n, rollout.failure_of(r)) for n, r in attempt.records(names).items())

    def still_wanted() -> None:
        """A waiting module goes no further for a run that is gone or a maintenance that ended."""
        attempt.run_guard.check(lease_list=list(watchers[0].objects.values()))
        if req.maintenance:
            nm = next((o for o in maintenances.objects.values()
                       if (o.get("metadata") or {}).get("name") == req.maintenance), None)
            if nm is None:
                raise run.MaintenanceGone(f"NodeMaintenance {req.maintenance} was deleted while node {req.node} "
                                          "waited for its turn: stopped without taking a slot or a lease")
            attempt.run_guard.check_maintenance(nm)

    def check() -> Optional[Acquired]:
        still_wanted()
        blocked: Blocked = state["blocked"]
        lapsed = blocked.due is not None and client.server_now() >= blocked.due
        # nodes are not watched either: a budget counting NotReady nodes looks again as often.
        # (Not by a watch of them: two watches deliver a node's cordon and the lease its begin
        # took just before in either order, and a cordon seen first reads as a node out of
        # service that nothing puts back, for which the scheduler stops the run.)
        resync = (attempt.flavour is not None or attempt.needs_nodes) and \
            time.monotonic() - state["at"] >= ETCD_RESYNC_SECONDS
        # -1: the first check after the watch started catches what changed before it did
        moved = sum(w.applied for w in watchers if w is not maintenances)
        failures = blockers_failures()
        # the run's earlier waiters (model/turns.py): one that took its place or stopped
        # waiting may leave this node the place it gave way for
        ahead = [w.node for w in attempt.waiters(
            list(maintenances.objects.values()),
            attempt.busy_of(list(watchers[0].objects.values()), client.server_now()))] if attempt.takes_turns else []
        if moved == state["moved"] and failures == state["failures"] and ahead == state["ahead"] and not lapsed \
                and not resync:
            return None
        state.update(moved=moved, failures=failures, ahead=ahead, at=time.monotonic())
        # the leases as the watch has them, not a list a look: a write made on a view a moment
        # old conflicts and the write's own retry lists afresh (stores/leases.py)
        outcome = attempt.run(list(watchers[0].objects.values()))
        if isinstance(outcome, Acquired):
            return outcome
        if outcome.never:
            raise RefusedError(outcome.message, holders=outcome.holders)
        state["blocked"] = outcome
        reporter.blocked(outcome)
        return None

    with multi:
        return wait_until(multi, check, timeout, lambda: state["blocked"].message, tick=reporter.due,
                          tick_every=0.5)


def _entry(role: str, outcome: leases.Outcome) -> Dict[str, Any]:
    lease = outcome.after or {}
    due = leases.expiry(lease)
    return {"role": role, "name": outcome.name, "namespace": lease.get("metadata", {}).get("namespace", ""),
            "action": outcome.action, "holder": leases.holder(lease),
            "expires": leases.format_time(due) if due else None}


UNREAD: Any = object()  # acquire(nm=...): not read by the caller


def refuse_never_allowed(client: Client, req: Request, node: Dict[str, Any]) -> None:
    """Before the begin writes anything: a control-plane node the etcd guard can never let go
    (the only etcd member, say) is refused now, not after its NodeMaintenance was made.
    Waiting verdicts are left to ``acquire``, which waits."""
    if not is_control_plane(node):
        return
    flavour = etcd_guard.detect(client, req.etcd)
    if flavour == "none":
        return
    verdict = etcd_guard.verdict(client, req.node, flavour, req.etcd, set())
    if verdict.never:
        raise RefusedError(f"{verdict.reason}. Nothing was written", etcd=verdict.as_dict())


def acquire(client: Client, req: Request, node: Optional[Dict[str, Any]] = None,
            nm: Any = UNREAD, seen: Optional[List[leases.Lease]] = None) -> Dict[str, Any]:
    """Take the node's slot and lease (docs/design.md §4.2, §4.3), waiting for them when ``req.wait``.
    A caller that has just read the node, the NodeMaintenance named by ``req.maintenance``
    (None: there is none) or the leases namespace (``seen``) passes them and saves the reads."""
    req.validate()
    node = node or read_node(client, req.node)
    if nm is UNREAD:
        nm = _find_maintenance(client, req)
    flavour = etcd_guard.detect(client, req.etcd) if is_control_plane(node) else None
    # In a dry run the namespace is looked for; otherwise it is made only when a lease
    # cannot be created for its absence (the run start made it: almost never).
    ns_created = lease_store.ensure_namespace(client, req.namespace) if client.dry_run else False
    attempt = Attempt(client, req, node, flavour)
    reporter = Reporter(client, nm, node)
    started = time.monotonic()
    result: Dict[str, Any] = {"node": req.node, "state": "acquired", "maintenance": (nm or {}).get(
        "metadata", {}).get("name"), "namespace_created": ns_created}
    try:
        outcome = attempt.run(seen)
    except lease_store.NamespaceMissing:
        result["namespace_created"] = ns_created = lease_store.ensure_namespace(client, req.namespace)
        outcome = attempt.run()
    if isinstance(outcome, Blocked):
        reporter.holders = list(outcome.holders)
        verdict = outcome.verdict.as_dict() if outcome.verdict else None
        reporter.blocked(outcome)  # writes nothing in check mode
        if outcome.never:
            raise RefusedError(outcome.message, holders=outcome.holders, etcd=verdict)
        if not req.wait:
            raise BlockedError(outcome.message, holders=outcome.holders, etcd=verdict)
        if client.dry_run:
            # the shape of a taken lease's answer (the begin puts its diff in its own): nothing taken
            return {**result, "changed": False, "would_wait": True, "blocked": outcome.message,
                    "holders": outcome.holders, "etcd": verdict, "acquired": [], "waited": 0.0,
                    "diff": {"before": {"leases": {}}, "after": {"leases": {}}},
                    "warnings": [f"check mode: would wait: {outcome.message}"]}
        try:
            outcome = _wait(client, req, attempt, reporter, outcome, req.timeout)
        except WaitTimeout as exc:
            raise WaitTimeout(exc.message, holders=reporter.holders,
                              waited=round(time.monotonic() - started, 3)) from None
    reporter.acquired(outcome)
    slot, lease = outcome.slot, outcome.lease
    due = leases.expiry(lease.after)
    warnings = [outcome.verdict.warning] if outcome.verdict and outcome.verdict.warning else []
    warnings += reporter.recorder.warnings
    held = [("slot", slot)] + [("budget", place) for place in outcome.places]
    held += [] if req.operator else [("node", lease)]  # in operator mode NMO holds the node lease
    return {**result,
            "changed": slot.changed or lease.changed or ns_created or any(p.changed for p in outcome.places),
            "acquired": [_entry(role, outcome) for role, outcome in held],
            "slot": slot.name, "places": [p.name for p in outcome.places],
            "lease": leases.summary(lease.after), "expires": leases.format_time(due) if due else None,
            "holders": reporter.holders, "waited": round(time.monotonic() - started, 3),
            "etcd": outcome.verdict.as_dict() if outcome.verdict else None,
            "diff": {"before": {"leases": {o.name: leases.summary(o.before) for _role, o in held}},
                     "after": {"leases": {o.name: leases.summary(o.after) for _role, o in held}}},
            "warnings": warnings}


def release(client: Client, req: Request, nm: Any = UNREAD,
            seen: Optional[List[leases.Lease]] = None) -> Dict[str, Any]:
    """Delete the node lease and the node's slots, each only when ours; report the others.
    ``nm``: the NodeMaintenance the caller has read (None: none), told of the release.
    ``seen``: a list of the namespace the caller made within this call (each delete's
    precondition holds it to the version listed: one renewed since is read again)."""
    req.validate()
    released: List[Dict[str, Any]] = []
    kept: List[Dict[str, Any]] = []
    before: Dict[str, Any] = {}
    after: Dict[str, Any] = {}
    name = leases.node_lease_name(req.node)
    if seen is None:  # the node's lease and its slots, in one read
        seen = lease_store.list_leases(client, req.namespace)
    targets = [] if req.operator else [("node", name, leases.HOLDER)]  # NMO releases its own
    targets += [("slot", s["metadata"]["name"], req.node) for s in leases.own_slots(seen, req.node, req.slot_prefix)]
    # the node's topology-budget places, whatever the budgets of the run that took them
    targets += [("budget", s["metadata"]["name"], req.node) for s in leases.own_places(seen, req.node, req.slot_prefix)]
    for role, lease_name, identity in targets:
        action, lease = lease_store.release(client, req.namespace, lease_name, identity,
                                            run_id=req.run_id, seen=seen)
        if lease is None:
            continue
        before[lease_name] = leases.summary(lease)
        if action == "deleted":
            released.append({"role": role, "name": lease_name, "namespace": req.namespace, "holder": identity})
            after[lease_name] = None
        elif action == "held_by_other":
            kept.append(_lease_holder(role, lease))
            after[lease_name] = before[lease_name]
    warnings = [f"lease {k['lease']} is held by {k['holder']}, not by us: left in place" for k in kept]
    if released:
        if nm is UNREAD:
            nm = maintenance.locate(client, req.node) if not req.maintenance else maintenance.get(client, req.maintenance)
        involved = nm or client.get_or_none(paths.node(req.node))
        if involved is not None:
            names = ", ".join(r["name"] for r in released)
            recorder = EventRecorder(client)
            recorder.record(involved, LEASE_RELEASED, f"{REASONS[LEASE_RELEASED][1]}: {names}")
            warnings += recorder.warnings
    return {"node": req.node, "state": "released", "changed": bool(released), "released": released,
            "not_released": kept, "holders": kept, "diff": {"before": {"leases": before}, "after": {"leases": after}},
            "warnings": warnings}
