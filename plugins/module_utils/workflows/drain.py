"""Drain a node: one list of its pods, evictions in parallel, one watch to see them go.

The pods are listed once (``fieldSelector=spec.nodeName``) and sorted by the filters of
``pod_filters``. Evictions (or deletions) go out on a bounded thread pool; their answers
come back to the one thread that owns the bookkeeping (``drain_run.py``). A single
watch on the node's pods, started from the list's resourceVersion so nothing is missed,
says when each pod is gone: deleted, or replaced by a pod of the same name and another
UID. A PodDisruptionBudget's refusal (429) keeps the pod pending; it is retried on the
waiter's tick, never bypassed unless the drain's fallback to a deletion says so
(model/tracking.py). The drain returns when the pods are gone, not when their evictions
were accepted.

This file is the drain's call, in its phases: what it finds before the first eviction
(``look``), what it refuses or plans (``planned``), then the dry run's verdicts
(``dry_run_result``) or the drain itself (``drain_run.py``) and its result (``run_result``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional

from ..api import paths
from ..api.client import Client
from ..api.waiter import list_objects
from ..errors import InputError, NmoError
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
from ..stores import maintenance
from ..stores.node_conditions import drain_started
from ..stores.nodes import read_node
from ..stores.preflight_reads import namespace_labels
from .drain_options import DrainOptions
from .drain_result import check_plan, outcome_lists, rule_result
from .drain_run import DrainRun

FINISH_BUDGET = 15.0  # seconds after the drain's timeout for its last status write and event


class DrainFailed(NmoError):
    """The drain stopped before every pod was gone; ``details`` carry the drain's result."""


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


@dataclass
class Found:
    """What the drain found before its first eviction, and the call's own marks."""

    started: float  # time.monotonic() when the call began
    first_request: int  # the client's request count then
    node: Dict[str, Any]
    lifecycle: bool  # the drain wrote the node's DrainInProgress condition
    nm: Optional[Dict[str, Any]]
    listing: Dict[str, Any]
    selection: SelectionOptions
    plans: List[PodPlan]
    warnings: List[str]


@dataclass
class Seen:
    """The node and one list of its pods as the caller read them within this call, after the
    cordon (the settle's snapshot, settle.Snapshot), which the drain's look takes as its own:
    the watch starts from the list's resourceVersion, so nothing since is missed. Once the
    drain ran, ``node`` is the Node as its watch last saw it (the volume wait's first look)."""

    node: Dict[str, Any]
    listing: Dict[str, Any]


def look(client: Client, opts: DrainOptions, node_conditions: Optional[bool],
         nm_read: Optional[Dict[str, Any]], seen: Optional[Seen] = None) -> Found:
    """The node, its condition, its NodeMaintenance and one list of its pods (``seen``: read
    by the caller), each pod classified by the drain's filters."""
    started, first_request = time.monotonic(), client.requests
    opts.validate()
    node = seen.node if seen is not None else read_node(client, opts.node)
    lifecycle = (maintained(node) if node_conditions is None else node_conditions) and not client.dry_run
    condition_warnings = drain_started(client, opts.node) if lifecycle else []
    nm = read_maintenance(client, opts, nm_read)
    listing = seen.listing if seen is not None else list_objects(
        client, paths.PODS, {"fieldSelector": f"spec.nodeName={opts.node}"})
    selection = opts.selection(time.time())
    if selection.needs_namespaces():  # a rule's namespace_selector: one read of each namespace on the node
        selection = replace(selection, namespace_labels=namespace_labels(
            client, [p.get("metadata", {}).get("namespace", "") for p in listing.get("items", [])]))
    plans = [classify(pod, selection) for pod in listing.get("items", [])]
    warnings: List[str] = list(condition_warnings)
    if not node.get("spec", {}).get("unschedulable") and not client.dry_run:  # a dry run's begin cordoned nothing
        warnings.append(f"node {opts.node} is schedulable: evicted pods may be scheduled back onto it; cordon it first")
    return Found(started, first_request, node, lifecycle, nm, listing, selection, plans, warnings)


def planned(opts: DrainOptions, found: Found) -> Dict[str, Any]:
    """The result's first fields and the drain rules' view; DrainFailed, before any eviction,
    when a pod never leaves (a block, model/blocked.py)."""
    plans = found.plans
    result: Dict[str, Any] = {
        "node": opts.node, "maintenance": opts.maintenance, "pods_found": len(plans),
        "node_conditions": found.lifecycle, "skipped_pods": [p.brief() for p in plans if p.action == SKIP],
    }
    refused = [p for p in plans if p.action == REFUSE]
    if refused:
        said = refusal_message(opts.node, refused)
        raise DrainFailed(said, refused=[p.brief() for p in refused], blocker=said, **result)
    result.update(rule_result(plans))
    return result


def dry_run_result(client: Client, opts: DrainOptions, found: Found, result: Dict[str, Any]) -> Dict[str, Any]:
    """The plan, with the API server's dry-run verdict a pod."""
    acting = [p for p in found.plans if p.action in (EVICT, DELETE, WAIT, COMPLETE)]
    result.update({f"would_{a}": [p.brief() for p in acting if p.action == a] for a in (EVICT, DELETE, WAIT)})
    result["would_wait_completed"] = [p.brief() for p in acting if p.action == COMPLETE]
    result.update(check_plan(client, opts, acting))
    result.update(changed=bool(acting), elapsed=round(time.monotonic() - found.started, 3),
                  api_requests=client.requests - found.first_request, warnings=found.warnings)
    return result


def run_result(client: Client, opts: DrainOptions, found: Found, result: Dict[str, Any],
               drained: DrainRun) -> Dict[str, Any]:
    """The result of a drain that ran: the pods by what became of them, what is still
    pending or blocked, the requests and status writes it took."""
    tracker = drained.tracker
    result.update(outcome_lists(tracker))
    result.update(
        changed=drained.status.writes > 0 or any(p.attempts for p in tracker.done + list(tracker.pending.values())),
        pending=tracker.pending_summary(),
        elapsed=round(time.monotonic() - found.started, 3),
        eviction_retries=tracker.retries,
        blocked=tracker.blocked(time.monotonic(), time.time()),
        api_requests=client.requests - found.first_request,
        status_writes=drained.status.writes,
        status=maintenance.summary(drained.status.nm),
        warnings=found.warnings + drained.events.warnings + drained.run_guard.warnings,
    )
    result["returned"] = drained.returning.returned_pods
    if result["left_terminating"]:
        result["warnings"].append(tracker.left_warning(opts.node, result["left_terminating"]))
    if drained.kubevirt is not None:
        result.update(migrations=drained.kubevirt.status(), migrations_created=drained.kubevirt.created)
    return result


def drain(client: Client, opts: DrainOptions, node_conditions: Optional[bool] = False,
          nm_read: Optional[Dict[str, Any]] = None, seen: Optional[Seen] = None) -> Dict[str, Any]:
    """Drain ``opts.node``; returns the result, raises DrainFailed (result in details).

    ``node_conditions`` (docs/design.md §4.11): ``DrainInProgress`` before the first eviction;
    None, when the node read here carries our ``MaintenanceInProgress`` (the begin set it), so
    that no caller carries the begin's answer and no request is added. The result's
    ``node_conditions`` says whether the drain wrote them (the caller then writes ``Drained``).
    ``nm_read``: its NodeMaintenance as the caller just wrote it (read_maintenance); ``seen``:
    the node and its pods as the caller read them (look)."""
    found = look(client, opts, node_conditions, nm_read, seen)
    result = planned(opts, found)
    if client.dry_run:
        return dry_run_result(client, opts, found, result)
    drained = DrainRun(client, opts, found.nm, found.listing, found.plans, found.warnings, found.node,
                       found.selection)
    # A request retried while the API server restarts or throttles (client.py) never
    # outlasts the drain's own timeout, plus a little to write the final status.
    with client.time_budget(opts.timeout + FINISH_BUDGET):
        finished, error = drained.run()
    if seen is not None:
        seen.node = drained.watch.last_node() or seen.node
    result = run_result(client, opts, found, result, drained)
    if not finished:
        raise DrainFailed(error, blocker=drained.blocker, **result)
    return result
