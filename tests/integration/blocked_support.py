"""What the tests of blocked nodes share (docs/design.md §18.4): a node blocked by a budget that
never allows, the run that maintains it with a policy, and what is read back after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import QUARANTINED

from .maintenance_support import Run

DRAIN_TIMEOUT = 5


def block(world: Any, node: str, app: str) -> None:
    """One pod on ``node`` whose PodDisruptionBudget never allows its eviction."""
    with world.only_schedulable(node):
        world.deployment(app, 1)
    world.pdb(app, app, min_available=1)


def maintain(inventory: str, user: Any, tmp_path: Path, run_id: str, concurrency: int, on_blocked: str,
             max_blocked: int, preflight: str) -> Run:
    return Run("maintenance.yml", inventory, user.kubeconfig, extra_vars={
        "node_maintenance_run_id": run_id, "node_maintenance_concurrency": concurrency,
        "node_maintenance_on_blocked": on_blocked, "node_maintenance_max_blocked": max_blocked,
        "node_maintenance_preflight": preflight, "node_maintenance_drain": {"timeout": DRAIN_TIMEOUT},
        "node_maintenance_settle_timeout": 0, "node_maintenance_lease_timeout": 300,
        "node_maintenance_report_dir": str(tmp_path / run_id)})


def errors(output: str) -> str:
    """The failures a run printed (its tail alone may be the recap)."""
    return "\n".join(line for line in output.splitlines() if "fatal:" in line or "[ERROR]" in line)[-6000:]


def nm_entries(entries: List[Dict[str, Any]], user: Any) -> List[Dict[str, Any]]:
    return [e for e in entries if (e.get("user") or {}).get("username") == user.name
            and (e.get("objectRef") or {}).get("resource") == "nodemaintenances"]


def quarantine_of(cluster: Any, node: str) -> Dict[str, str]:
    meta = cluster.client.get(f"/api/v1/nodes/{node}")["metadata"]
    return {k: v for k, v in {**(meta.get("labels") or {}), **(meta.get("annotations") or {})}.items()
            if k == QUARANTINED}


def report_nodes(tmp_path: Path, run_id: str) -> Dict[str, Dict[str, Any]]:
    report = json.loads((tmp_path / run_id / "report.json").read_text())
    return {n["name"]: n for n in report["nodes"]}
