"""The rollout scheduler killed at its kill points (docs/design.md §18, issue 32's "Done when").

Workers in zones, run by the maintenance playbook as the least-privilege user, SIGKILLed while a
node waits for a place and the moment the scheduler has stopped the run; the rerun finishes every
node with nothing left behind and no wait for a lease to lapse. A failure in each phase at each
concurrency is test_rollout_matrix.py's. Hooks tell the test where they are with files and wait
for files the test writes: no sleep synchronises anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from topology import wait_for

from .maintenance_support import LEASES, AuditLog, maintenance_of, nm_name, wait_run_gone, write_inventory
from .rollout_support import (
    WORK,
    ZONE,
    ZONE_BUDGET,
    assert_all_finished,
    at,
    by,
    finished,
    of,
    playbook,
    write_hook,
    zones,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def hooked(tmp_path: Path, fail: list) -> dict:
    """The work hook (rollout_support.WORK), failing on ``fail``."""
    return {"node_maintenance_hooks_work": [write_hook(tmp_path, "work.yml", WORK)], "test_fail_nodes": fail}


# -- kill point: ansible-playbook SIGKILLed while a node waits for a place ----------------------------
def test_a_run_killed_while_a_node_waits_for_a_place_is_finished_by_the_rerun(cluster, world, user, tmp_path):
    a1, a2 = world.add_nodes(workers=2, labels={ZONE: f"{world.id}-a"})
    inventory = write_inventory(world, tmp_path)
    proc = playbook(inventory, user, tmp_path, f"k{world.id}", 2, ZONE_BUDGET, hooked(tmp_path, []))
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
    again = playbook(inventory, user, tmp_path, f"r{world.id}", 1, ZONE_BUDGET, hooked(tmp_path, []))
    code = finished(again, 600)
    # rc 0 is the proof that no wait lasted until a lease lapsed: a begin that waits as long as
    # node_maintenance_lease_timeout fails its node (the whole rerun's wall clock is no measure
    # of that on a loaded machine)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)
    # the holder was finished (its NodeMaintenance deleted) before the waiter was cordoned
    mine = by(audit.settled().entries(), user)
    ended = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(holder)) and e["verb"] == "delete"]
    cordoned = [at(e) for e in mine if of(e, "nodes", waiter) and e["verb"] == "patch"]
    assert ended and cordoned and max(ended) < min(cordoned), (ended, cordoned)


# -- kill point: ansible-playbook SIGKILLed the moment the scheduler has stopped the run -------------
def test_a_run_killed_as_the_scheduler_stops_it_is_finished_by_the_rerun(cluster, world, user, tmp_path):
    zones(world)
    inventory = write_inventory(world, tmp_path)
    run_id = f"s{world.id}"
    lease = f"{LEASES}/nmo-run-{run_id}"
    (tmp_path / "release").touch()  # the flash fails before the hook holds anyone
    proc = playbook(inventory, user, tmp_path, run_id, 4, ZONE_BUDGET, hooked(tmp_path, world.nodes))
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
    again = playbook(inventory, user, tmp_path, f"t{world.id}", 4, ZONE_BUDGET, hooked(tmp_path, []))
    code = finished(again, 600)
    # rc 0 is the proof that no wait lasted until a lease lapsed: a begin that waits as long as
    # node_maintenance_lease_timeout fails its node (the whole rerun's wall clock is no measure
    # of that on a loaded machine)
    assert code == 0, again.output[-4000:]
    assert_all_finished(cluster, world)
