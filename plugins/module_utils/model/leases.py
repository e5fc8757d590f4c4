"""medik8s node leases and cluster-wide maintenance slots (``coordination.k8s.io/v1`` Leases).

The node lease speaks the wire of medik8s/common, which Node Health Check and Self Node
Remediation read: namespace ``medik8s-leases``, name ``node-<node>``, holder
``nmo.maintenance``, owner reference to the Node, MicroTime acquire/renew times. (The holder
is not NMO's ``node-maintenance``: a running NMO would take a lease of that name for its
own, renew it and delete it.) Held by
someone else and still valid: blocked. Expired: taken over (``leaseTransitions`` + 1). Ours:
renewed when it would lapse within the requested duration.

A maintenance slot is a Lease named ``<prefix>-<i>`` in the same namespace whose holder is
the node under maintenance. At most ``concurrency`` valid slots may be held at once: a slot
index below ``concurrency`` is taken by a create (409: someone was faster, try the next) or by
a resourceVersion-guarded update of an expired one, so two runs can never hold the same
index. Every held slot counts, also one at an index beyond our ``concurrency`` taken by a
run that allowed more.

This file holds the pure rules (names, validity, what to do with a lease, which slot to
take); the reads and writes that apply them are stores/leases.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Dict, List, Optional, Set, Tuple

from ..errors import InputError
from . import renewal, validation
from .times import format_time, parse_time

Lease = Dict[str, Any]

LEASE_NAMESPACE = "medik8s-leases"
HOLDER = "nmo.maintenance"
NMO_HOLDER = "node-maintenance"  # the Node Maintenance Operator's, and ours before runs had ids
DEFAULT_DURATION = 3600
SLOT_PREFIX = "nmo-maintenance-slot"
MAX_ATTEMPTS = 8
MANAGED_BY = {"app.kubernetes.io/managed-by": "nmo.maintenance"}
SLOT_LABELS = {**MANAGED_BY, "app.kubernetes.io/component": "maintenance-slot"}
# The playbook run that holds a lease (see run.py); medik8s ignores annotations.
RUN_ANNOTATION = "nmo.maintenance/run"
RUN_LEASE_PREFIX = "nmo-run-"
# A topology budget's place (a slot of a family of its own) says its budget and domain here
BUDGET_ANNOTATION = "nmo.maintenance/budget"

# What acquiring a lease does (or would do).
CREATE, RENEW, TAKE_OVER, HELD, BLOCKED = "created", "renewed", "taken_over", "held", "blocked"


# -- one lease, pure ------------------------------------------------------------------------
def node_lease_name(node: str) -> str:
    """medik8s names a lease ``<kind>-<name>`` in lower case."""
    return f"node-{node}".lower()


def node_of_lease_name(name: str) -> Optional[str]:
    return name[len("node-"):] if name.startswith("node-") else None


def holder(lease: Optional[Lease]) -> str:
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def expiry(lease: Optional[Lease]) -> Optional[datetime]:
    """renewTime + leaseDurationSeconds; None when either is missing."""
    spec = (lease or {}).get("spec") or {}
    renewed = parse_time(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or duration is None:
        return None
    return renewed + timedelta(seconds=int(duration))


# Our "now" is the API server's Date (whole seconds) moved on by our monotonic clock: up to a
# second early. A renewTime that far ahead of it was written at the server's present by a
# more precise writer, not by a skewed clock.
CLOCK_TOLERANCE = timedelta(seconds=2)


def is_valid(lease: Optional[Lease], now: datetime) -> bool:
    """Valid while not yet due and not renewed in the future (a skewed clock gets no say)."""
    due = expiry(lease)
    if due is None:
        return False
    renewed = parse_time(lease["spec"]["renewTime"])
    return not due < now and not renewed > now + CLOCK_TOLERANCE  # type: ignore[operator]


def plan(lease: Optional[Lease], identity: str, now: datetime, duration: int) -> Tuple[str, bool]:
    """What acquiring ``lease`` for ``identity`` means: (action, whether acquireTime is reset)."""
    if lease is None:
        return CREATE, True
    spec = lease.get("spec") or {}
    if holder(lease) == identity:
        due = expiry(lease)
        if due is None:
            return RENEW, True
        if due < now:
            return RENEW, spec.get("acquireTime") is None
        return (RENEW, False) if due < now + timedelta(seconds=duration) else (HELD, False)
    if is_valid(lease, now):
        return BLOCKED, False
    return TAKE_OVER, True


def owner_reference(node: Dict[str, Any]) -> Dict[str, Any]:
    meta = node.get("metadata", {})
    return {"apiVersion": "v1", "kind": "Node", "name": meta.get("name", ""), "uid": meta.get("uid", "")}


def new_lease(name: str, namespace: str, identity: str, duration: int, now: datetime,
              owner: Optional[Dict[str, Any]], labels: Optional[Dict[str, str]] = None) -> Lease:
    stamp = format_time(now)
    meta: Dict[str, Any] = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [owner]
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": identity, "leaseDurationSeconds": duration, "acquireTime": stamp,
                     "renewTime": stamp, "leaseTransitions": 0}}


def as_ours(lease: Optional[Lease]) -> Optional[Lease]:
    """A node lease that this collection wrote under NMO's holder name (it carries a run
    annotation, which NMO never writes) is read as held by HOLDER; anything else unchanged."""
    if lease is not None and holder(lease) == NMO_HOLDER and run_annotation(lease):
        lease = copy.deepcopy(lease)
        lease["spec"]["holderIdentity"] = HOLDER
    return lease


def with_run(body: Lease, run_id: str) -> Lease:
    """The lease annotated with the run that holds it (unchanged without a run)."""
    if run_id:
        body["metadata"].setdefault("annotations", {})[RUN_ANNOTATION] = run_id
    return body


def alive_run_ids(leases_seen: List[Lease], now: datetime) -> Set[str]:
    """The runs whose run lease (``nmo-run-<id>``) is valid at ``now``."""
    prefix = RUN_LEASE_PREFIX
    return {lease["metadata"]["name"][len(prefix):] for lease in leases_seen
            if lease.get("metadata", {}).get("name", "").startswith(prefix) and is_valid(lease, now)}


def renewed(lease: Lease, identity: str, duration: int, now: datetime, reset_acquire: bool,
            owner: Optional[Dict[str, Any]]) -> Lease:
    """The read lease made ours until now + duration; keeps its resourceVersion for the PUT."""
    body = copy.deepcopy(lease)
    spec = body.setdefault("spec", {})
    stamp = format_time(now)
    if reset_acquire:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
    if owner:
        body["metadata"]["ownerReferences"] = [owner]
    spec.update({"holderIdentity": identity, "leaseDurationSeconds": duration, "renewTime": stamp})
    return body


def without_node_owner(body: Lease) -> Lease:
    """A slot written by an earlier version carried the Node as owner: taken off at its next write."""
    refs = [r for r in body["metadata"].get("ownerReferences") or [] if r.get("kind") != "Node"]
    if refs:
        body["metadata"]["ownerReferences"] = refs
    else:
        body["metadata"].pop("ownerReferences", None)
    return body


def summary(lease: Optional[Lease]) -> Optional[Dict[str, Any]]:
    """The spec and where it lives, for results and diffs."""
    if lease is None:
        return None
    due = expiry(lease)
    return {"name": lease["metadata"]["name"], "namespace": lease["metadata"].get("namespace", ""),
            **(lease.get("spec") or {}), "expires": format_time(due) if due else None}


# -- slots, pure ----------------------------------------------------------------------------
def slot_name(prefix: str, index: int) -> str:
    return f"{prefix}-{index}"


def slot_index(name: str, prefix: str) -> Optional[int]:
    rest = name[len(prefix) + 1:] if name.startswith(prefix + "-") else ""
    return int(rest) if rest.isdigit() else None


def slots_of(leases: List[Lease], prefix: str) -> List[Lease]:
    found = [lease for lease in leases if slot_index(lease["metadata"]["name"], prefix) is not None]
    return sorted(found, key=lambda lease: slot_index(lease["metadata"]["name"], prefix) or 0)


@dataclass
class SlotPlan:
    own: Optional[Lease] = None
    blockers: List[Lease] = field(default_factory=list)
    # (slot name, the expired lease to take over or None to create), in the order to try
    candidates: List[Tuple[str, Optional[Lease]]] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return self.own is None and not self.candidates


def run_annotation(lease: Optional[Lease]) -> str:
    return (((lease or {}).get("metadata") or {}).get("annotations") or {}).get(RUN_ANNOTATION) or ""


def held_by_live_run(lease: Optional[Lease], run_id: str, alive_runs: Set[str]) -> bool:
    """The lease names another run than ``run_id``, and that run is alive."""
    other = run_annotation(lease)
    return bool(other) and other != run_id and other in alive_runs


def plan_slot(slots: List[Lease], node: str, prefix: str, concurrency: int, now: datetime,
              run_id: str = "", alive_runs: Optional[Set[str]] = None, reserved: int = 0) -> SlotPlan:
    """Resume with our own slot, else pick free or expired indexes below ``concurrency``.

    A slot of the same node held for another run that is still alive is that run's, not ours.
    ``reserved``: places of the limit taken by nodes already disrupted without a slot of this
    family (a topology budget's NotReady nodes, model/topology_budgets.py); a new slot is then
    taken below ``concurrency - reserved``, so two runs racing for the last place still race
    for one index.
    """
    alive_runs = alive_runs or set()

    def ours(slot: Lease) -> bool:
        return holder(slot) == node and not held_by_live_run(slot, run_id, alive_runs)

    others = [s for s in slots if not ours(s) and is_valid(s, now)]
    own = next((s for s in slots if ours(s)), None)
    if own is not None and (is_valid(own, now) or len(others) + reserved < concurrency):
        return SlotPlan(own=own, blockers=others)
    if len(others) + reserved >= concurrency:
        return SlotPlan(blockers=others)
    by_name = {s["metadata"]["name"]: s for s in slots}
    taken = {s["metadata"]["name"] for s in others}
    names = [slot_name(prefix, index) for index in range(concurrency - reserved)]
    candidates = [(name, by_name.get(name)) for name in names if name not in taken]
    return SlotPlan(blockers=others, candidates=candidates)


def disrupting_nodes(leases: List[Lease], node: str, prefix: str, our_slot: Optional[Lease],
                     now: datetime) -> Set[str]:
    """Other nodes about to be disrupted: a valid node lease names them (maintenance or
    remediation), or they hold a valid slot taken before ``our_slot`` (all slots when None).
    """
    found = {other for lease in leases
             if (other := node_of_lease_name(lease["metadata"]["name"])) and other != node and is_valid(lease, now)}
    ours = (acquired_at(our_slot), node) if our_slot is not None else None
    for slot in slots_of(leases, prefix):
        other = holder(slot)
        if other and other != node and is_valid(slot, now) and (ours is None or (acquired_at(slot), other) < ours):
            found.add(other)
    return found


def acquired_at(lease: Optional[Lease]) -> str:
    """acquireTime as written (MicroTime strings of one format sort in time order)."""
    return ((lease or {}).get("spec") or {}).get("acquireTime") or ""


def validate(concurrency: int, duration: int, prefix: str) -> None:
    validation.number(concurrency, "concurrency", 1, validation.MAX_CONCURRENCY, "nodes", integer=True)
    # leaseDurationSeconds is an int32, and a lease keeps remediation away until it lapses:
    # validation.MAX_LEASE_SECONDS says why a week is the cap; a lease shorter than
    # renewal.MIN_LEASE_SECONDS lapses under a live run between two beats of its heartbeat
    short = renewal.too_short(duration, "duration")
    if short:
        raise InputError(short)
    validation.number(duration, "duration", renewal.MIN_LEASE_SECONDS, validation.MAX_LEASE_SECONDS, "seconds",
                      integer=True)
    shape = ("is not a valid start of a Lease name: use lower-case letters, digits, '-' and '.', "
             "starting with a letter or digit, at most 200 characters")
    if not isinstance(prefix, str) or not prefix or len(prefix) > 200:
        raise InputError(f"slot_prefix: {prefix!r} {shape}")
    try:
        validation.dns_subdomain(slot_name(prefix, int(concurrency) - 1), "slot_prefix")
    except InputError:
        raise InputError(f"slot_prefix: {prefix!r} {shape}") from None
    if prefix.startswith("node-"):
        raise InputError(f"slot_prefix: {prefix!r} must not start with 'node-': those names are node leases")


def own_slots(seen: List[Lease], node: str, prefix: str = SLOT_PREFIX) -> List[Lease]:
    """The slots of ``prefix`` that ``node`` holds, in a list of the namespace."""
    return [s for s in slots_of(seen, prefix) if holder(s) == node]


def own_places(seen: List[Lease], node: str, prefix: str = SLOT_PREFIX) -> List[Lease]:
    """The topology-budget places (model/topology_budgets.py) of ``prefix`` that ``node`` holds:
    slot leases of a family ``<prefix>-<...>`` annotated with their budget."""
    start = prefix + "-"
    return sorted((lease for lease in seen if holder(lease) == node
                   and lease.get("metadata", {}).get("name", "").startswith(start)
                   and slot_index(lease["metadata"]["name"], prefix) is None
                   and BUDGET_ANNOTATION in (lease["metadata"].get("annotations") or {})),
                  key=lambda lease: lease["metadata"]["name"])


def named(seen: List[Lease], name: str) -> Optional[Lease]:
    """The lease called ``name`` in a list of the namespace, None when it is not there."""
    return next((lease for lease in seen if lease.get("metadata", {}).get("name") == name), None)


@dataclass
class Outcome:
    """The result of acquiring one lease: what was done, the lease before and after."""

    action: str
    name: str
    before: Optional[Lease]
    after: Optional[Lease]

    @property
    def changed(self) -> bool:
        return self.action in (CREATE, RENEW, TAKE_OVER)
