"""What a node costs the API server, bounded on a fixed world (issue 43).

A rollout's requests are deterministic but for two things that follow the pods: the evictions
(one a pod, and again each time a PodDisruptionBudget refuses one: the drain's own, not
counted here) and the waits' progress writes (the drain's, at most one a second). So the rest,
counted from the API server's audit log for the run's own user, stays within a bound a node;
a list of every NodeMaintenance per look, a second status write a phase or a node read twice
shows as a failure here, each kind counted apart so the message says which. The bound is what
the role needs today plus a margin for the progress writes (docs/benchmarks.md, "Requests a
node"); the benchmark's B6 and B10 measure the same on larger worlds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

import pytest

from .maintenance_support import AuditLog, run, write_inventory
from .rollout_support import ZONE_BUDGET, assert_all_finished, zones

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

WORKERS = 4
# beyond the evictions, a node: its begin (the leases listed once, the NodeMaintenance made and
# its record, the leases, one node patch and its condition, three events), its drain (the
# snapshot's reads are its first look), the Ready wait, its end and its settle; and the run's
# own requests spread over its nodes (start, look, pre-flight, report, heartbeat). Measured
# 57.0 to 58.8 at 4 workers one at a time on a quiet machine; the margin is for what follows
# the clock, not the code: the drains' progress writes (one a second while a budget holds an
# eviction back) and the heartbeat's renewals of the run lease, both more on a loaded machine.
PER_NODE = 66
# waiting nodes (concurrency 2, a zone budget): a place of the budget taken and given back,
# the wait's watches, its status said once or twice. Measured 70.8 to 71.8.
WAITING_PER_NODE = 82
# the kinds that grow with the cluster or repeat a phase's work: at most (a node, a run)
AT_MOST = {
    "list nodemaintenances": (1, 2),  # the begin's, which must see every one of the node; by name elsewhere
    "get nodemaintenances": (1, 0),  # the Ready wait's report reads the node's own by name
    "list nodes": (1, 3),  # the Ready wait's watch start (the drain's view serves the volume wait)
    "get nodes": (5, 2),  # the look, the begin, the snapshot before the drain, the end, the settle
    "patch nodemaintenances/status": (9, 0),  # begin 2, drain 2 and its progress, Ready 1, end 1
}
# with waits: the first look's reads of the budget's nodes and the holders' records, no list a look
# (the nodes listed again when a holder let its places go: how often follows the timing). The
# NodeMaintenances: the begin's list and the turn check's after a slot is taken (a node), and a
# wait's (the holders' records at its first look, which its watch starts from; and the turn
# check's again when a place taken is given back to an earlier node): how many waits a node
# goes through follows the timing, so they are counted, from the watches beyond one a node
WAITING_AT_MOST = {**AT_MOST, "list nodemaintenances": (2, 2, 2), "list nodes": (3, 3),
                   "patch nodemaintenances/status": (11, 0)}


def counted(entries: List[Dict[str, Any]]) -> Counter:
    """The requests by kind, as the benchmark names them ("verb resource[/subresource]")."""
    kinds: Counter = Counter()
    for entry in entries:
        ref = entry.get("objectRef") or {}
        resource = ref.get("resource") or "?"
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        kinds[f"{entry.get('verb')} {resource}"] += 1
    return kinds


def rollout(cluster: Any, user: Any, tmp_path: Any, inventory: str, extra: Dict[str, Any]) -> Counter:
    audit = AuditLog(cluster)
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                 extra_vars={"node_maintenance_report_dir": str(tmp_path / "reports"), **extra})
    assert result.proc.returncode == 0, result.output[-4000:]
    return counted(audit.settled().requests_of(user.name))


def bound(kinds: Counter, nodes: int, a_node: int, a_run: int, a_wait: int = 0) -> int:
    """At most ``a_node`` a node, ``a_run`` a run and ``a_wait`` a wait; the waits are the
    watches of the NodeMaintenances beyond the drain's, one a node."""
    return a_node * nodes + a_run + a_wait * max(0, kinds["watch nodemaintenances"] - nodes)


def assert_within(kinds: Counter, nodes: int, per_node: float, at_most: Dict[str, Any]) -> None:
    rest = sum(n for kind, n in kinds.items() if kind != "create pods/eviction")
    by_kind = ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())
    print(f"{rest / nodes:.1f} requests a node beyond the evictions ({by_kind})")  # the figure, for the bounds
    assert rest <= per_node * nodes, (f"{rest / nodes:.1f} requests a node beyond the evictions, at most "
                                      f"{per_node} ({by_kind})")
    over = {kind: f"{kinds[kind]} (at most {bound(kinds, nodes, *most)}: {most} a node, a run, a wait)"
            for kind, most in at_most.items() if kinds[kind] > bound(kinds, nodes, *most)}
    assert not over, f"{over} ({by_kind})"


def test_a_node_costs_at_most_its_bound_one_at_a_time(cluster, world, user, tmp_path):
    world.add_nodes(workers=WORKERS)
    world.deployment("web", 2 * WORKERS)
    world.pdb("web", "web", max_unavailable=1)
    inventory = write_inventory(world, tmp_path)
    kinds = rollout(cluster, user, tmp_path, inventory, {})
    assert_within(kinds, WORKERS, PER_NODE, AT_MOST)
    assert_all_finished(cluster, world)


def test_waiting_nodes_cost_about_what_a_node_one_at_a_time_costs(cluster, world, user, tmp_path):
    """Concurrency 2 and a zone budget of 1, forks 4 (nodes started ahead wait in their begin):
    a waiting node looks at the watch's view, not a list a look, and tells of its wait when
    it changes kind or at most every few seconds, not at every holder that comes and goes."""
    zones(world, per_zone=WORKERS // 2)
    world.deployment("web", 2 * WORKERS)
    world.pdb("web", "web", max_unavailable=1)
    inventory = write_inventory(world, tmp_path)
    kinds = rollout(cluster, user, tmp_path, inventory, {
        "node_maintenance_concurrency": 2, "node_maintenance_budgets": ZONE_BUDGET})
    assert_within(kinds, WORKERS, WAITING_PER_NODE, WAITING_AT_MOST)
    assert_all_finished(cluster, world)
