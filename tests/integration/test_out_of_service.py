"""Every node out of service counts against the budgets it falls in (issue 41; docs/design.md §18.1).

A quarantined node, a node kept by a gone run that had no budget, a node an administrator
cordoned: each holds no place of the zone's budget, yet gives the zone no capacity. The next node
of the zone must not begin; when nothing in flight will put those nodes back, it stops at once
with a line naming them and what releases each, and the run fails (rc 2), never a wait that only
a lease lapse ends. Check mode (``--check --diff``) asks the same scheduler and says the same.
The maintenance playbook runs as the least-privilege user; what was written is read back from
the cluster and the API server's audit log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

from .blocked_support import DRAIN_TIMEOUT, block, errors, quarantine_of
from .maintenance_support import AuditLog, Run, maintenance_of, node_clean, wait_clean, wait_run_gone, write_inventory
from .rollout_support import WORK, ZONE, by, cordons, finished, of, write_hook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LEASE_TIMEOUT = 240  # today's wait behind such a node lasts this long; the stop comes at once


def zone_budget(world: Any) -> List[Dict[str, Any]]:
    return [{"topology_key": ZONE, "max": 1}]


def maintain(inventory: str, user: Any, tmp_path: Path, run_id: str, limit: List[str], more: Dict[str, Any],
             check: bool = False) -> Run:
    args = ["-l", ",".join(limit)] + (["--check", "--diff"] if check else [])
    return Run("maintenance.yml", inventory, user.kubeconfig, args=args, extra_vars={
        "node_maintenance_run_id": run_id, "node_maintenance_lease_timeout": LEASE_TIMEOUT,
        "node_maintenance_settle_timeout": 0, "node_maintenance_report_dir": str(tmp_path / run_id),
        "test_dir": str(tmp_path), **more})


def never_cordoned(audit: AuditLog, user: Any, node: str) -> None:
    patches = [e for e in by(audit.settled().entries(), user) if of(e, "nodes", node) and e["verb"] == "patch"
               and cordons(e.get("requestObject"))]
    assert patches == [], patches


def assert_stopped(output: str, node: str, *named: str) -> None:
    line = f"{node}: not started: budgets[0] (topology_key {ZONE}, max 1 a domain), domain {ZONE}="
    assert line in output, errors(output)
    said = next(text for text in output.splitlines() if line in text)
    assert "allows 1 node(s) out of service at once, and 1 are out of service with nothing in flight" in said, said
    for text in named:
        assert text in said, said


def test_a_quarantined_node_keeps_its_zone_out_of_service(cluster, world, user, tmp_path):
    """Concurrency 1, zone budget 1, quarantine: the blocked node of zone a is quarantined; the
    next node of zone a does not begin (2 of its nodes would be unschedulable), the run ends rc 2
    naming the quarantine and recover.yml; zone b's node is maintained. Check mode says the same."""
    blocked = world.add_nodes(workers=1, labels={ZONE: f"{world.id}-a"})[0]
    a2 = world.add_nodes(workers=1, labels={ZONE: f"{world.id}-a"})[0]
    b1 = world.add_nodes(workers=1, labels={ZONE: f"{world.id}-b"})[0]
    block(world, blocked, "db")
    inventory = write_inventory(world, tmp_path)
    audit = AuditLog(cluster)
    more = {"node_maintenance_concurrency": 1, "node_maintenance_budgets": zone_budget(world),
            "node_maintenance_on_blocked": "quarantine", "node_maintenance_max_blocked": 2,
            "node_maintenance_preflight": "warn", "node_maintenance_drain": {"timeout": DRAIN_TIMEOUT}}
    run_id = f"q{world.id}"
    proc = maintain(inventory, user, tmp_path, run_id, [blocked, a2, b1], more)
    code = finished(proc, 600)
    output = proc.output
    wait_run_gone(cluster.client, run_id)
    assert code == 2, errors(output)
    assert quarantine_of(cluster, blocked), "the blocked node is quarantined"
    assert_stopped(output, a2, f"{blocked} (quarantined: only ansible-playbook playbooks/recover.yml "
                               f"-e nmo_nodes={blocked} lifts it)")
    never_cordoned(audit, user, a2)
    assert maintenance_of(cluster.client, a2) is None and node_clean(cluster.client, a2) is None
    wait_clean(cluster.client, [b1])

    # check mode asks the scheduler: the same line and rc, nothing written
    before = AuditLog(cluster)
    checked = maintain(inventory, user, tmp_path, f"c{world.id}", [a2], more, check=True)
    code = finished(checked, 300)
    assert code == 2, errors(checked.output)
    assert_stopped(checked.output, a2, f"{blocked} (quarantined")
    writes = [e for e in by(before.settled().entries(), user) if e["verb"] in ("create", "update", "patch", "delete")
              and (e.get("objectRef") or {}).get("resource") in ("nodes", "nodemaintenances")]
    assert writes == [], writes


def test_a_node_kept_by_a_gone_run_without_a_budget_stops_the_next_run_at_once(cluster, world, user, tmp_path):
    """A run without a budget fails a1 in its work and keeps it (policy keep); the next run, with
    the zone budget, does not wait behind a1 (it holds no place of zone a): a2 stops at once
    naming a1, its gone run and what releases it; b1 is maintained; rc 2. Check mode first says
    the same."""
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    b1 = world.add_nodes(workers=1, labels={ZONE: f"{world.id}-b"})[0]
    inventory = write_inventory(world, tmp_path)
    (tmp_path / "release").touch()
    hooks = {"node_maintenance_hooks_work": [write_hook(tmp_path, "work.yml", WORK)], "test_fail_nodes": [a1],
             "node_maintenance_failure_policy": "keep"}
    first = f"k{world.id}"
    code = finished(maintain(inventory, user, tmp_path, first, [a1], {**hooks, "node_maintenance_concurrency": 1}),
                    300)
    assert code == 2
    wait_run_gone(cluster.client, first)
    assert node_clean(cluster.client, a1) is not None, "a1 is kept out of service"

    more = {"node_maintenance_concurrency": 2, "node_maintenance_budgets": zone_budget(world)}
    kept = f"{a1} (kept out of service after its maintenance failed in the work phase, run {first}, which is gone: "
    checked = maintain(inventory, user, tmp_path, f"c{world.id}", [a2, b1], more, check=True)
    code = finished(checked, 300)
    assert code == 2, errors(checked.output)
    assert_stopped(checked.output, a2, kept)

    audit = AuditLog(cluster)
    proc = maintain(inventory, user, tmp_path, f"n{world.id}", [a2, b1], more)
    code = finished(proc, 600)
    output = proc.output
    assert code == 2, errors(output)
    assert_stopped(output, a2, kept, f"playbooks/recover.yml -e nmo_nodes={a1}", f"run again with -l {a1}")
    never_cordoned(audit, user, a2)
    wait_clean(cluster.client, [b1])
    assert node_clean(cluster.client, a1) is not None, "a1 is still kept: only recover.yml or a run of it ends it"


def test_an_administrators_cordon_counts_against_the_zone(cluster, world, user, tmp_path):
    """An administrator cordoned a1; with the zone budget of 1, a2 of the same zone stops at once,
    naming the cordon and `kubectl uncordon`; the cordon stays. Check mode says the same."""
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    world.cordon(a1)
    inventory = write_inventory(world, tmp_path)
    more = {"node_maintenance_concurrency": 1, "node_maintenance_budgets": zone_budget(world)}
    said = f"{a1} (cordoned by someone else, not by this collection: kubectl uncordon {a1})"
    checked = maintain(inventory, user, tmp_path, f"c{world.id}", [a2], more, check=True)
    assert finished(checked, 300) == 2, errors(checked.output)
    assert_stopped(checked.output, a2, said)
    audit = AuditLog(cluster)
    proc = maintain(inventory, user, tmp_path, f"a{world.id}", [a2], more)
    assert finished(proc, 300) == 2, errors(proc.output)
    assert_stopped(proc.output, a2, said)
    never_cordoned(audit, user, a2)
    assert cluster.client.get(f"/api/v1/nodes/{a1}")["spec"].get("unschedulable") is True


def test_a_resumed_node_out_of_service_finishes_whatever_fills_its_zone(cluster, world, user, tmp_path):
    """Found by the model explorer (docs/reliability.md): a run without a budget keeps a1 after a
    failed work hook (it holds a slot, no place of zone a); an administrator cordons a2; the rerun
    of a1 with the zone budget of 1 finds zone a full (a2's cordon, which nothing in flight
    releases). a1 is out of service already, so finishing it gives zone a capacity back: it goes
    on without a place of zone a and ends (rc 0). On cb8d5e5 it waited for a place until its
    lease timeout and failed."""
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    inventory = write_inventory(world, tmp_path)
    (tmp_path / "release").touch()
    hooks = {"node_maintenance_hooks_work": [write_hook(tmp_path, "work.yml", WORK)],
             "node_maintenance_failure_policy": "keep", "node_maintenance_concurrency": 1}
    first = f"k{world.id}"
    code = finished(maintain(inventory, user, tmp_path, first, [a1], {**hooks, "test_fail_nodes": [a1]}), 300)
    assert code == 2
    wait_run_gone(cluster.client, first)
    assert node_clean(cluster.client, a1) is not None, "a1 is kept out of service"
    world.cordon(a2)

    more = {**hooks, "test_fail_nodes": [], "node_maintenance_budgets": zone_budget(world),
            "node_maintenance_lease_timeout": 60}
    proc = maintain(inventory, user, tmp_path, f"r{world.id}", [a1], more)
    code = finished(proc, 300)
    assert code == 0, errors(proc.output)
    wait_clean(cluster.client, [a1])
    assert cluster.client.get(f"/api/v1/nodes/{a2}")["spec"].get("unschedulable") is True, "the cordon stays"
