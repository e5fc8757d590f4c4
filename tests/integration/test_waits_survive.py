"""Issue 25's new waits across faults: an order batch held by its budget and the settle, each
across a restart of kube-apiserver (module calls); then a run SIGKILLed while an order batch
is held, and its rerun SIGKILLed during the volume wait: each next run resumes the node at the
step it stood at (the later batch still not evicted, the volume waited for again, the work
only after the detach). On the local control plane, as the least-privilege user."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import run_module
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect
from ansible_collections.nmo.maintenance.plugins.modules import nmo_settle

from .maintenance_support import (
    AuditLog,
    Background,
    Run,
    events_of,
    maintenance_of,
    nm_name,
    nm_status,
    run_of,
    start_maintenance,
    wait_run_gone,
    write_inventory,
)
from .test_volumes_settle import attach, clean_volumes, detach, params

pytestmark = [pytest.mark.cluster, pytest.mark.side_lane]  # CI: beside the main suite (hack/test)

LAST = [{"name": "storage-last", "selector": "app=osd", "order": 10}]


def pod_names(world: Any, node: str, prefix: str) -> List[str]:
    return sorted(p["metadata"]["name"] for p in world.pods(node=node) if p["metadata"]["name"].startswith(prefix))


def evicted_by(audit: AuditLog, user: str, prefix: str) -> List[str]:
    """The pods whose name starts with ``prefix`` that ``user`` evicted for real (201)."""
    return sorted((e.get("objectRef") or {}).get("name") for e in audit.requests_of(user, 201)
                  if (e.get("objectRef") or {}).get("subresource") == "eviction"
                  and (e.get("objectRef") or {}).get("name", "").startswith(prefix)
                  and "dryRun" not in e.get("requestURI", ""))


def stamp(entry: Any) -> float:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"].replace("Z", "+00:00")).timestamp()


def refusals_since(audit: AuditLog, user: str, since: float) -> int:
    """The evictions ``user`` asked for since then that a budget refused (429)."""
    return sum(1 for e in audit.requests_of(user, 429)
               if (e.get("objectRef") or {}).get("subresource") == "eviction" and stamp(e) >= since)


def eviction_times(audit: AuditLog, user: str) -> Dict[str, float]:
    return {(e.get("objectRef") or {}).get("name"): stamp(e) for e in audit.requests_of(user, 201)
            if (e.get("objectRef") or {}).get("subresource") == "eviction" and "dryRun" not in e.get("requestURI", "")}


def volume_waits(cluster: Any, node: str) -> int:
    """How many times a volume wait of ``node``'s NodeMaintenance began (its Drain events, counted)."""
    return sum(e.get("count") or 1 for e in events_of(cluster.client, nm_name(node), "Drain")
               if e["message"].startswith("waiting for volumes to detach"))


def test_a_held_batch_and_the_settle_wait_across_an_api_server_restart(cluster, world, user):
    a, b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("hold", 1, grace=1, graceful=True)
        world.deployment("osd", 1, grace=1, graceful=True)
    world.pdb("hold", "hold", min_available=1)  # batch 0 cannot leave until the test relaxes it
    world.cordon(b)  # what the drain evicts stays pending: the settle has something to wait for
    osd = pod_names(world, a, "osd-")
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    audit = AuditLog(cluster)

    args = {"node": a, "maintenance": name, "settle": True, "volume_detach_timeout": 0,
            "drain": {"rules": LAST, "timeout": 120}}
    draining = Background(lambda: run_module("nmo_drain", args, user.kubeconfig))
    wait_for(lambda: "disruption budget" in (nm_status(cluster, name).get("lastError") or ""), 40,
             "batch 0 refused by its budget")
    assert (nm_status(cluster, name).get("drainBatch") or "").startswith("batch 1 of 2 (order 0)")
    cluster.restart("kube-apiserver")  # under the held batch: its watches must reopen
    cluster.restart_controllers()  # the budget's controller, at once rather than after its backoff
    assert draining.returned_at is None, "the drain ended while batch 0 was held"
    assert pod_names(world, a, "osd-") == osd and evicted_by(audit.settled(), user.name, "osd-") == [], \
        "batch 1 was evicted while batch 0 was still on the node"
    cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/hold",
                         {"spec": {"minAvailable": 0}}, "merge")
    draining.thread.join(90)
    result = draining.result
    assert result is not None and not result.get("failed"), (result or {}).get("msg")
    assert result["batches"] == [{"order": 0, "pods": 1}, {"order": 10, "pods": 1}]
    assert evicted_by(audit.settled(), user.name, "osd-") == osd

    # the settle: what the drain evicted is pending until the test lets it back on a node
    client = connect(ConnectionOptions(kubeconfig=user.kubeconfig), pool_size=8)
    settling = Background(lambda: nmo_settle.core(client, params(nmo_settle.ARGUMENT_SPEC, node=a, timeout=120)))
    wait_for(lambda: any(e["message"].startswith("Waiting for") for e in events_of(cluster.client, a, "Settle")),
             30, "the settle waiting")
    cluster.restart("kube-apiserver")  # under the settle: its watches must reopen
    cluster.restart_controllers()  # the scheduler and kwok place and start what comes back
    assert settling.returned_at is None, "the settle ended while the workloads were pending"
    uncordoned_at = time.monotonic()
    world.cordon(b, on=False)
    settling.thread.join(90)
    assert settling.error is None, settling.error
    done = settling.result
    assert done["settled"] and done["changed"] and settling.returned_at >= uncordoned_at
    assert {w["name"] for w in done["snapshot"]["workloads"]} == {"hold", "osd"}, done["snapshot"]


def test_runs_killed_in_a_held_batch_then_in_the_volume_wait_resume_at_that_step(cluster, world, user, tmp_path):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("hold", 1, grace=1, graceful=True)
        world.deployment("osd", 1, grace=1, graceful=True)
    world.pdb("hold", "hold", min_available=1)
    osd = pod_names(world, a, "osd-")
    marker = tmp_path / "work-started"
    work = tmp_path / "work.yml"
    work.write_text(json.dumps([{"name": "work started", "ansible.builtin.copy": {
        "dest": str(marker), "content": "{{ now().timestamp() }}"}}]))
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="off", node_maintenance_hooks_work=[str(work)],
                                node_maintenance_drain={"rules": LAST, "timeout": 300},
                                node_maintenance_volume_detach_timeout=300, node_maintenance_progress_interval=1)
    audit = AuditLog(cluster)
    try:
        attach(cluster, world, a, f"va-data-{world.id}", f"pv-data-{world.id}", "h-data")
        # 1: killed while batch 0 is held by its budget
        started = time.time()
        first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
        try:
            wait_for(lambda: refusals_since(audit, user.name, started) >= 2 or first.proc.poll() is not None, 90,
                     "batch 0 held in the first run")
            assert first.proc.poll() is None, first.output[-4000:]
            killed = run_of(cluster.client, a)
        finally:
            first.kill()
            first.close()
        wait_run_gone(cluster.client, killed)
        assert maintenance_of(cluster.client, a) is not None
        assert pod_names(world, a, "osd-") == osd, "batch 1 left during the kill"

        # 2: resumes the drain at batch 0 (batch 1 still not evicted), then is killed in the volume wait
        started = time.time()
        second = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
        try:
            wait_for(lambda: refusals_since(audit, user.name, started) >= 2 or second.proc.poll() is not None, 90,
                     "batch 0 held again in the resumed drain")
            assert second.proc.poll() is None, second.output[-4000:]
            assert evicted_by(audit.settled(), user.name, "osd-") == [], "batch 1 evicted before batch 0 was gone"
            cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/hold",
                                 {"spec": {"minAvailable": 0}}, "merge")
            wait_for(lambda: "waiting for volumes to detach" in (nm_status(cluster, nm_name(a)).get("lastError") or "")
                     or second.proc.poll() is not None, 120, "the volume wait in the second run")
            assert second.proc.poll() is None, second.output[-4000:]
            assert evicted_by(audit.settled(), user.name, "osd-") == osd
            assert not marker.exists(), "the work began while the volume was attached"
            killed = run_of(cluster.client, a)
        finally:
            second.kill()
            second.close()
        wait_run_gone(cluster.client, killed)

        # 3: the drain finds nothing left, the volume is waited for again, the work only after the detach
        waits = volume_waits(cluster, a)
        third = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", a])
        try:
            wait_for(lambda: volume_waits(cluster, a) > waits or third.proc.poll() is not None, 120,
                     "the third run waiting for the volume again")
            assert third.proc.poll() is None, third.output[-4000:]
            assert not marker.exists(), "the work began while the volume was attached"
            detached_at = time.time()
            detach(cluster, world, a, f"va-data-{world.id}", "h-data")
            assert third.wait(180) == 0, third.output[-4000:]
        finally:
            if third.proc.poll() is None:
                third.kill()
            third.close()
        assert float(Path(marker).read_text()) >= detached_at - 0.5, "the work began before the detach"
        assert maintenance_of(cluster.client, a) is None
        assert not world.node(a)["spec"].get("unschedulable")
        assert evicted_by(audit.settled(), user.name, "osd-") == osd, "batch 1 evicted once, by the second run"
        times = eviction_times(audit.settled(), user.name)
        hold = [n for n in times if n.startswith("hold-")]
        assert len(hold) == 1 and times[hold[0]] <= times[osd[0]], times
    finally:
        clean_volumes(cluster, world)
