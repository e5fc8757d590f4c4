"""Beside a running Node Maintenance Operator (NMO): find it, and follow its work.

Operator mode leaves the node to NMO: this collection holds the maintenance slot (the
concurrency across runs) and the etcd guard, creates the NodeMaintenance, follows NMO's
progress to ``Succeeded`` (or its ``Failed`` and ``lastError``), and at the end deletes the
NodeMaintenance and waits for NMO to let the node go (its finalizer). NMO takes the node
lease (holder ``node-maintenance``), the taints, cordon, label and the drain.

NMO is found by its validating webhook for NodeMaintenance objects: the operator registers
it when it is installed (OLM does so with the deployment), and while it is registered every
NodeMaintenance write goes through NMO, so a collection that ignored it would share every
object with it. (NMO's leader-election Lease lives in NMO's own namespace, which a
least-privilege identity of this collection cannot list.)
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from ..api import paths
from ..api.client import Client
from ..api.waiter import Watcher, list_objects, wait_until
from ..errors import ApiError, NmoError, NotFound, RefusedError, WaitTimeout
from ..model import blocked
from ..stores import maintenance
from . import run

STANDALONE, OPERATOR, AUTO = "standalone", "operator", "auto"
MODES = (AUTO, STANDALONE, OPERATOR)
MODE_ANNOTATION = "nmo.maintenance/mode"
WEBHOOKS = paths.WEBHOOKS
WEBHOOK_PATH = "validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance"


class OperatorFailed(NmoError):
    """NMO set the NodeMaintenance to Failed; its lastError says why."""


def webhook_of(configurations: List[Dict[str, Any]]) -> Optional[str]:
    """The name of a webhook configuration that validates NodeMaintenance objects for NMO."""
    for config in configurations:
        for hook in config.get("webhooks") or []:
            client_config = hook.get("clientConfig") or {}
            where = (client_config.get("url") or "") + ((client_config.get("service") or {}).get("path") or "")
            rules = hook.get("rules") or []
            for_nm = any("nodemaintenances" in (rule.get("resources") or []) for rule in rules)
            if WEBHOOK_PATH in where or for_nm:
                return config["metadata"]["name"]
    return None


def detect(client: Client) -> Dict[str, Any]:
    """{"running": bool, "signal": str}: whether NMO handles NodeMaintenance objects here."""
    try:
        configurations = client.get(WEBHOOKS).get("items", [])
    except ApiError as exc:
        if exc.status in (401, 403):
            raise RefusedError("cannot tell whether a Node Maintenance Operator runs: listing "
                               "validatingwebhookconfigurations is forbidden (bind the shipped ClusterRole, "
                               "meta/rbac/)") from exc
        raise
    name = webhook_of(configurations)
    if name:
        return {"running": True, "signal": f"validating webhook configuration {name}"}
    return {"running": False, "signal": "no validating webhook for NodeMaintenance objects"}


def resolve(mode: str, found: Dict[str, Any]) -> str:
    """The mode a run works in; refuses a combination that would share objects with NMO."""
    if mode == AUTO:
        return OPERATOR if found["running"] else STANDALONE
    if mode == STANDALONE and found["running"]:
        raise RefusedError(f"a Node Maintenance Operator handles NodeMaintenance objects here ({found['signal']}): "
                           "it would drain, cordon and end our maintenances beside us. Use mode auto or operator "
                           "to leave the node work to it.")
    if mode == OPERATOR and not found["running"]:
        raise RefusedError(f"mode operator, but no Node Maintenance Operator was found ({found['signal']}): "
                           "nothing would act on the NodeMaintenance. Install NMO or use mode auto or standalone.")
    return mode


def follow(client: Client, name: str, node: str, timeout: float, guard: run.Guard,
           clock: Any = time.monotonic) -> Dict[str, Any]:
    """Watch the NodeMaintenance until NMO says Succeeded; OperatorFailed on Failed. Out of
    time, WaitTimeout with ``blocker`` when NMO's status says pods are still pending (a block,
    docs/design.md §18.4), "" otherwise."""
    query = {"fieldSelector": f"metadata.name={name}"}
    listing = list_objects(client, maintenance.API, query)
    if not listing.get("items"):
        raise NotFound(404, "NotFound", f"NodeMaintenance {name} not found", "GET", maintenance.path(name))
    seen: Dict[str, Any] = {"nm": listing["items"][0]}

    with Watcher(client, maintenance.API, query, initial=listing) as watcher:
        def check() -> Optional[Dict[str, Any]]:
            guard.check()
            nm = next(iter(watcher.objects.values()), None)
            if nm is None or maintenance.terminating(nm):
                raise run.MaintenanceGone(f"NodeMaintenance {name} was deleted while NMO maintained node {node}")
            seen["nm"] = nm
            status = nm.get("status") or {}
            if status.get("phase") == "Failed":
                raise OperatorFailed(f"the Node Maintenance Operator failed the maintenance of node {node}: "
                                     f"{status.get('lastError') or 'no lastError'}",
                                     status=maintenance.summary(nm))
            return nm if status.get("phase") == "Succeeded" else None

        def describe() -> str:
            status = (seen["nm"].get("status") or {})
            return (f"the Node Maintenance Operator to drain node {node} (phase {status.get('phase') or 'none'}, "
                    f"drainProgress {status.get('drainProgress', 0)}%, pending {status.get('pendingPods') or []}, "
                    f"last error {status.get('lastError') or 'none'})")

        try:
            nm = wait_until(watcher, check, timeout, describe, tick=lambda: None, tick_every=1.0, clock=clock)
        except WaitTimeout as exc:  # pods NMO cannot evict are a block (model/blocked.py, §18.4)
            raise WaitTimeout(exc.message, status=maintenance.summary(seen["nm"]),
                              blocker=blocked.operator_blocker(seen["nm"].get("status") or {}, timeout)) from None
    return maintenance.summary(nm) or {}


def follow_drain(client: Client, opts: Any) -> Dict[str, Any]:
    """nmo_drain operator=true: no eviction of ours; NMO's drain followed to its end."""
    opts.validate()
    nm = maintenance.get(client, opts.maintenance) if opts.maintenance else maintenance.locate(client, opts.node)
    if nm is None:
        raise RefusedError(f"no NodeMaintenance for node {opts.node}: nothing for the Node Maintenance Operator "
                           "to drain; begin the maintenance first")
    name = nm["metadata"]["name"]
    result: Dict[str, Any] = {"node": opts.node, "maintenance": name, "operator": True, "changed": False,
                              "evicted": [], "deleted": []}
    if client.dry_run:  # NMO's drain is not ours to imagine: its status as it stands
        return {**result, "status": maintenance.summary(nm)}
    guard = run.guard_for(client, opts.run_id, node=opts.node, held=opts.held_leases)
    started = time.monotonic()
    status = follow(client, name, opts.node, opts.timeout, guard)
    return {**result, "status": status, "elapsed": round(time.monotonic() - started, 3), "warnings": guard.warnings}
