"""The rollout scheduler against the local control plane (docs/design.md §18, issue 32's cases).

Four workers in two zones, run by the maintenance playbook as the least-privilege user. What
each run wrote is asserted from the cluster and the API server's audit log: after a failure
no NodeMaintenance is created, the nodes waiting for a place are released within seconds and
left as before the run, and the rerun the failure message prescribes finishes every node
with nothing left behind and no wait for a lease to lapse. Hooks tell the test where they are
with files and wait for files the test writes: no sleep synchronises anything.
"""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import yaml
from topology import wait_for

from .maintenance_support import (
    LEASES,
    AuditLog,
    Run,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ZONE = "topology.kubernetes.io/zone"
ZONE_BUDGET = [{"topology_key": ZONE, "max": 1}]
LEASE_TIMEOUT = 120  # a wait that outlived its reason fails the run well before the test's bound

FLASH = """\
- name: The firmware flash fails on the nodes the test names
  ansible.builtin.fail:
    msg: firmware flash failed
  when: inventory_hostname in (test_fail_nodes | default([]))
"""

GATED = """\
- name: Tell the test this node is in its work hook
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ inventory_hostname }}.work"
    content: "{{ now().timestamp() }}"
    mode: "0644"
- name: Work until the test releases it
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/release"
    timeout: 300
"""


def zones(world: Any) -> Dict[str, List[str]]:
    return {zone: world.add_nodes(workers=2, labels={ZONE: f"{world.id}-{zone}"}) for zone in ("a", "b")}


def hook(tmp_path: Path, body: str) -> str:
    path = tmp_path / "work.yml"
    path.write_text(body)
    return str(path)


def playbook(inventory: str, user: Any, tmp_path: Path, run_id: str, concurrency: int, budgets: List[Any],
             fail: List[str], work: str, limit: Optional[List[str]] = None) -> Run:
    return Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", ",".join(limit)] if limit else [],
               extra_vars={
        "node_maintenance_run_id": run_id, "node_maintenance_concurrency": concurrency,
        "node_maintenance_budgets": budgets, "node_maintenance_hooks_work": [work],
        "node_maintenance_lease_timeout": LEASE_TIMEOUT, "node_maintenance_report_dir": str(tmp_path / run_id),
        "test_fail_nodes": fail, "test_dir": str(tmp_path)})


def finished(proc: Run, timeout: float) -> int:
    try:
        return proc.wait(timeout)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()


def at(entry: Dict[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))


def of(entry: Dict[str, Any], resource: str, name: str = "", subresource: str = "") -> bool:
    ref = entry.get("objectRef") or {}
    return (ref.get("resource") == resource and (not name or ref.get("name") == name)
            and (ref.get("subresource") or "") == subresource)


def stopped_line(node: str) -> str:
    return f"{node}: not started: the run stopped after "


def assert_all_finished(cluster: Any, world: Any) -> None:
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.nodes if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []


# -- a failure stops the rollout; the prescribed rerun finishes every node -----------------------------
@pytest.mark.parametrize("concurrency, budgets, fail_all, rerun_at", [
    # issue 32 case 1: concurrency 2, the flash fails on the first node: the next batch never begins
    (2, [], False, 2),
    # cases 2 and 3: concurrency 4, one node a zone, the flash fails everywhere: the first node of each
    # zone fails and is kept, the other waits for its place and is released at once; the rerun at
    # concurrency 1 finishes the kept nodes first, then the others, with no lease-timeout wait
    (4, ZONE_BUDGET, True, 1),
], ids=["concurrency-2", "concurrency-4-zone-budget"])
def test_a_failure_stops_the_rollout_and_the_rerun_finishes_it(cluster, world, user, tmp_path, concurrency, budgets,
                                                               fail_all, rerun_at):
    by_zone = zones(world)
    zone_of = {n: z for z, nodes in by_zone.items() for n in nodes}
    first = world.nodes[0]
    inventory = write_inventory(world, tmp_path)
    work = hook(tmp_path, FLASH)
    run_id = f"f{world.id}"
    audit = AuditLog(cluster)
    proc = playbook(inventory, user, tmp_path, run_id, concurrency, budgets, world.nodes if fail_all else [first], work)
    output = ""
    try:
        code = proc.wait(600)
        output = proc.output
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    assert code != 0, output[-4000:]
    failed = sorted(n for n in world.nodes if ((maintenance_of(cluster.client, n) or {}).get("status") or {}).get(
        "phase") == "Failed")
    not_started = sorted(n for n in world.nodes if stopped_line(n) in output)
    if fail_all:  # the first node of each zone failed; the other waited for its place and stopped
        assert sorted(zone_of[n] for n in failed) == ["a", "b"], (failed, output[-4000:])
        assert not_started == sorted(set(world.nodes) - set(failed)), output[-4000:]
    else:
        assert failed == [first], output[-4000:]
        assert set(by_zone["b"]) <= set(not_started), output[-4000:]  # the next batch never began
    for node in failed:  # kept out of service (policy auto, the work failed), holding its places
        assert node_clean(cluster.client, node) is not None
    for node in not_started:  # as before the run: nothing of it left
        assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None
        assert re.search(f"{node}: not started: the run stopped after ({'|'.join(failed)}) failed "
                         r"\(in the work phase\)", output), output[-4000:]
    wait_run_gone(cluster.client, run_id)

    entries = audit.settled().entries()
    mine = [e for e in entries if (e.get("user") or {}).get("username") == user.name]
    # the failure's time: the failed nodes' last status write (phase Failed), the earliest of them
    failed_at = min(max(at(e) for e in mine if of(e, "nodemaintenances", nm_name(n), "status")) for n in failed)
    creates_after = [e for e in mine if of(e, "nodemaintenances") and e["verb"] == "create" and at(e) > failed_at]
    assert creates_after == [], f"a NodeMaintenance was created after the failure at {failed_at}: {creates_after}"
    for node in not_started:
        assert [e for e in mine if of(e, "nodes", node) and e["verb"] == "patch"] == [], f"{node} was written"
        deleted = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(node)) and e["verb"] == "delete"]
        waited = [e for e in mine if of(e, "nodemaintenances", nm_name(node), "status")]
        if waited or deleted:  # it was waiting for a place: released within seconds of the failure
            assert deleted and (max(deleted) - failed_at).total_seconds() < 20, (node, failed_at, deleted)

    if fail_all:  # the stopped nodes alone: their zone's place is held by a kept node of a gone run
        started = time.monotonic()
        alone = playbook(inventory, user, tmp_path, f"o{world.id}", concurrency, budgets, [], work, limit=not_started)
        code = finished(alone, 300)
        said = alone.output
        # at once, not at the lease timeout (which would fail the run): a bound with room for a
        # loaded CI machine, whose playbook start alone can take tens of seconds
        assert code == 0 and time.monotonic() - started < LEASE_TIMEOUT - 20, said[-4000:]
        for node in not_started:
            holder = next(f for f in failed if zone_of[f] == zone_of[node])
            assert f"{node}: not started: it waits for a place that {holder} holds, kept out of service" in said
            assert f"recover.yml -e nmo_nodes={holder}" in said, said[-4000:]
            assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None

    # the rerun the failure message prescribes: every node finished, no wait for a lease to lapse
    again = playbook(inventory, user, tmp_path, f"g{world.id}", rerun_at, budgets, [], work)
    code = finished(again, 600)
    # rc 0 is the proof that no wait lasted until a lease lapsed: a begin that waits as long as
    # node_maintenance_lease_timeout fails its node (the whole rerun's wall clock is no measure
    # of that on a loaded machine)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)


# -- kill point: ansible-playbook SIGKILLed while a node waits for a place ----------------------------
def test_a_run_killed_while_a_node_waits_for_a_place_is_finished_by_the_rerun(cluster, world, user, tmp_path):
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    inventory = write_inventory(world, tmp_path)
    work = hook(tmp_path, GATED)
    proc = playbook(inventory, user, tmp_path, f"k{world.id}", 2, ZONE_BUDGET, [], work)
    try:
        wait_for(lambda: proc.proc.poll() is not None or any((tmp_path / f"{n}.work").exists() for n in (a1, a2)),
                 180, "one node in its work hook")
        holder = a1 if (tmp_path / f"{a1}.work").exists() else a2
        waiter = a2 if holder == a1 else a1
        wait_for(lambda: proc.proc.poll() is not None or "place(s) are held" in (
            (maintenance_of(cluster.client, waiter) or {}).get("status") or {}).get("lastError", ""),
            60, f"{waiter} waiting for the zone's place")
        assert proc.proc.poll() is None, proc.output[-4000:]
        proc.kill()
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    wait_run_gone(cluster.client, f"k{world.id}")
    assert ((maintenance_of(cluster.client, waiter) or {}).get("status") or {}).get("phase") == "Pending"
    # the waiter first in the inventory: resumed first (a Pending of a gone run), it would wait an
    # hour for the place of the holder, whose turn came after it
    data = yaml.safe_load(Path(inventory).read_text())
    data["all"]["children"]["workers"]["hosts"] = {waiter: None, holder: None}
    Path(inventory).write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "release").touch()
    audit = AuditLog(cluster)
    again = playbook(inventory, user, tmp_path, f"r{world.id}", 1, ZONE_BUDGET, [], work)
    code = finished(again, 600)
    # rc 0 is the proof that no wait lasted until a lease lapsed: a begin that waits as long as
    # node_maintenance_lease_timeout fails its node (the whole rerun's wall clock is no measure
    # of that on a loaded machine)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)
    # the holder was finished (its NodeMaintenance deleted) before the waiter was cordoned
    mine = [e for e in audit.settled().entries() if (e.get("user") or {}).get("username") == user.name]
    ended = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(holder)) and e["verb"] == "delete"]
    cordoned = [at(e) for e in mine if of(e, "nodes", waiter) and e["verb"] == "patch"]
    assert ended and cordoned and max(ended) < min(cordoned), (ended, cordoned)


# -- kill point: ansible-playbook SIGKILLed the moment the scheduler has stopped the run -------------
def test_a_run_killed_as_the_scheduler_stops_it_is_finished_by_the_rerun(cluster, world, user, tmp_path):
    zones(world)
    inventory = write_inventory(world, tmp_path)
    work = hook(tmp_path, FLASH)
    run_id = f"s{world.id}"
    lease = f"{LEASES}/nmo-run-{run_id}"
    proc = playbook(inventory, user, tmp_path, run_id, 4, ZONE_BUDGET, world.nodes, work)
    try:
        wait_for(lambda: proc.proc.poll() is not None or "nmo.maintenance/stopped-after" in (
            ((cluster.client.get_or_none(lease) or {}).get("metadata") or {}).get("annotations") or {}),
            240, "the run to be stopped by its first failure")
        assert proc.proc.poll() is None, proc.output[-4000:]
        proc.kill()  # whatever the other nodes were doing: failing, stopping, waiting
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    wait_run_gone(cluster.client, run_id)
    again = playbook(inventory, user, tmp_path, f"t{world.id}", 4, ZONE_BUDGET, [], work)
    code = finished(again, 600)
    # rc 0 is the proof that no wait lasted until a lease lapsed: a begin that waits as long as
    # node_maintenance_lease_timeout fails its node (the whole rerun's wall clock is no measure
    # of that on a loaded machine)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)
