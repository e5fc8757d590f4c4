"""Starting and stopping a run from the controller (what the nmo_run action plugin calls)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..api import server
from ..api.client import Client, ConnectionOptions
from ..errors import InputError
from ..model import leases, renewal, rollout_record
from ..model import notify as notify_model
from ..stores import crd
from ..stores import leases as lease_store
from . import ending_runs, heartbeat, leftovers, operator, run, silences

MAX_RUN_LEASE_DURATION = 3600


def start(client: Client, options: ConnectionOptions, params: Dict[str, Any], anchor_pid: int) -> Dict[str, Any]:
    duration = params["duration"] if params.get("duration") is not None else run.RUN_LEASE_DURATION
    short = renewal.too_short(duration, "duration")
    if short:
        raise InputError(short)
    if not renewal.MIN_LEASE_SECONDS <= duration <= MAX_RUN_LEASE_DURATION:
        raise InputError(f"duration must be between {renewal.MIN_LEASE_SECONDS} and {MAX_RUN_LEASE_DURATION} seconds "
                         f"(the heartbeat renews every {run.RENEW_EVERY} s), got {duration}")
    run_id = run.validate_id(params["run_id"]) if params.get("run_id") else run.new_id(params.get("awx_job_id"))
    # the rollout the run is part of: AWX's workflow job shares one among its slices
    rollout_id = rollout_record.default_id(run_id, params.get("awx_workflow_job_id"))
    if params.get("rollout"):
        rollout_id = str(params["rollout"])
    try:
        run.validate_id(rollout_id)
    except InputError:
        raise InputError(f"rollout {rollout_id!r} is not valid (node_maintenance_rollout, or awx_workflow_job_id): "
                         "use 1 to 50 lower-case letters, digits and '-', starting and ending with a letter or "
                         "digit") from None
    if anchor_pid <= 1 or run.process_start(anchor_pid) is None:
        # killed while this task ran: a run started now would have no controller to outlive
        raise run.RunGone(f"the controller process (ansible-playbook, PID {anchor_pid}) is gone: the run is not started")
    alertmanager = params.get("alertmanager") or None
    if alertmanager:  # refused before anything is written (docs/design.md §17.2)
        silences.check(alertmanager)
    notify_params = params.get("notify") or None
    if notify_params:
        notify_model.validate_targets(list(notify_params.get("targets") or []))
    controller = run.controller_identity(anchor_pid)
    kubernetes = server.read(client)  # once a run: which Kubernetes, and is it one we test
    found = operator.detect(client)
    mode = operator.resolve(params.get("mode") or operator.AUTO, found)  # refused before anything is written
    result: Dict[str, Any] = {"run": run_id, "rollout": rollout_id,
                              "lease": f"{leases.LEASE_NAMESPACE}/{run.lease_name(run_id)}",
                              "controller": controller, "heartbeat_pid": 0, "changed": False,
                              "mode": mode, "operator": found, "kubernetes": kubernetes.git_version}
    if kubernetes.warning:
        result["warnings"] = [kubernetes.warning]
    if params.get("install_crd"):
        # once a run, before any node: the begins then find it said on the run lease
        result["crd"] = crd.ensure(client)
        if result["crd"].get("warning"):
            result.setdefault("warnings", []).append(result["crd"]["warning"])
    if client.dry_run:
        return result
    lease_store.ensure_namespace(client)
    # a run of this controller that has just ended is gone, whatever its run lease says for a
    # moment longer: its heartbeat's delete is awaited (workflows/ending_runs.py)
    seen, ended = ending_runs.settle(client, leases.LEASE_NAMESPACE)
    if ended:
        result["awaited_runs"] = ended
    # the run leases of runs that are gone (docs/design.md §5.3): nobody else removes them
    result["removed_run_leases"] = run.remove_gone(client, seen=seen)
    # docs/design.md §6.2: what a killed run left running on this controller is ended before
    # any node of this run (its heartbeat did it, or it was killed too and it is done here)
    left = leftovers.settle_gone(client, run_id)
    left += leftovers.elsewhere(seen, [name[len(run.RUN_LEASE_PREFIX):] for name in result["removed_run_leases"]
                                       if name.startswith(run.RUN_LEASE_PREFIX)])
    if left:
        result["gone_runs_left"] = left
        result.setdefault("warnings", []).extend(left)
    run.start(client, run_id, controller, duration=duration, mode=mode, crd_checked=bool(params.get("install_crd")),
              boot=leftovers.boot_id(), rollout_id=rollout_id)
    result["heartbeat_pid"] = heartbeat.daemonize_and_loop(options, run_id, anchor_pid, leases.LEASE_NAMESPACE,
                                                           duration, alertmanager, notify_params)
    result["changed"] = True
    return result


def stop(client: Client, params: Dict[str, Any]) -> Dict[str, Any]:
    if not params.get("run_id"):
        raise InputError("run_id is required with state=stopped")
    run_id = run.validate_id(params["run_id"])
    held = run.read_lease(client, run_id) is not None
    changed = held if client.dry_run else run.stop(client, run_id)
    return {"run": run_id, "lease": f"{leases.LEASE_NAMESPACE}/{run.lease_name(run_id)}", "changed": changed}


def run_facts(client: Client, run_id: Optional[str],
              seen: Optional[List[leases.Lease]] = None) -> Tuple[str, bool]:
    """What the run's start wrote on its run lease, in one read: the mode (as run_mode says) and
    whether it checked the NodeMaintenance CRD (so that a begin need not read the CRD).
    ``seen``: a list of the run leases' namespace the caller has just made, which holds the
    run lease (no request of its own)."""
    if not run_id:
        return operator.STANDALONE, False
    lease = (leases.named(seen, run.lease_name(run.validate_id(run_id))) if seen is not None
             else run.read_lease(client, run.validate_id(run_id)))
    said = run.mode_of(lease)
    return said or operator.resolve(operator.AUTO, operator.detect(client)), run.crd_checked(lease)


def run_facts_listed(client: Client, run_id: str, namespace: str, listed: bool = True
                     ) -> Tuple[str, bool, Optional[List[leases.Lease]]]:
    """``run_facts``, and the list of the leases namespace it read them from when ``listed``
    and the node's leases live beside the run lease (the begin's first look and the end's
    guard and release list that namespace anyway: one list, not a read and a list); else
    the run lease alone is read, and the list is None. Never in check mode (the begin lists
    nothing then)."""
    seen = (lease_store.list_leases(client, namespace)
            if listed and not client.dry_run and namespace == leases.LEASE_NAMESPACE else None)
    return (*run_facts(client, run_id, seen), seen)


def run_mode(client: Client, run_id: Optional[str]) -> str:
    """The mode of run ``run_id`` as its start wrote it on the run lease, so that only the id
    travels between plays. Without a run, standalone (a module used on its own); with a run
    lease that says none (check mode writes no lease), the mode a start with V(auto) finds:
    the start refused any other combination, so it is the run's."""
    return run_facts(client, run_id)[0]
