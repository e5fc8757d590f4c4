"""Concurrency, forks, budgets and order (issue 41, items 1 and 5; design §3.6, §18).

A concurrency above Ansible's forks is refused before any write.

40 workers in 4 zones, concurrency 8, a zone budget of 2 and the default 5 forks stood still:
every Ansible worker was a begin waiting for a place whose holder needed a worker to go on.
Smaller here: 4 workers of one zone, a budget of 1, concurrency 6 with the default forks, and
concurrency 3 with -f 2: each run ends at once with the message naming the forks it needs, and
nothing is written (no run lease, no NodeMaintenance, no lease, no cordon).

With a zone budget the default order interleaves the zones, so the first nodes use every
zone's place: the inventory lists zone a's nodes, then zone b's; at concurrency 2, one node a
zone and forks 2 (the nodes begin in the run's order), a1 and b1 are out at once first. In the
inventory's order with forks 4 the nodes started beyond the concurrency (host_pinned) fill the
budget all the same: b1 takes zone b's place while a2 waits for zone a's (with serial batches
of the concurrency the batch was a1 and a2, one of which waited: never 2 out at once).
"""

from __future__ import annotations

from typing import List, Optional

import pytest
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.disruption import BLOCKED_PREFIX

from .blocked_support import errors
from .maintenance_support import AuditLog, NodeRecorder, Run, maintenance_of, wait_clean, write_inventory
from .rollout_support import ZONE, by, finished

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.mark.parametrize("concurrency, args, forks", [(6, [], 5), (3, ["-f", "2"], 2)])
def test_a_concurrency_above_the_forks_is_refused_before_any_write(
        cluster, world, user, tmp_path, concurrency, args, forks):
    world.add_nodes(workers=4, labels={ZONE: f"{world.id}-a"})
    inventory = write_inventory(world, tmp_path)
    audit = AuditLog(cluster)
    proc = Run("maintenance.yml", inventory, user.kubeconfig, args=args, env={"ANSIBLE_FORKS": ""}, extra_vars={
        "node_maintenance_run_id": f"f{world.id}", "node_maintenance_concurrency": concurrency,
        "node_maintenance_budgets": [{"topology_key": ZONE, "max": 1}], "node_maintenance_lease_timeout": 600,
        "node_maintenance_report_dir": str(tmp_path / "report")})
    code = finished(proc, 120)
    output = proc.output
    assert code == 2, errors(output)
    assert (f"node_maintenance_concurrency {concurrency} needs at least {concurrency} Ansible forks, and this run "
            f"has {forks}") in output, errors(output)
    assert f"-f {concurrency}" in output and f"ANSIBLE_FORKS={concurrency}" in output
    writes = [e for e in by(audit.settled().entries(), user) if e["verb"] in ("create", "update", "patch", "delete")]
    assert writes == [], writes


@pytest.mark.parametrize("order, forks", [(None, 2), ("inventory", 4)])
def test_the_default_order_interleaves_a_budgets_zones_and_nodes_started_ahead_fill_it(
        cluster, world, user, tmp_path, order, forks):
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    b1, b2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-b"})
    inventory = write_inventory(world, tmp_path)
    chosen = {"node_maintenance_order": order} if order else {}
    with NodeRecorder(cluster.client, world) as seen:
        proc = Run("maintenance.yml", inventory, user.kubeconfig, args=["-f", str(forks)], extra_vars={
            "node_maintenance_run_id": f"o{world.id}", "node_maintenance_concurrency": 2,
            "node_maintenance_budgets": [{"topology_key": ZONE, "max": 1}], "node_maintenance_lease_timeout": 120,
            "node_maintenance_report_dir": str(tmp_path / "report"), **chosen})
        assert finished(proc, 300) == 0, errors(proc.output)
    wait_clean(cluster.client, [a1, a2, b1, b2])
    assert seen.most_at_once == 2, seen.history
    if order is None:  # interleaved, and as many nodes started as the concurrency: a1 and b1 first
        assert set(seen.order[:2]) == {a1, b1}, seen.order


def test_waiting_nodes_take_a_freed_place_in_the_runs_order(cluster, world, user, tmp_path):
    """Issue 41, item 6 (design §18.6): four nodes of one zone, a budget of 1, concurrency 2 and
    the default forks: all four start, one holds the zone's place, three wait. Each time the holder
    ends (the test opens its gate once the others wait), the earliest waiter in the run's order
    takes the freed place, never the one whose create reaches the API server first (before: any
    of the three, a one-in-six chance for the run's order)."""
    nodes = world.add_nodes(workers=4, labels={ZONE: f"{world.id}-a"})
    hook = tmp_path / "work.yml"
    hook.write_text("- name: Work until the test opens this node's gate\n  ansible.builtin.wait_for:\n"
                    f"    path: \"{tmp_path}/gate-{{{{ inventory_hostname }}}}\"\n    timeout: 300\n")
    inventory = write_inventory(world, tmp_path, node_maintenance_hooks_work=[str(hook)])
    proc = Run("maintenance.yml", inventory, user.kubeconfig, extra_vars={
        "node_maintenance_run_id": f"t{world.id}", "node_maintenance_concurrency": 2,
        "node_maintenance_budgets": [{"topology_key": ZONE, "max": 1}], "node_maintenance_lease_timeout": 300,
        "node_maintenance_report_dir": str(tmp_path / "report")})
    client = cluster.client

    def cordoned(node: str) -> bool:
        return bool(client.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"))

    def waits(node: str) -> bool:
        nm = maintenance_of(client, node)
        return bool(nm) and (nm.get("status") or {}).get("lastError", "").startswith(BLOCKED_PREFIX)

    taken: List[str] = []
    try:
        for round_ in range(len(nodes)):
            left = [n for n in nodes if n not in taken]

            def one_holds_the_rest_wait(left: List[str] = left) -> Optional[str]:
                holders = [n for n in left if cordoned(n)]
                if len(holders) != 1 or not all(waits(n) for n in left if n != holders[0]):
                    assert proc.proc.poll() is None, errors(proc.output)
                    return None
                return holders[0]

            holder = wait_for(one_holds_the_rest_wait, 120,
                              f"round {round_}: one node holding the zone's place, the others waiting for it")
            taken.append(holder)
            (tmp_path / f"gate-{holder}").write_text("done")
        assert finished(proc, 120) == 0, errors(proc.output)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
    wait_clean(client, nodes)
    # the first place went to whoever asked first; every later one to the earliest waiter
    assert taken[1:] == [n for n in nodes if n != taken[0]], taken
