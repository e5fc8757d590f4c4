"""node_maintenance_order and node_maintenance_prefer_no_schedule through playbooks/maintenance.yml
against the local control plane: the order the nodes entered maintenance (watched), the
waiting taints on the nodes still to come, and none left after a normal end, a failure, a
kill plus a rerun, and recover.yml; bad values refused before any write."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

from topology import WORLD_LABEL, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher

from .maintenance_support import LEASES, WatchRecorder, in_maintenance, run, write_inventory
from .maintenance_support import Run as PlaybookRun

ZONE = "topology.kubernetes.io/zone"
WAITING = "nmo.maintenance/waiting"
START = "Run | Start this run (id, run lease, heartbeat on the controller)"
PREFER = {"node_maintenance_prefer_no_schedule": True, "node_maintenance_preflight": "off"}


def waiting_run(node: Dict[str, Any]) -> Optional[str]:
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("key") == WAITING:
            assert taint.get("effect") == "PreferNoSchedule"
            return taint.get("value") or ""
    return None


class EntryRecorder(WatchRecorder):
    """The order the world's nodes entered maintenance, and which carried a waiting taint then."""

    def __init__(self, client: Any, world: Any) -> None:
        super().__init__(Watcher(client, "/api/v1/nodes", {"labelSelector": f"{WORLD_LABEL}={world.id}"}))
        self.order: List[str] = []
        self.waiting_at_entry: Dict[str, Set[str]] = {}

    def _look(self) -> None:
        nodes = list(self.watcher.objects.values())
        waiting = {n["metadata"]["name"] for n in nodes if waiting_run(n) is not None}
        for node in nodes:
            name = node["metadata"]["name"]
            if in_maintenance(node) and name not in self.order:
                self.order.append(name)
                self.waiting_at_entry[name] = waiting


def waiting_on(world: Any) -> Dict[str, str]:
    return {n: run_id for n in world.nodes if (run_id := waiting_run(world.node(n))) is not None}


def hook(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text(body)
    return str(path)


def test_zone_order_with_waiting_taints_and_none_left_after_the_run(cluster, world, tmp_path):
    # inventory order b, a, b, a: the run takes zone a (w2, w4), then zone b (w1, w3)
    w1 = world.add_nodes(workers=1, labels={ZONE: "b"})[0]
    w2 = world.add_nodes(workers=1, labels={ZONE: "a"})[0]
    w3 = world.add_nodes(workers=1, labels={ZONE: "b"})[0]
    w4 = world.add_nodes(workers=1, labels={ZONE: "a"})[0]
    inventory = write_inventory(world, tmp_path)
    with EntryRecorder(cluster.client, world) as seen:
        r = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", "workers"],
                extra_vars={"node_maintenance_order": "zone", **PREFER})
    assert r.proc.returncode == 0, r.output[-3000:]
    assert seen.order == [w2, w4, w1, w3], "zone a, then zone b, each in the inventory's order"
    for index, node in enumerate(seen.order):
        assert seen.waiting_at_entry[node] == set(seen.order[index:]), \
            f"when {node} began, the nodes not yet ended carried the waiting taint"
    planned = r.last("Read the maintenance state of every node of the run, and which to resume (one call for all)")
    assert planned["result"]["order"] == [w2, w4, w1, w3] and planned["result"]["domains"] == ["a", "b"]
    assert waiting_on(world) == {}, "no waiting taint is left when the run ends"


def test_a_failed_run_leaves_no_waiting_taint(cluster, world, tmp_path):
    w1, w2, w3 = world.add_nodes(workers=3)
    inventory = write_inventory(world, tmp_path)
    broken = hook(tmp_path, "broken.yml", "- name: The work fails\n  ansible.builtin.fail:\n    msg: broken\n")
    r = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", "workers"],
            extra_vars={"node_maintenance_hooks_work": [broken], "node_maintenance_failure_policy": "rollback",
                        **PREFER})
    assert r.proc.returncode != 0 and "broken" in r.output
    marked = r.last("The nodes still to be maintained repel pods (node_maintenance_prefer_no_schedule)")
    assert sorted(marked["result"]["tainted"]) == sorted([w1, w2, w3])
    # the run stopped at w1: the heartbeat, seeing ansible-playbook gone, removes the rest
    wait_for(lambda: waiting_on(world) == {}, 30, "the heartbeat to remove the failed run's waiting taints")
    assert not world.node(w1)["spec"].get("unschedulable"), "rolled back"


def test_a_killed_run_then_a_rerun_and_recover_leave_no_waiting_taint(cluster, world, tmp_path):
    w1, w2, w3 = world.add_nodes(workers=3)
    inventory = write_inventory(world, tmp_path)
    release = tmp_path / "release"
    held = hook(tmp_path, "held.yml", f"- name: Wait for the test\n  ansible.builtin.wait_for:\n"
                                      f"    path: {release}\n    timeout: 120\n")
    extra = {"node_maintenance_hooks_work": [held], **PREFER}
    first = PlaybookRun("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", "workers"], extra_vars=extra)
    try:
        wait_for(lambda: in_maintenance(world.node(w1)) and set(waiting_on(world)) == {w1, w2, w3}, 60,
                 "w1 in maintenance, w2 and w3 waiting")
        started = first.last(START)["result"]
        os.kill(started["heartbeat_pid"], signal.SIGKILL)  # the whole controller dies: no heartbeat's last act
        first.kill()
    finally:
        first.close()
    # its run lease would lapse within a minute: gone now
    cluster.client.delete(f"{LEASES}/nmo-run-{started['run']}")
    assert set(waiting_on(world)) == {w1, w2, w3} and set(waiting_on(world).values()) == {started["run"]}

    # the rerun (w1 only: it resumes it) removes the dead run's taints from every node at its start
    release.write_text("")
    again = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", w1], extra_vars=extra)
    assert again.proc.returncode == 0, again.output[-3000:]
    assert waiting_on(world) == {}
    assert not in_maintenance(world.node(w1))

    # recover.yml removes a dead run's waiting taint from the nodes it is given
    cluster.client.patch(f"/api/v1/nodes/{w2}", {"spec": {"taints": [
        {"key": WAITING, "value": "a-run-long-gone", "effect": "PreferNoSchedule"}]}}, "merge")
    recovered = run("recover.yml", inventory, cluster.kubeconfig, extra_vars={"nmo_nodes": [w2]})
    assert recovered.proc.returncode == 0, recovered.output[-3000:]
    assert waiting_on(world) == {}


def test_an_unknown_order_and_a_non_boolean_prefer_are_refused_before_any_write(cluster, world, tmp_path):
    world.add_nodes(workers=2)
    inventory = write_inventory(world, tmp_path)
    r = run("maintenance.yml", inventory, cluster.kubeconfig, args=["-l", "workers"],
            extra_vars={"node_maintenance_order": "random", "node_maintenance_prefer_no_schedule": "maybe"})
    assert r.proc.returncode != 0
    assert "node_maintenance_order: 'random' is not an order; give one of inventory, zone, oldest, interleave, auto" \
        in r.output
    assert "node_maintenance_prefer_no_schedule: 'maybe' is not a boolean: give true or false" in r.output
    assert r.task(START) == [], "the run never started: no run lease written"
    assert waiting_on(world) == {} and not any(in_maintenance(world.node(n)) for n in world.nodes)
