"""A failure stops the rollout in every phase at every concurrency (docs/design.md §18, issue 32).

One parametrized test, one failing run and one rerun a case, on workers in two zones (a's
first in the order). Each phase meets every concurrency, and the zone budget (one node a zone)
is on or off so that every phase and every concurrency meets both:

============  =============  =============  =============
phase          concurrency 1  concurrency 2  concurrency 4
============  =============  =============  =============
begin          no budget      zone budget    no budget
drain          zone budget    zone budget    no budget
work           no budget      no budget      zone budget
gate           zone budget    no budget      zone budget
settle         no budget
============  =============  =============  =============

The other budget state of each of the twelve cells (``REST``, marked ``side_lane``) completes the
product; CI runs those on a cluster of its own in its side lane (hack/test).

* begin: a node without a kubelet, first in the order (in zone a): the begin refuses it before
  any write (pre-flight ``warn``); the fix brings its kubelet back.
* drain: both nodes of zone a hold a pod whose PodDisruptionBudget never lets it go (a short drain
  timeout): whichever begins first fails; the fix deletes the budgets.
* work (issue 32's cases 1-3): at concurrency 2 the flash fails on the first node only: the next
  batch never begins; at 4 with the budget it fails everywhere: the first node of each zone
  fails and is kept, the other waits for its place and is released at once; then the released
  nodes alone stop at once, naming the kept node that holds their place; the rerun at
  concurrency 1 finishes the kept nodes first.
* gate: it fails on both nodes of zone a.
* settle: the first node's Deployment is pinned to a label the node no longer has, so its
  replacement can never be scheduled (a short settle timeout); the node is back in service, the
  run stops after it, and the playbook fails it at its end with its line; the fix labels it again.

Nodes past their begin that do not fail wait in their work hook (or gate) until the run has
stopped, so what each phase meets is the same on a loaded machine. At concurrency 4 without a
budget a fifth worker is a batch of its own. Each case asserts that every node not past its
begin says ``not started`` naming the node whose failure stopped the run and its phase (every
node of a later batch among them), and is left as before the run; that nodes past their begin
finished; from the API server's audit log, that no NodeMaintenance is created and no Node
cordoned after the failure (but by a node whose begin had made its NodeMaintenance before it:
it goes on, §18.1) and that waiting nodes were released within seconds; and that the
rerun, after the cause is fixed, finishes every node with nothing of ours left, at a lease
timeout short enough that a wait outliving its reason would fail it.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional

import pytest
from topology import KWOK_ANNOTATION, wait_for

from .maintenance_support import (
    LEASES,
    AuditLog,
    maintenance_of,
    nm_name,
    node_clean,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .rollout_support import (
    GATE,
    LEASE_TIMEOUT,
    WORK,
    ZONE,
    ZONE_BUDGET,
    assert_all_finished,
    at,
    by,
    cordons,
    finished,
    labels_of,
    of,
    playbook,
    stopped_line,
    write_hook,
    zones,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

STOPPED_AFTER = "nmo.maintenance/stopped-after"


@dataclass(frozen=True)
class Case:
    phase: str
    concurrency: int
    zone_budget: bool
    fail: str = "zone-a"  # the nodes that fail: zone a's, the first node only, or all
    rerun_at: Optional[int] = None  # the rerun's concurrency, when not the run's

    @property
    def id(self) -> str:
        return (f"{self.phase}-concurrency-{self.concurrency}{'-zone-budget' if self.zone_budget else ''}"
                f"{'-fails-everywhere' if self.fail == 'all' else ''}")


CASES = [
    Case("begin", 1, False), Case("begin", 2, True), Case("begin", 4, False),
    Case("drain", 1, True), Case("drain", 2, True), Case("drain", 4, False),
    Case("work", 1, False), Case("work", 2, False, fail="first"), Case("work", 4, True, fail="all", rerun_at=1),
    Case("gate", 1, True), Case("gate", 2, False), Case("gate", 4, True),
    Case("settle", 1, False, fail="first"),
]

# The rest of the product (phase x concurrency x budget): the other budget state of every cell
# above. Run in CI's side lane, on a cluster of its own beside the main suite (hack/test,
# marker side_lane), where they cost no wall time of the main lane.
REST = [Case(c.phase, c.concurrency, not c.zone_budget) for c in CASES if c.phase != "settle"]
PARAMS = ([pytest.param(c, id=c.id) for c in CASES]
          + [pytest.param(c, id=c.id, marks=pytest.mark.side_lane) for c in REST])


@dataclass
class Setup:
    more: Dict[str, Any]
    fix: Callable[[], None]
    failing: List[str] = field(default_factory=list)
    first: str = ""  # the node that fails first, when the setup knows it (begin, settle)


def down_node(cluster: Any, world: Any, zone: str) -> str:
    """A worker that no kubelet (nor kwok) keeps Ready, first in the world's order."""
    name = f"node-{world.id}-worker-00"
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": labels_of(world, name, zone)}})
    world.nodes.insert(0, name)
    return name


def kubelet_back(cluster: Any, world: Any, node: str, zone: str) -> None:
    """The cause fixed: the node comes back with a kubelet (kwok's; kwok takes a node as it is
    made, not when an annotation is added later): made again, Ready and untainted."""
    cluster.client.delete(f"/api/v1/nodes/{node}")
    wait_for(lambda: cluster.client.get_or_none(f"/api/v1/nodes/{node}") is None, 60, f"{node} gone")
    allocatable = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": node, "annotations": dict(KWOK_ANNOTATION), "labels": labels_of(world, node, zone)},
        "status": {"capacity": allocatable, "allocatable": allocatable}})
    wait_for(lambda: world._node_schedulable(node), 120, f"{node} Ready and untainted")


def set_up(case: Case, cluster: Any, world: Any, by_zone: Dict[str, List[str]], tmp_path: Any) -> Setup:
    """The cause of the case's failure, the variables that make it fail, and its fix."""
    zone_a = f"{world.id}-a"
    more: Dict[str, Any] = {"node_maintenance_preflight": "warn"}
    if case.phase != "gate":  # the nodes that do not fail hold in their work until the run stopped
        more["node_maintenance_hooks_work"] = [write_hook(tmp_path, "work.yml", WORK)]
    failing = {"zone-a": by_zone["a"], "first": world.nodes[:1], "all": list(world.nodes)}[case.fail]
    if case.phase == "begin":
        down = down_node(cluster, world, zone_a)
        more["node_maintenance_drain_timeout"] = 60  # the kubelet's wait is not skipped: the begin refuses
        return Setup(more, lambda: kubelet_back(cluster, world, down, zone_a), [], down)
    if case.phase == "drain":
        for node in failing:
            with world.only_schedulable(node):
                world.deployment(f"db-{node[-2:]}", 1)
            world.pdb(f"db-{node[-2:]}", f"db-{node[-2:]}", min_available=1)
        more["node_maintenance_drain_timeout"] = 5
        pdbs = [f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/db-{n[-2:]}" for n in failing]
        return Setup(more, lambda: [cluster.client.delete(pdb) for pdb in pdbs] and None, failing)
    if case.phase == "settle":  # its Deployment can come back only where a label is that the node lost
        node, pool = failing[0], f"nmo.test/pool-{world.id}"
        cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {pool: "a"}}}, "merge")
        world.deployment("pinned", 1, pod_extra={"nodeSelector": {pool: "a"}})
        cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {pool: None}}}, "merge")
        more["node_maintenance_settle_timeout"] = 5
        (tmp_path / "release").touch()  # nothing holds it in its work: its settle is what fails

        def fix() -> None:
            cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {pool: "a"}}}, "merge")
            more["node_maintenance_settle_timeout"] = 300
        return Setup(more, fix, [], node)
    more["test_fail_nodes"] = failing
    if case.phase == "gate":
        more.update({"node_maintenance_gate": write_hook(tmp_path, "gate.yml", GATE),
                     "node_maintenance_gate_timeout": 1, "node_maintenance_gate_delay": 1})
    return Setup(more, lambda: more.update(test_fail_nodes=[]), failing)


def stop_mark(cluster: Any, run_id: str) -> str:
    lease = cluster.client.get_or_none(f"{LEASES}/nmo-run-{run_id}") or {}
    return ((lease.get("metadata") or {}).get("annotations") or {}).get(STOPPED_AFTER, "")


@pytest.mark.parametrize("case", PARAMS)
def test_a_failure_in_any_phase_stops_the_rollout_at_any_concurrency(cluster, world, user, tmp_path, case):
    by_zone = zones(world)
    if case.concurrency == 4 and not case.zone_budget and case.phase != "begin":  # a batch after the first
        by_zone["b"] += world.add_nodes(workers=1, labels={ZONE: f"{world.id}-b"})
    setup = set_up(case, cluster, world, by_zone, tmp_path)
    zone_of = {n: z for z, nodes in by_zone.items() for n in nodes}
    budgets = ZONE_BUDGET if case.zone_budget else []
    inventory = write_inventory(world, tmp_path)
    run_id = f"m{world.id}"
    audit = AuditLog(cluster)
    proc = playbook(inventory, user, tmp_path, run_id, case.concurrency, budgets, setup.more)
    mark = ""
    try:
        def stopped() -> bool:
            nonlocal mark
            mark = mark or stop_mark(cluster, run_id)
            return bool(mark) or proc.proc.poll() is not None
        wait_for(stopped, 300, "the run to be stopped by its first failure")
        seen_stopped = datetime.now(timezone.utc)
        (tmp_path / "release").touch()  # the nodes past their begin go on
        code = proc.wait(600)
        output = proc.output
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    assert code != 0, output[-4000:]
    assert mark, f"the run lease never said it stopped: {output[-4000:]}"
    first, phase = mark.rsplit("/", 1)
    assert phase == case.phase, mark
    wait_run_gone(cluster.client, run_id)
    failed = sorted(n for n in world.nodes if ((maintenance_of(cluster.client, n) or {}).get("status") or {}).get(
        "phase") == "Failed")
    if setup.first:  # refused before any write, or back in service after its end: no NodeMaintenance
        assert first == setup.first and failed == [], (mark, failed)
    else:
        assert first in failed and set(failed) <= set(setup.failing), (mark, failed, output[-4000:])
    if case.fail == "all":  # the first node of each zone failed and is kept, holding its place
        assert sorted(zone_of[n] for n in failed) == ["a", "b"], failed

    # every node not past its begin: not started, naming a failure of this run: the first (the
    # run lease's mark), or, for a node waiting for its place, the node holding it when that
    # one's record said it failed before the first's mark was written (two failing at once)
    not_started = sorted(n for n in world.nodes if stopped_line(n) in output)
    named = "|".join(re.escape(n) for n in dict.fromkeys([first, *failed]))
    for node in not_started:
        assert re.search(f"{node}: not started: the run stopped after ({named}) failed "
                         f"\\(in the {case.phase} phase\\)", output), output[-4000:]
    assert set(world.nodes[case.concurrency:]) - set(failed) <= set(not_started), output[-4000:]  # later batches
    if case.zone_budget and case.phase not in ("begin", "settle"):  # its zone's other node waited for its place
        assert set(by_zone["a"]) - set(failed) <= set(not_started), output[-4000:]
    assert first not in not_started and not set(failed) & set(not_started), output[-4000:]
    for node in set(world.nodes) - set(failed):  # finished, or as before the run: nothing of ours left
        assert maintenance_of(cluster.client, node) is None, node
    kept = case.phase in ("work", "gate")  # policy auto: kept out of service; a drain's is rolled back
    wait_clean(cluster.client, [n for n in world.nodes if n not in failed or not kept])
    for node in failed:
        assert (node_clean(cluster.client, node) is not None) is kept, node
    if case.phase == "settle":  # back in service, failed by the playbook's last play with its line
        assert re.search(f"fatal: \\[{first}\\]: FAILED!.*maintenance of node {first} ended \\(the node is back "
                         "in service\\), but its settle failed: workloads evicted from node "
                         f"{first} are not whole again: Deployment {world.namespace}/pinned", output), output[-4000:]

    mine = by(audit.settled().entries(), user)
    # the failure's time: the failed node's last status write (phase Failed); a begin refused
    # before any write and a settle after the end have none: the moment the test saw the mark
    statuses = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(first), "status")]
    failed_at = max(statuses) if case.phase not in ("begin", "settle") else seen_stopped
    later = [e for e in mine if at(e) > failed_at]
    creates = [e for e in later if of(e, "nodemaintenances") and e["verb"] == "create"]
    # a node whose begin took its places before the failure goes on with it (design §18.1), its
    # cordon included; any other cordon after the failure is a node that began after it
    began = {n for n in set(world.nodes) - set(not_started)
             if [e for e in mine if of(e, "nodemaintenances", nm_name(n)) and e["verb"] == "create"
                 and at(e) <= failed_at]}
    cordoned = [e for e in later if of(e, "nodes") and e["verb"] == "patch" and cordons(e.get("requestObject"))
                and (e.get("objectRef") or {}).get("name") not in began]
    if case.phase != "begin":  # the failed node's own cordon, before: the check below can see one
        assert [e for e in mine if of(e, "nodes", first) and e["verb"] == "patch" and at(e) <= failed_at
                and cordons(e.get("requestObject"))], "the failed node's cordon is not in the audit log"
    assert creates == [], f"a NodeMaintenance was created after the failure at {failed_at}: {creates}"
    assert cordoned == [], f"a node was cordoned after the failure at {failed_at}: {cordoned}"
    for node in not_started:
        assert [e for e in mine if of(e, "nodes", node) and e["verb"] == "patch"] == [], f"{node} was written"
        deleted = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(node)) and e["verb"] == "delete"]
        if [e for e in mine if of(e, "nodemaintenances", nm_name(node)) and e["verb"] == "create"]:
            # it was waiting for a place: released within seconds of the failure
            assert deleted and (max(deleted) - failed_at).total_seconds() < 20, (node, failed_at, deleted)

    if case.fail == "all":  # the stopped nodes alone: their zone's place is held by a kept node of a gone run
        began = time.monotonic()
        alone = playbook(inventory, user, tmp_path, f"o{world.id}", case.concurrency, budgets,
                         {**setup.more, "test_fail_nodes": []}, limit=not_started)
        code = finished(alone, 300)
        said = alone.output
        # at once, not at the lease timeout: a bound with room for a loaded CI machine, whose
        # playbook start alone can take tens of seconds. The run fails (rc 2): no node of it
        # failed, but it left every node undone, and says so in the playbook's last play
        assert code == 2 and time.monotonic() - began < LEASE_TIMEOUT - 20, said[-4000:]
        for node in not_started:
            holder = next(f for f in failed if zone_of[f] == zone_of[node])
            assert f"{node}: not started: it waits for a place that {holder} holds, kept out of service" in said
            assert f"recover.yml -e nmo_nodes={holder}" in said, said[-4000:]
            assert re.search(rf"fatal: \[{re.escape(node)}\]: FAILED! => .*not started: it waits for a place", said), \
                said[-4000:]
            assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None

    # the cause fixed, the rerun the failure message prescribes: every node finished, nothing left;
    # rc 0 proves no wait lasted until a lease lapsed (such a begin fails its node)
    setup.fix()
    again = playbook(inventory, user, tmp_path, f"n{world.id}", case.rerun_at or case.concurrency, budgets,
                     setup.more)
    code = finished(again, 600)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)
