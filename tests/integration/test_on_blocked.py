"""Nodes that cannot be drained (docs/design.md §18.4, issue 32): skip, quarantine, and the bound.

A node is blocked by a Deployment of one replica on it behind a PodDisruptionBudget of
minAvailable 1, which never allows the eviction; the drain's timeout is short. The maintenance
playbook runs as the least-privilege user. The pre-flight (enforce) leaves a node whose only
blocker is its drain to the policy, within the bound. What each run did is asserted from the
cluster and the API server's audit log.
"""

from __future__ import annotations

import pytest
from helpers import run_playbook

from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import QUARANTINED

from .blocked_support import DRAIN_TIMEOUT, block, errors, maintain, nm_entries, quarantine_of, report_nodes
from .maintenance_support import (
    DRAIN_TAINT,
    LABEL,
    PLAYBOOKS,
    AuditLog,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .rollout_support import at, finished

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_skip_goes_on_and_the_bound_stops_the_rollout(cluster, world, user, tmp_path):
    """Concurrency 1, skip, at most one blocked node: the first blocked node, which an administrator
    had cordoned, is left as it was found (cordoned, nothing of ours on it) and the next node
    finishes; the second blocked node is one more than the bound: it fails (rolled back, policy
    auto) and no NodeMaintenance is created after it."""
    blocked1, free1, blocked2, free2 = world.add_nodes(workers=4)
    block(world, blocked1, "db1")
    block(world, blocked2, "db2")
    world.cordon(blocked1)  # an administrator's, before the run: the skip leaves it
    inventory = write_inventory(world, tmp_path)
    run_id = f"b{world.id}"
    audit = AuditLog(cluster)
    # two blocked nodes, bound 1: the pre-flight (enforce) would stop the run before it began; at warn
    # the rollout meets them one after the other
    proc = maintain(inventory, user, tmp_path, run_id, 1, "skip", 1, "warn")
    code = finished(proc, 600)
    output = proc.output
    assert code != 0, output[-4000:]
    wait_run_gone(cluster.client, run_id)

    # skipped: back in service as it was found, its maintenance ended, nothing of ours left
    assert f"node {blocked1} could not be drained (drain timed out after {DRAIN_TIMEOUT} s" in output, output[-4000:]
    assert (f"Skipped: its maintenance is ended and node {blocked1} was cordoned before the maintenance began"
            in output), errors(output)
    assert ("returned to service as it was found, the rollout goes on (1 of at most 1 blocked nodes, "
            "node_maintenance_on_blocked skip)") in output, errors(output)
    assert maintenance_of(cluster.client, blocked1) is None and quarantine_of(cluster, blocked1) == {}
    found = cluster.client.get(f"/api/v1/nodes/{blocked1}")
    assert found["spec"].get("unschedulable") is True, found["spec"]  # the administrator's cordon stays
    assert [t["key"] for t in found["spec"].get("taints") or [] if t["key"] == DRAIN_TAINT] == [], found["spec"]
    assert not [k for k in {**found["metadata"].get("labels", {}), **found["metadata"].get("annotations", {})}
                if k == LABEL or k.startswith("nmo.maintenance/")], found["metadata"]
    # the rollout went on past it
    assert maintenance_of(cluster.client, free1) is None
    wait_clean(cluster.client, [free1, free2])
    # the second blocked node passed the bound: a drain failure, rolled back, the run stopped after it
    nm = maintenance_of(cluster.client, blocked2) or {}
    assert (nm.get("status") or {}).get("phase") == "Failed", nm
    assert nm["status"]["lastError"].startswith(
        "its drain is blocked, the 2nd blocked node of this run: more than node_maintenance_max_blocked (1) stops "
        "the rollout. "), nm["status"]
    assert maintenance_of(cluster.client, free2) is None  # never begun
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []

    mine = nm_entries(audit.settled().entries(), user)
    failed_at = max(at(e) for e in mine if (e["objectRef"].get("name") == nm_name(blocked2)
                                            and e["objectRef"].get("subresource") == "status"))
    creates = [(e["objectRef"].get("name"), at(e)) for e in mine if e["verb"] == "create"]
    assert [name for name, when in creates if when > failed_at] == [], (failed_at, creates)
    created = [name for name, _when in creates]
    assert nm_name(free1) in created and nm_name(free2) not in created, creates

    nodes = report_nodes(tmp_path, run_id)
    assert nodes[blocked1]["outcome"] == "skipped (blocked)", nodes[blocked1]
    assert nodes[blocked1]["result"].startswith("skipped (blocked: drain timed out"), nodes[blocked1]
    assert nodes[free1]["outcome"] == "succeeded" and nodes[blocked2]["outcome"] == "failed"


def test_quarantine_goes_on_shows_in_status_and_recover_lifts_it(cluster, world, user, tmp_path):
    """Concurrency 2, quarantine, the pre-flight at enforce (it leaves the drain's block to the
    policy, and says so): the blocked node is kept cordoned with the label and the annotation
    naming the blocker, its leases and NodeMaintenance released; the other two finish and the run
    ends with rc 0; status.yml shows the quarantine; recover.yml -e nmo_nodes= lifts it."""
    blocked, free1, free2 = world.add_nodes(workers=3)
    block(world, blocked, "db")
    inventory = write_inventory(world, tmp_path)
    run_id = f"q{world.id}"
    proc = maintain(inventory, user, tmp_path, run_id, 2, "quarantine", 1, "enforce")
    code = finished(proc, 600)
    output = proc.output
    assert code == 0, errors(output)
    assert f"left to node_maintenance_on_blocked quarantine (the drain would not finish): {blocked}" in output, \
        errors(output)
    wait_run_gone(cluster.client, run_id)

    marks = quarantine_of(cluster, blocked)
    assert marks.get(QUARANTINED) and "timed out" in marks[QUARANTINED] and "/db-" in marks[QUARANTINED], marks
    labels = cluster.client.get(f"/api/v1/nodes/{blocked}")["metadata"]["labels"]
    assert labels.get(QUARANTINED) == "true", labels
    assert node_clean(cluster.client, blocked) is not None  # kept cordoned
    assert maintenance_of(cluster.client, blocked) is None
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []
    assert all(maintenance_of(cluster.client, n) is None for n in (free1, free2))
    wait_clean(cluster.client, [free1, free2])
    nodes = report_nodes(tmp_path, run_id)
    assert nodes[blocked]["outcome"] == "quarantined" and "drain timed out" in nodes[blocked]["result"], nodes[blocked]

    status = run_playbook(None, cluster.kubeconfig, args=["-e", f"nmo_nodes={blocked}"],
                          playbook_path=str(PLAYBOOKS / "status.yml"))
    assert status.rc == 0, status.stdout[-3000:]
    assert "quarantined:  drain timed out" in status.stdout and f"nmo_nodes={blocked}" in status.stdout, \
        status.stdout[-3000:]

    lifted = run_playbook(None, cluster.kubeconfig, args=["-e", f"nmo_nodes={blocked}"],
                          playbook_path=str(PLAYBOOKS / "recover.yml"))
    assert lifted.rc == 0, lifted.stdout[-3000:]
    wait_clean(cluster.client, [blocked])
    assert quarantine_of(cluster, blocked) == {}
