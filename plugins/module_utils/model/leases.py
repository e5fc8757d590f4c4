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

The pure functions (times, validity, what to do with a lease, which slot to take) are
separate from the few that talk to the API server.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Set, Tuple

from ..api.client import Client, path_segment
from ..errors import ApiError, ConcurrentUpdateError, Conflict, InputError, NmoError, NotFound
from . import renewal

Lease = Dict[str, Any]

LEASE_NAMESPACE = "medik8s-leases"
HOLDER = "nmo.maintenance"
NMO_HOLDER = "node-maintenance"  # the Node Maintenance Operator's, and ours before runs had ids
DEFAULT_DURATION = 3600
SLOT_PREFIX = "nmo-maintenance-slot"
API = "/apis/coordination.k8s.io/v1"
MAX_ATTEMPTS = 8
MANAGED_BY = {"app.kubernetes.io/managed-by": "nmo.maintenance"}
SLOT_LABELS = {**MANAGED_BY, "app.kubernetes.io/component": "maintenance-slot"}
# The playbook run that holds a lease (see run.py); medik8s ignores annotations.
RUN_ANNOTATION = "nmo.maintenance/run"
RUN_LEASE_PREFIX = "nmo-run-"

# What acquiring a lease does (or would do).
CREATE, RENEW, TAKE_OVER, HELD, BLOCKED = "created", "renewed", "taken_over", "held", "blocked"


# -- time -----------------------------------------------------------------------------------
def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def format_time(moment: datetime) -> str:
    """MicroTime as the API server writes it: 2026-11-29T11:00:00.000000Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Optional[str]) -> Optional[datetime]:
    if not value:
        return None
    text = value.replace("Z", "+00:00")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


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


def run_alive(client: Client, run_id: str, namespace: str, now: datetime) -> bool:
    return bool(run_id) and is_valid(read(client, namespace, RUN_LEASE_PREFIX + run_id), now)


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
              run_id: str = "", alive_runs: Optional[Set[str]] = None) -> SlotPlan:
    """Resume with our own slot, else pick free or expired indexes below ``concurrency``.

    A slot of the same node held for another run that is still alive is that run's, not ours.
    """
    alive_runs = alive_runs or set()

    def ours(slot: Lease) -> bool:
        return holder(slot) == node and not held_by_live_run(slot, run_id, alive_runs)

    others = [s for s in slots if not ours(s) and is_valid(s, now)]
    own = next((s for s in slots if ours(s)), None)
    if own is not None and (is_valid(own, now) or len(others) < concurrency):
        return SlotPlan(own=own, blockers=others)
    if len(others) >= concurrency:
        return SlotPlan(blockers=others)
    by_name = {s["metadata"]["name"]: s for s in slots}
    taken = {s["metadata"]["name"] for s in others}
    names = [slot_name(prefix, index) for index in range(concurrency)]
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
    from . import validation

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


# -- the API --------------------------------------------------------------------------------
def leases_path(namespace: str, name: Optional[str] = None) -> str:
    base = f"{API}/namespaces/{path_segment(namespace)}/leases"
    return f"{base}/{path_segment(name)}" if name else base


def ensure_namespace(client: Client, namespace: str = LEASE_NAMESPACE, check_mode: bool = False) -> bool:
    """Create the leases namespace when missing; True when it was (or would be) created."""
    if client.get_or_none(f"/api/v1/namespaces/{path_segment(namespace)}") is not None:
        return False
    if not check_mode:
        try:
            client.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": namespace}})
        except Conflict:
            return False
        except ApiError as exc:
            if exc.status != 403:
                raise
            raise NmoError(missing_namespace_message(namespace, exc.server_message), status=403) from None
    return True


def missing_namespace_message(namespace: str, server_message: str = "") -> str:
    """What to do when the leases namespace is missing and this identity may not create it
    (the shipped RBAC grants namespaces get only)."""
    how = ("kubectl apply -f meta/rbac/ (namespace.yml creates it, role-leases.yml grants the leases in it)"
           if namespace == LEASE_NAMESPACE else
           f"kubectl create namespace {namespace}, then a Role and RoleBinding for leases in it as "
           "meta/rbac/role-leases.yml and rolebinding-leases.yml do for medik8s-leases")
    refused = f" (the API server refused to create it: {server_message})" if server_message else ""
    return (f"the lease namespace {namespace} does not exist and this identity may not create it{refused}. "
            f"An admin creates it once, with the collection's RBAC: {how}. See docs/rbac.md.")


class NamespaceMissing(NmoError):
    """A lease could not be created: its namespace does not exist (ensure_namespace makes it)."""


def read(client: Client, namespace: str, name: str) -> Optional[Lease]:
    return client.get_or_none(leases_path(namespace, name))


def list_leases(client: Client, namespace: str = LEASE_NAMESPACE) -> List[Lease]:
    return client.get(leases_path(namespace)).get("items", [])


def named(seen: List[Lease], name: str) -> Optional[Lease]:
    """The lease called ``name`` in a list of the namespace, None when it is not there."""
    return next((lease for lease in seen if lease.get("metadata", {}).get("name") == name), None)


def create(client: Client, body: Lease) -> Lease:
    """Create it; NamespaceMissing when its namespace is not there (a 404 on create)."""
    namespace = body["metadata"]["namespace"]
    try:
        return client.post(leases_path(namespace), body)
    except NotFound:
        raise NamespaceMissing(f"namespace {namespace} does not exist: lease {body['metadata']['name']} "
                               "cannot be created there", status=404) from None


def write(client: Client, body: Lease, existing: Optional[Lease]) -> Lease:
    """Create, or update exactly the version read (the body carries its resourceVersion)."""
    meta = body["metadata"]
    if existing is None:
        return create(client, body)
    return client.put(leases_path(meta["namespace"], meta["name"]), body)


def delete(client: Client, lease: Lease) -> bool:
    """Delete exactly the version read; False when it is already gone. Conflict propagates."""
    meta = lease["metadata"]
    options = {"apiVersion": "v1", "kind": "DeleteOptions",
               "preconditions": {"uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}}
    try:
        client.delete(leases_path(meta["namespace"], meta["name"]), options)
        return True
    except NotFound as exc:
        return exc.attempts > 1  # a retried delete finds gone what its first attempt deleted


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


def acquire_node_lease(client: Client, node: Dict[str, Any], duration: int = DEFAULT_DURATION,
                       namespace: str = LEASE_NAMESPACE, identity: str = HOLDER,
                       check_mode: bool = False, run_id: str = "") -> Outcome:
    """Create, renew or take over the node's lease; BLOCKED when someone else validly holds it,
    or when it is held under our holder name for another run that is still alive."""
    name = node_lease_name(node["metadata"]["name"])
    owner = owner_reference(node)
    if not check_mode:
        # Created without a read first: a node's lease is new at almost every maintenance. When
        # it exists (409 AlreadyExists), it is read and judged below as if read first.
        body = with_run(new_lease(name, namespace, identity, duration, client.server_now(), owner), run_id)
        try:
            return Outcome(CREATE, name, None, create(client, body))
        except Conflict:
            pass
    for _attempt in range(MAX_ATTEMPTS):
        current = as_ours(read(client, namespace, name))
        now = client.server_now()
        action, reset_acquire = plan(current, identity, now, duration)
        other_run = run_annotation(current)
        if action in (RENEW, HELD) and other_run and other_run != run_id and is_valid(current, now) \
                and run_alive(client, other_run, namespace, now):
            return Outcome(BLOCKED, name, current, current)  # our holder name, but another live run's
        if action == BLOCKED or (action == HELD and (not run_id or other_run == run_id)):
            return Outcome(action, name, current, current)
        if action == HELD:  # held under our name for a run that is gone: re-annotate it for ours
            action = RENEW
        if current is None:
            body = with_run(new_lease(name, namespace, identity, duration, now, owner), run_id)
        else:
            body = with_run(renewed(current, identity, duration, now, reset_acquire, owner), run_id)
        if check_mode:
            return Outcome(action, name, current, body)
        try:
            return Outcome(action, name, current, write(client, body, current))
        except Conflict:
            continue  # written (or created) by someone else since we read it: decide again
    raise ConcurrentUpdateError(f"lease {namespace}/{name} kept changing while we wrote it "
                                f"({MAX_ATTEMPTS} attempts); another actor is writing it: run again")


def acquire_slot(client: Client, node: Dict[str, Any], concurrency: int, prefix: str = SLOT_PREFIX,
                 duration: int = DEFAULT_DURATION, namespace: str = LEASE_NAMESPACE,
                 check_mode: bool = False, run_id: str = "",
                 seen: Optional[List[Lease]] = None) -> Tuple[Outcome, List[Lease]]:
    """Hold a maintenance slot for the node. Returns (outcome, the valid slots of others).
    ``seen``: a list of the namespace just made by the caller, used for the first try."""
    node_name = node["metadata"]["name"]
    # No owner reference to the Node (the node lease has one, as medik8s/common makes it): the
    # garbage collector would delete the slot with a Node deleted mid-maintenance, and the
    # cluster-wide limit would let another node go while this run is still ending its work.
    for attempt in range(MAX_ATTEMPTS):
        if attempt or seen is None:
            seen = list_leases(client, namespace)
        now = client.server_now()
        slot_plan = plan_slot(slots_of(seen, prefix), node_name, prefix, concurrency, now, run_id,
                              alive_run_ids(seen, now))
        if slot_plan.blocked:
            return Outcome(BLOCKED, "", None, None), slot_plan.blockers
        tries = [(slot_plan.own["metadata"]["name"], slot_plan.own)] if slot_plan.own else slot_plan.candidates
        for name, existing in tries:
            action, reset_acquire = plan(existing, node_name, now, duration)
            if action == BLOCKED:  # a valid slot without a holder: not ours to take
                continue
            if action == HELD and (not run_id or run_annotation(existing) == run_id):
                return Outcome(HELD, name, existing, existing), slot_plan.blockers
            if action == HELD:  # ours by node, left by a run that is gone: adopt it under our run
                action = RENEW
            if existing is None:
                body = with_run(new_lease(name, namespace, node_name, duration, now, None, SLOT_LABELS), run_id)
            else:
                body = without_node_owner(with_run(renewed(existing, node_name, duration, now, reset_acquire, None),
                                                   run_id))
            if check_mode:
                return Outcome(action, name, existing, body), slot_plan.blockers
            try:
                return Outcome(action, name, existing, write(client, body, existing)), slot_plan.blockers
            except Conflict:
                continue  # another run took this index first: try the next one
    raise ConcurrentUpdateError(f"the maintenance slots ({namespace}/{prefix}-*) kept changing while we took one "
                                f"({MAX_ATTEMPTS} attempts): run again")


def release(client: Client, namespace: str, name: str, identity: str, check_mode: bool = False,
            run_id: str = "", seen: Optional[List[Lease]] = None) -> Tuple[str, Optional[Lease]]:
    """Delete the lease when ``identity`` holds it, and not for another run that is alive.
    Returns (deleted|absent|held_by_other, lease). ``seen``: a list of the namespace just
    made by the caller, which answers the first look (the delete's preconditions hold
    it to exactly that version)."""
    for attempt in range(MAX_ATTEMPTS):
        current = named(seen, name) if seen is not None and not attempt else read(client, namespace, name)
        if identity == HOLDER:
            current = as_ours(current)
        if current is None:
            return "absent", None
        other_run = run_annotation(current)
        if holder(current) != identity or (other_run and other_run != run_id and run_alive(
                client, other_run, namespace, client.server_now())):
            return "held_by_other", current
        if check_mode:
            return "deleted", current
        try:
            return ("deleted" if delete(client, current) else "absent"), current
        except Conflict:
            continue  # renewed or taken over since we read it: look again
    raise ConcurrentUpdateError(f"lease {namespace}/{name} kept changing while we released it: run again")


def own_slots(seen: List[Lease], node: str, prefix: str = SLOT_PREFIX) -> List[Lease]:
    """The slots of ``prefix`` that ``node`` holds, in a list of the namespace."""
    return [s for s in slots_of(seen, prefix) if holder(s) == node]
