"""What the rollout scheduler's tests share (test_rollout.py, test_rollout_matrix.py,
test_on_blocked.py; docs/design.md §18): the zone budget, the maintenance playbook run with
the scheduler's variables, the hooks that fail or hold a node until the test says so, and the
readers of the API server's audit log that tell what was written after a failure."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

from topology import WORLD_LABEL

from .maintenance_support import Run, leases_naming, maintenance_of, slot_prefix, wait_clean

ZONE = "topology.kubernetes.io/zone"
ZONE_BUDGET = [{"topology_key": ZONE, "max": 1}]
LEASE_TIMEOUT = 120  # a wait that outlived its reason fails the run well before the test's bound

# The work hook: it tells the test the node is in it, fails on the nodes the test names, and
# holds the others until the test writes the release file (no sleep synchronises anything).
WORK = """\
- name: Tell the test this node is in its work hook
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ inventory_hostname }}.work"
    content: "{{ now().timestamp() }}"
    mode: "0644"
- name: The firmware flash fails on the nodes the test names
  ansible.builtin.fail:
    msg: firmware flash failed
  when: inventory_hostname in (test_fail_nodes | default([]))
- name: Work until the test releases it
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/release"
    timeout: 300
"""

# The gate: fails on the nodes the test names; the others pass once the test releases them.
GATE = """\
- name: The gate fails on the nodes the test names
  ansible.builtin.fail:
    msg: the node's health check failed
  when: inventory_hostname in (test_fail_nodes | default([]))
- name: It passes on the others once the test says so (after the run stopped)
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/release"
    timeout: 300
"""


def write_hook(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text(body)
    return str(path)


def zones(world: Any, per_zone: int = 2) -> Dict[str, List[str]]:
    """Workers in zones a and b (a's first in the world's order)."""
    return {zone: world.add_nodes(workers=per_zone, labels={ZONE: f"{world.id}-{zone}"}) for zone in ("a", "b")}


def labels_of(world: Any, name: str, zone: str) -> Dict[str, str]:
    """A worker's labels as World.add_nodes makes them, in ``zone``."""
    return {WORLD_LABEL: world.id, "node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux", "type": "kwok", ZONE: zone}


def playbook(inventory: str, user: Any, tmp_path: Path, run_id: str, concurrency: int, budgets: List[Any],
             more: Dict[str, Any], limit: Optional[List[str]] = None) -> Run:
    """maintenance.yml as the least-privilege user, at ``concurrency`` with ``budgets``; its report
    in tmp_path/<run_id>. Forks equal to the concurrency: as many nodes started at once as may be
    out, the next when one ends, so a case's nodes go in its order and a node after the first
    ``concurrency`` starts only once one of them ended (with more forks, nodes started ahead may
    begin before a failure's stop mark is written: the chaos explorer runs at Ansible's default
    forks, 5, above its concurrencies of 1 to 4, and checks the stop against the mark)."""
    forks = ["-f", str(max(1, concurrency))]
    return Run("maintenance.yml", inventory, user.kubeconfig, args=forks + (["-l", ",".join(limit)] if limit else []),
               extra_vars={
        "node_maintenance_run_id": run_id, "node_maintenance_concurrency": concurrency,
        "node_maintenance_budgets": budgets, "node_maintenance_lease_timeout": LEASE_TIMEOUT,
        # the cases are written in the inventory's order (zone a's nodes first); with a zone budget
        # the default order (auto) would interleave the zones (test_concurrency.py tests that)
        "node_maintenance_order": "inventory",
        "node_maintenance_report_dir": str(tmp_path / run_id), "test_dir": str(tmp_path), **more})


def finished(proc: Run, timeout: float) -> int:
    """The run's exit code; killed (and the test failed by the timeout) when it does not end."""
    try:
        return proc.wait(timeout)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()


def stopped_line(node: str) -> str:
    return f"{node}: not started: the run stopped after "


def assert_all_finished(cluster: Any, world: Any) -> None:
    """Every node of the world back in service, no NodeMaintenance nor lease of ours left."""
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.nodes if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []


# -- the audit log ------------------------------------------------------------------------------------
def at(entry: Dict[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))


def of(entry: Dict[str, Any], resource: str, name: str = "", subresource: str = "") -> bool:
    ref = entry.get("objectRef") or {}
    return (ref.get("resource") == resource and (not name or ref.get("name") == name)
            and (ref.get("subresource") or "") == subresource)


def by(entries: List[Dict[str, Any]], user: Any) -> List[Dict[str, Any]]:
    """The entries of requests ``user`` made."""
    return [e for e in entries if (e.get("user") or {}).get("username") == user.name]


def cordons(body: Any) -> bool:
    """Whether a Node patch's body sets spec.unschedulable (a merge patch or a JSON patch)."""
    if isinstance(body, dict):
        if body.get("unschedulable") is True:
            return True
        if "op" in body:  # a JSON patch operation: a test of the cordon (the uncordon's guard) is no cordon
            return (body["op"] in ("add", "replace") and str(body.get("path") or "").endswith("/unschedulable")
                    and body.get("value") is True)
        return any(cordons(v) for v in body.values())
    if isinstance(body, list):
        return any(cordons(v) for v in body)
    return False
