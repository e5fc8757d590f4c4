"""The rollout scheduler across phases and concurrencies (docs/design.md §18, issue 32's "Done when").

test_rollout.py covers a failure in the work hook (and the kill points); here a failure in the
begin, the drain and the gate, each at another concurrency, so that every concurrency (1, 2, 4)
and a zone budget (on two of the three) are crossed once with a phase, in one playbook run and
one rerun a case:

* begin, concurrency 1, no budget: the first node has no kubelet (the begin refuses it before
  any write, pre-flight ``warn``); at concurrency 1 the nodes after it say ``not started``
  rather than never being reached.
* drain, concurrency 2, one node a zone: a PodDisruptionBudget never lets the first node's pod
  go (a short drain timeout); its zone's other node waits for the place and is released.
* gate, concurrency 4, one node a zone: the gate fails on the first node; the first node of the
  other zone, past its begin, finishes; the two waiting nodes are released.

Each case asserts from the API server's audit log that no NodeMaintenance is created and no Node
cordoned after the failure, that the waiting nodes were released within seconds (their
``Pending`` NodeMaintenance deleted), and that the rerun, after the cause is fixed, finishes every
node with nothing of ours left, at a lease timeout long enough that a wait outliving its reason
would fail it.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

import pytest
from topology import KWOK_ANNOTATION, WORLD_LABEL, wait_for

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


def at(entry: Dict[str, Any]) -> datetime:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00"))


def of(entry: Dict[str, Any], resource: str, name: str = "", subresource: str = "") -> bool:
    ref = entry.get("objectRef") or {}
    return (ref.get("resource") == resource and (not name or ref.get("name") == name)
            and (ref.get("subresource") or "") == subresource)


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


def down_node(cluster: Any, world: Any, zone: str) -> str:
    """A node that no kubelet (nor kwok) keeps Ready, first in the world's order."""
    name = f"node-{world.id}-worker-00"  # a worker of the inventory, first in its order
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": labels_of(world, name, zone)}})
    world.nodes.insert(0, name)
    return name


def labels_of(world: Any, name: str, zone: str) -> Dict[str, str]:
    return {WORLD_LABEL: world.id, "node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux", "type": "kwok", ZONE: zone}


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


def playbook(inventory: str, user: Any, tmp_path: Path, run_id: str, concurrency: int, budgets: List[Any],
             more: Dict[str, Any]) -> Run:
    return Run("maintenance.yml", inventory, user.kubeconfig, extra_vars={
        "node_maintenance_run_id": run_id, "node_maintenance_concurrency": concurrency,
        "node_maintenance_budgets": budgets, "node_maintenance_lease_timeout": LEASE_TIMEOUT,
        "node_maintenance_report_dir": str(tmp_path / run_id), **more})


def finished(proc: Run, timeout: float) -> int:
    try:
        return proc.wait(timeout)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()


CASES = [
    # phase, concurrency, budgets
    ("begin", 1, []),
    ("drain", 2, ZONE_BUDGET),
    ("gate", 4, ZONE_BUDGET),
]


@pytest.mark.parametrize("phase, concurrency, budgets", CASES, ids=[f"{p}-concurrency-{c}{'-zone-budget' if b else ''}"
                                                                    for p, c, b in CASES])
def test_a_failure_in_any_phase_stops_the_rollout_at_any_concurrency(cluster, world, user, tmp_path, phase,
                                                                     concurrency, budgets):
    by_zone = {zone: world.add_nodes(workers=2, labels={ZONE: f"{world.id}-{zone}"}) for zone in ("a", "b")}
    more: Dict[str, Any] = {"node_maintenance_preflight": "warn", "test_dir": str(tmp_path)}
    fix: Any = None
    if phase == "begin":  # concurrency 1: the node without its kubelet is first, the others follow it
        down = down_node(cluster, world, f"{world.id}-a")
        more["node_maintenance_drain_timeout"] = 60  # the kubelet's wait is not skipped: the begin refuses

        def fix() -> None:
            kubelet_back(cluster, world, down, f"{world.id}-a")
    elif phase == "drain":  # both nodes of zone a hold a pod their budget never lets go: whichever
        for node in by_zone["a"]:  # of the two takes the zone's place first fails
            with world.only_schedulable(node):
                world.deployment(f"db-{node[-2:]}", 1)
            world.pdb(f"db-{node[-2:]}", f"db-{node[-2:]}", min_available=1)
        more["node_maintenance_drain_timeout"] = 5
        pdbs = [f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/db-{n[-2:]}" for n in by_zone["a"]]

        def fix() -> None:
            for pdb in pdbs:
                cluster.client.delete(pdb)
    else:  # the gate fails on both nodes of zone a; zone b's stays in its gate until the run stopped
        gate = tmp_path / "gate.yml"
        gate.write_text(GATE)
        more.update({"node_maintenance_gate": str(gate), "node_maintenance_gate_timeout": 1,
                     "node_maintenance_gate_delay": 1, "test_fail_nodes": by_zone["a"]})

        def fix() -> None:
            more["test_fail_nodes"] = []
    inventory = write_inventory(world, tmp_path)
    run_id = f"m{world.id}"
    audit = AuditLog(cluster)
    proc = playbook(inventory, user, tmp_path, run_id, concurrency, budgets, more)
    try:
        if phase == "gate":
            lease = f"{LEASES}/nmo-run-{run_id}"
            wait_for(lambda: proc.proc.poll() is not None or "nmo.maintenance/stopped-after" in (
                ((cluster.client.get_or_none(lease) or {}).get("metadata") or {}).get("annotations") or {}),
                300, "the run to be stopped by the gate's failure")
            (tmp_path / "release").touch()
        code = proc.wait(600)
        output = proc.output
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    assert code != 0, output[-4000:]
    wait_run_gone(cluster.client, run_id)
    failed = [n for n in world.nodes if ((maintenance_of(cluster.client, n) or {}).get("status") or {}).get(
        "phase") == "Failed"]
    if phase == "begin":
        assert failed == [], failed  # refused before any write: no NodeMaintenance
        first = down
    else:
        assert len(failed) == 1 and failed[0] in by_zone["a"], (failed, output[-4000:])
        first = failed[0]

    # the failed node, named by every node that did not start; the others finished normally
    not_started = sorted(n for n in world.nodes if f"{n}: not started: the run stopped after " in output)
    for node in not_started:
        assert re.search(f"{node}: not started: the run stopped after {first} failed "
                         f"\\(in the {phase} phase\\)", output), output[-4000:]
    if phase in ("begin", "drain"):  # concurrency 1: every node after it; concurrency 2: the other
        # node of its zone (waiting for the place, or not begun yet) and the next batch
        assert set(not_started) == set(world.nodes) - {first}, output[-4000:]
    else:  # zone a's other node; zone b's other node, or both when the failure came before either began
        assert set(by_zone["a"]) - {first} <= set(not_started) and first not in not_started, output[-4000:]
        assert set(not_started) & set(by_zone["b"]), output[-4000:]
    for node in set(world.nodes) - set(not_started) - {first}:  # past its begin when the run stopped: finished
        assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None, node
    for node in not_started:  # as before the run: nothing of it left
        assert maintenance_of(cluster.client, node) is None and node_clean(cluster.client, node) is None, node

    mine = [e for e in audit.settled().entries() if (e.get("user") or {}).get("username") == user.name]
    # the failure's time: the failed node's status write (phase Failed); a begin refused before
    # any write has none, and at concurrency 1 it is the first node: nothing may follow it at all
    statuses = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(first), "status")]
    failed_at = max(statuses) if statuses else None
    later = [e for e in mine if failed_at is None or at(e) > failed_at]
    creates = [e for e in later if of(e, "nodemaintenances") and e["verb"] == "create"]
    cordoned = [e for e in later if of(e, "nodes") and e["verb"] == "patch" and cordons(e.get("requestObject"))]
    if failed_at is not None:  # the failed node's own cordon, before: the check above can see one
        assert [e for e in mine if of(e, "nodes", first) and e["verb"] == "patch" and at(e) <= failed_at
                and cordons(e.get("requestObject"))], "the failed node's cordon is not in the audit log"
    assert creates == [], f"a NodeMaintenance was created after the failure at {failed_at}: {creates}"
    assert cordoned == [], f"a node was cordoned after the failure at {failed_at}: {cordoned}"
    for node in not_started:
        assert [e for e in mine if of(e, "nodes", node) and e["verb"] == "patch"] == [], f"{node} was written"
        deleted = [at(e) for e in mine if of(e, "nodemaintenances", nm_name(node)) and e["verb"] == "delete"]
        made = [e for e in mine if of(e, "nodemaintenances", nm_name(node)) and e["verb"] == "create"]
        if made:  # it was waiting for a place: released within seconds of the failure
            assert failed_at is not None and deleted and (max(deleted) - failed_at).total_seconds() < 20, (
                node, failed_at, deleted)

    # the cause fixed, the rerun the failure message prescribes: every node finished, nothing left;
    # rc 0 proves no wait lasted until a lease lapsed (such a begin fails its node)
    fix()
    again = playbook(inventory, user, tmp_path, f"n{world.id}", concurrency, budgets, more)
    code = finished(again, 600)
    assert code == 0, again.output[-4000:]
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.nodes if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []
