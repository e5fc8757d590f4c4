"""A rollout that spans runs: AWX job slices (docs/design.md §18.6).

AWX spreads a sliced job template over its execution nodes as a workflow job whose slice jobs
each run ``ansible-playbook`` on a share of the inventory, at once or later, sharing nothing but
the extra variable ``awx_workflow_job_id``. This collection keeps its rollout's state in the
cluster, so the slices can be one rollout: each run's lease names the rollout it belongs to
(``ROLLOUT_ANNOTATION``), and when that rollout is not the run itself, a lease of its own
(``nmo-rollout-<id>``, beside the run leases) holds what the runs share:

* the stop: ``rollout.STOPPED_AFTER`` (``<node>/<phase>``, the first failure of any run of the
  rollout) and ``STOPPED_RUN`` (that run); after it, no node of any run of the rollout begins,
  and a run that starts later begins nothing;
* the count of blocked nodes that ``node_maintenance_max_blocked`` bounds (model/blocked.py).

The concurrency needs no record: the slots are the cluster's, shared by every run already.

A run alone (no rollout given, no AWX workflow) is its own rollout: its run lease is that record,
as before. The rollout lease is written by the runs' starts and their failures, never renewed
by a heartbeat: its ``renewTime`` is the last start of a run of the rollout, and it is kept
``KEEP_SECONDS`` after that (a stopped rollout must still stop a slice that starts late), then
removed by a later run's start once no live run names it. A relaunch of the workflow has a new
workflow id, so a new rollout: it resumes through ``node_maintenance_campaign`` as a rerun does.

Pure: leases in, answers out (workflows/run.py writes them).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, FrozenSet, List, Optional, Sequence

from . import leases
from .blocked import BLOCKED

ROLLOUT_ANNOTATION = "nmo.maintenance/rollout"  # on a run lease: the rollout the run is part of
STOPPED_RUN = "nmo.maintenance/stopped-run"  # on the rollout lease: the run whose node failed first
LEASE_PREFIX = "nmo-rollout-"
HOLDER = "nmo.maintenance/rollout"
KEEP_SECONDS = 86400  # a day after a run of the rollout last started
LABELS = {**leases.MANAGED_BY, "app.kubernetes.io/component": "rollout"}
AWX_PREFIX = "awx-wf-"
# on the run lease, or the rollout's: <node>/<phase> of the first failure (model/rollout.py reads it)
STOPPED_AFTER = "nmo.maintenance/stopped-after"

Lease = Dict[str, Any]


def default_id(run_id: str, workflow_job_id: Any = None) -> str:
    """The rollout a run is part of when none is given: AWX's workflow job (every slice of a
    sliced job gets the same ``awx_workflow_job_id``), else the run alone."""
    if workflow_job_id not in (None, ""):
        return f"{AWX_PREFIX}{workflow_job_id}"
    return run_id


def shared(run_id: str, rollout_id: str) -> bool:
    """Whether the rollout has a record of its own (it is not the run alone)."""
    return bool(rollout_id) and rollout_id != run_id


def lease_name(rollout_id: str) -> str:
    return LEASE_PREFIX + rollout_id


def annotations(lease: Optional[Lease]) -> Dict[str, str]:
    return ((lease or {}).get("metadata") or {}).get("annotations") or {}


def rollout_of(run_lease: Optional[Lease]) -> str:
    """The rollout a run lease names ('' for a run alone, or one started by an older release)."""
    return annotations(run_lease).get(ROLLOUT_ANNOTATION) or ""


def record_lease(seen: Sequence[Lease], run_id: str, rollout_id: Optional[str] = None) -> Optional[Lease]:
    """Where the run's rollout keeps its stop and its count of blocked nodes, in one list of the
    leases namespace: the rollout's lease when the run is part of a shared rollout (and it is
    there), else the run lease. ``rollout_id``: the rollout when known already, else the one the
    run lease names."""
    run_lease = leases.named(list(seen), leases.RUN_LEASE_PREFIX + run_id) if run_id else None
    if rollout_id is None:
        rollout_id = rollout_of(run_lease)
    if shared(run_id, rollout_id):
        found = leases.named(list(seen), lease_name(rollout_id))
        if found is not None:
            return found
    return run_lease


def runs_of(seen: Sequence[Lease], rollout_id: str, now: datetime) -> FrozenSet[str]:
    """The live runs of ``rollout_id`` (their run leases valid and naming it)."""
    if not rollout_id:
        return frozenset()
    found = set()
    for lease in seen:
        name = (lease.get("metadata") or {}).get("name", "")
        if (name.startswith(leases.RUN_LEASE_PREFIX) and rollout_of(lease) == rollout_id
                and leases.is_valid(lease, now)):
            found.add(name[len(leases.RUN_LEASE_PREFIX):])
    return frozenset(found)


def removable(lease: Lease, seen: Sequence[Lease], now: datetime) -> bool:
    """A rollout lease kept past ``KEEP_SECONDS`` since a run of it last started, that no live
    run names."""
    name = (lease.get("metadata") or {}).get("name", "")
    if not name.startswith(LEASE_PREFIX) or leases.is_valid(lease, now):
        return False
    return not runs_of(seen, name[len(LEASE_PREFIX):], now)


def describe(seen: Sequence[Lease], now: datetime) -> List[Dict[str, Any]]:
    """Each rollout of several runs the leases namespace holds, as status.yml shows it: its id,
    its live runs, the failure that stopped it (node/phase and run) and the blocked nodes it
    counted, when a run of it last started and until when it is kept."""
    found = []
    for lease in seen:
        name = (lease.get("metadata") or {}).get("name", "")
        if not name.startswith(LEASE_PREFIX):
            continue
        rollout_id = name[len(LEASE_PREFIX):]
        notes = annotations(lease)
        due = leases.expiry(lease)
        found.append({
            "rollout": rollout_id,
            "runs": sorted(runs_of(seen, rollout_id, now)),
            "stopped_after": notes.get(STOPPED_AFTER, ""),
            "stopped_run": notes.get(STOPPED_RUN, ""),
            "blocked": [n for n in (notes.get(BLOCKED) or "").split(",") if n],
            "last_start": (lease.get("spec") or {}).get("renewTime") or "",
            "kept_until": leases.format_time(due) if due is not None else "",
        })
    return sorted(found, key=lambda r: r["rollout"])
