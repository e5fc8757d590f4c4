"""Leases in the API server: the lease namespace, reads and writes of one lease, and
acquiring and releasing the node lease and a maintenance slot by the rules of
model/leases.py (what to do with a lease, which slot to take)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, List, Optional, Tuple

from ..api import paths
from ..api.client import Client
from ..api.waiter import listed
from ..errors import ApiError, ConcurrentUpdateError, Conflict, NmoError, NotFound, UnprocessableEntity
from ..model.leases import (
    BLOCKED,
    CREATE,
    DEFAULT_DURATION,
    HELD,
    HOLDER,
    LEASE_NAMESPACE,
    MAX_ATTEMPTS,
    RENEW,
    RUN_LEASE_PREFIX,
    SLOT_LABELS,
    SLOT_PREFIX,
    Lease,
    Outcome,
    alive_run_ids,
    as_ours,
    holder,
    is_valid,
    named,
    new_lease,
    node_lease_name,
    owner_reference,
    plan,
    plan_slot,
    renewed,
    run_annotation,
    slots_of,
    with_run,
    without_node_owner,
)


def run_alive(client: Client, run_id: str, namespace: str, now: datetime) -> bool:
    return bool(run_id) and is_valid(read(client, namespace, RUN_LEASE_PREFIX + run_id), now)


leases_path = paths.leases  # the name callers and tests know


def ensure_namespace(client: Client, namespace: str = LEASE_NAMESPACE) -> bool:
    """Create the leases namespace when missing; True when it was (or, in a dry run, would be) created."""
    if client.get_or_none(paths.namespace(namespace)) is not None:
        return False
    if not client.dry_run:
        try:
            client.post(paths.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
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
    """Every lease of ``namespace``; a wait that follows watches from this list (api/waiter.py's Listed)."""
    return listed(client, leases_path(namespace))


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


def acquire_node_lease(client: Client, node: Dict[str, Any], duration: int = DEFAULT_DURATION,
                       namespace: str = LEASE_NAMESPACE, identity: str = HOLDER,
                       run_id: str = "") -> Outcome:
    """Create, renew or take over the node's lease; BLOCKED when someone else validly holds it,
    or when it is held under our holder name for another run that is still alive."""
    name = node_lease_name(node["metadata"]["name"])
    owner = owner_reference(node)
    if not client.dry_run:
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
        if client.dry_run:  # the lease as it would be written
            return Outcome(action, name, current, body)
        try:
            return Outcome(action, name, current, write(client, body, current))
        except Conflict:
            continue  # written (or created) by someone else since we read it: decide again
    raise ConcurrentUpdateError(f"lease {namespace}/{name} kept changing while we wrote it "
                                f"({MAX_ATTEMPTS} attempts); another actor is writing it: run again")


def acquire_slot(client: Client, node: Dict[str, Any], concurrency: int, prefix: str = SLOT_PREFIX,
                 duration: int = DEFAULT_DURATION, namespace: str = LEASE_NAMESPACE,
                 run_id: str = "",
                 seen: Optional[List[Lease]] = None, reserved: int = 0,
                 annotations: Optional[Dict[str, str]] = None) -> Tuple[Outcome, List[Lease]]:
    """Hold a maintenance slot for the node. Returns (outcome, the valid slots of others).
    ``seen``: a list of the namespace just made by the caller, used for the first try.
    A topology budget's place is a slot of its family (``prefix``), below its limit
    (``concurrency``) less the nodes already disrupted without one (``reserved``), annotated
    with its budget (``annotations``)."""
    node_name = node["metadata"]["name"]
    # No owner reference to the Node (the node lease has one, as medik8s/common makes it): the
    # garbage collector would delete the slot with a Node deleted mid-maintenance, and the
    # cluster-wide limit would let another node go while this run is still ending its work.
    for attempt in range(MAX_ATTEMPTS):
        if attempt or seen is None:
            seen = list_leases(client, namespace)
        now = client.server_now()
        slot_plan = plan_slot(slots_of(seen, prefix), node_name, prefix, concurrency, now, run_id,
                              alive_run_ids(seen, now), reserved)
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
            if annotations:
                body["metadata"].setdefault("annotations", {}).update(annotations)
            if client.dry_run:  # the slot as it would be written
                return Outcome(action, name, existing, body), slot_plan.blockers
            try:
                return Outcome(action, name, existing, write(client, body, existing)), slot_plan.blockers
            except Conflict:
                continue  # another run took this index first: try the next one
    raise ConcurrentUpdateError(f"the maintenance slots ({namespace}/{prefix}-*) kept changing while we took one "
                                f"({MAX_ATTEMPTS} attempts): run again")


def annotate(client: Client, lease: Lease, key: str, value: str) -> bool:
    """Add one annotation to a lease as read, only while it is still held by the same holder
    (a JSON Patch testing the holder: a lease released or taken over meanwhile is left alone).
    False when it changed hands or is gone."""
    meta = lease["metadata"]
    ops: List[Dict[str, Any]] = [{"op": "test", "path": "/spec/holderIdentity", "value": holder(lease)}]
    if meta.get("annotations") is None:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    ops.append({"op": "add", "path": "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1"),
                "value": value})
    try:
        client.patch(leases_path(meta["namespace"], meta["name"]), ops, "json")
    except (NotFound, Conflict, UnprocessableEntity):
        return False
    return True


def release(client: Client, namespace: str, name: str, identity: str,
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
        if client.dry_run:
            return "deleted", current
        try:
            return ("deleted" if delete(client, current) else "absent"), current
        except Conflict:
            continue  # renewed or taken over since we read it: look again
    raise ConcurrentUpdateError(f"lease {namespace}/{name} kept changing while we released it: run again")
