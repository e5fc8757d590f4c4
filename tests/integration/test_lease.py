"""nmo_lease on the local control plane: node leases, slots across processes, the etcd guard."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import run_module
from topology import WORLD_LABEL, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, times
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

from .maintenance_support import events_of, run_tasks

BLOCKED_PREFIX = ("Waiting to acquire lease for node maintenance. "
                  "Other maintenance or node health check is in progress.")
NS = leases.LEASE_NAMESPACE

pytestmark = pytest.mark.usefixtures("crd_installed")


def prefix(world: Any) -> str:
    """Slots of this test only: every other test on the cluster takes slots too."""
    return f"t{world.id}-slot"


def args(world: Any, node: str, **extra: Any) -> Dict[str, Any]:
    return {"node": node, "slot_prefix": prefix(world),
            "etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}", **extra}


def lease_of(client: Any, name: str) -> Optional[Dict[str, Any]]:
    return client.get_or_none(lease_store.leases_path(NS, name))


def slots(client: Any, world: Any) -> Dict[str, str]:
    """slot name -> holder, of this test's slots."""
    return {s["metadata"]["name"]: leases.holder(s) for s in leases.slots_of(lease_store.list_leases(client), prefix(world))}


def foreign_lease(client: Any, node: str, holder: str, age: float = 0, duration: int = 3600,
                  transitions: int = 0) -> Dict[str, Any]:
    """A node lease as Node Health Check writes it, renewed ``age`` seconds ago."""
    lease_store.ensure_namespace(client)
    obj = client.get(f"/api/v1/nodes/{node}")
    when = times.utcnow() - timedelta(seconds=age)
    body = leases.new_lease(leases.node_lease_name(node), NS, holder, duration, when, leases.owner_reference(obj))
    body["spec"]["leaseTransitions"] = transitions
    return client.post(lease_store.leases_path(NS), body)


def holding_tasks(node_args: Dict[str, Any], release_file: Path, timeout: int = 120) -> List[Dict[str, Any]]:
    """Acquire (waiting), hold until the test says so, release."""
    return [
        {"name": "acquire", "nmo.maintenance.nmo_lease": {**node_args, "wait": True, "timeout": timeout}},
        {"name": "hold", "ansible.builtin.wait_for": {"path": str(release_file), "timeout": timeout}},
        {"name": "release", "nmo.maintenance.nmo_lease": {
            **{k: v for k, v in node_args.items() if k in ("node", "slot_prefix")}, "state": "released"}},
    ]


# -- a worker: the wire, check mode, release ---------------------------------------------------
def test_acquire_writes_medik8s_lease_and_slot_then_release_removes_them(cluster, world):
    node = world.add_nodes(workers=1)[0]
    nm, _changed = maintenance.ensure(cluster.client, node)
    c = cluster.client

    dry = run_module("nmo_lease", args(world, node), cluster.kubeconfig, check=True, diff=True)
    assert not dry.get("failed"), dry
    assert dry["changed"] and [a["action"] for a in dry["acquired"]] == ["created", "created"]
    assert dry["diff"]["before"]["leases"][f"node-{node}"] is None
    assert lease_of(c, f"node-{node}") is None and slots(c, world) == {}

    res = run_module("nmo_lease", args(world, node), cluster.kubeconfig, diff=True)
    assert not res.get("failed"), res
    assert res["changed"] and res["slot"] == f"{prefix(world)}-0" and res["etcd"] is None
    lease = lease_of(c, f"node-{node}")
    spec = lease["spec"]
    assert spec["holderIdentity"] == "nmo.maintenance" and spec["leaseDurationSeconds"] == 3600
    assert spec["leaseTransitions"] == 0 and spec["acquireTime"] == spec["renewTime"]
    assert len(spec["renewTime"]) == len("2026-11-29T11:00:00.000000Z")
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": node, "uid": world.node(node)["metadata"]["uid"]}]
    assert res["expires"] == leases.format_time(leases.expiry(lease))
    assert slots(c, world) == {f"{prefix(world)}-0": node}
    assert res["diff"]["after"]["leases"][f"node-{node}"]["holderIdentity"] == "nmo.maintenance"
    assert events_of(c, nm["metadata"]["name"], "LeaseAcquired")

    again = run_module("nmo_lease", args(world, node), cluster.kubeconfig)
    # renewed; or held, when the API server's time (whole-second Date headers) has not moved
    # past the renewTime just written
    assert {a["action"] for a in again["acquired"]} <= {"renewed", "held"}, again["acquired"]
    assert not again.get("failed")
    assert lease_of(c, f"node-{node}")["spec"]["acquireTime"] == spec["acquireTime"]

    gone = run_module("nmo_lease", args(world, node, state="released"), cluster.kubeconfig)
    assert gone["changed"] and {r["role"] for r in gone["released"]} == {"node", "slot"}
    assert lease_of(c, f"node-{node}") is None and slots(c, world) == {}
    assert events_of(c, nm["metadata"]["name"], "LeaseReleased")
    assert run_module("nmo_lease", args(world, node, state="released"), cluster.kubeconfig)["changed"] is False


def test_a_missing_leases_namespace_is_made_when_the_first_lease_needs_it(cluster, world):
    """The namespace is not looked for before each acquire: the lease is created, and only
    its refusal for want of a namespace makes the namespace (then the lease)."""
    from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import disruption

    node = world.add_nodes(workers=1)[0]
    c = cluster.client
    namespace = f"t{world.id}-leases"
    assert c.get_or_none(f"/api/v1/namespaces/{namespace}") is None
    req = disruption.Request(node=node, slot_prefix=prefix(world), namespace=namespace,
                             etcd=leases_etcd_options(world))
    try:
        got = disruption.acquire(c, req)
        assert got["namespace_created"] and got["changed"]
        assert c.get_or_none(f"/api/v1/namespaces/{namespace}") is not None
        held = {lease["metadata"]["name"]: leases.holder(lease) for lease in lease_store.list_leases(c, namespace)}
        assert held == {f"node-{node}": leases.HOLDER, f"{prefix(world)}-0": node}
        again = disruption.acquire(c, req)
        assert not again["namespace_created"]
        gone = disruption.release(c, req)
        assert {r["role"] for r in gone["released"]} == {"node", "slot"}
        assert lease_store.list_leases(c, namespace) == []
    finally:
        c.delete(f"/api/v1/namespaces/{namespace}")


def leases_etcd_options(world: Any) -> Any:
    from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import etcd_guard

    return etcd_guard.Options(member_selector=f"component=etcd,{WORLD_LABEL}={world.id}")


# -- two processes at once -------------------------------------------------------------------
def one_round(cluster: Any, world: Any, tmp: Path, nodes: List[str], nms: Dict[str, str], round_no: int) -> None:
    c = cluster.client
    procs = {n: run_tasks(tmp, f"{n}-{round_no}", holding_tasks(args(world, n), tmp / f"release-{n}-{round_no}"),
                          cluster.kubeconfig) for n in nodes}
    try:
        first = wait_for(lambda: next((n for n in nodes if procs[n].last("acquire")), None), 90,
                         "one process to acquire")
        second = next(n for n in nodes if n != first)
        # the other one is waiting, and says so on its NodeMaintenance
        wait_for(lambda: (maintenance.get(c, nms[second]).get("status") or {}).get("lastError", "")
                 .startswith(BLOCKED_PREFIX), 60, f"{second} to report that it waits")
        assert procs[second].last("acquire") is None and procs[second].proc.poll() is None
        assert slots(c, world) == {f"{prefix(world)}-0": first}
        assert lease_of(c, f"node-{first}") is not None and lease_of(c, f"node-{second}") is None
        assert maintenance.get(c, nms[second])["status"]["phase"] == "Pending"

        (tmp / f"release-{first}-{round_no}").touch()
        assert procs[first].wait(120) == 0
        wait_for(lambda: procs[second].last("acquire"), 60, f"{second} to acquire after {first} released")
        assert slots(c, world) == {f"{prefix(world)}-0": second}
        assert lease_of(c, f"node-{first}") is None
        got = procs[second].last("acquire")
        assert got["status"] == "ok" and got["result"]["waited"] > 0
        assert any(h["holder"] == first and h["kind"] == "slot" for h in got["result"]["holders"])
        (tmp / f"release-{second}-{round_no}").touch()
        assert procs[second].wait(120) == 0
        assert slots(c, world) == {}
    finally:
        for p in procs.values():
            if p.proc.poll() is None:
                p.kill()


@pytest.mark.slow
def test_two_runs_with_concurrency_one_never_overlap(cluster, world, tmp_path):
    nodes = world.add_nodes(workers=2)
    nms = {n: maintenance.ensure(cluster.client, n)[0]["metadata"]["name"] for n in nodes}
    for round_no in range(10):
        one_round(cluster, world, tmp_path, nodes, nms, round_no)
    blocked = events_of(cluster.client, nms[nodes[0]], "BlockedByNodeHealthCheck") + \
        events_of(cluster.client, nms[nodes[1]], "BlockedByNodeHealthCheck")
    assert blocked and all(e["message"].startswith(BLOCKED_PREFIX) for e in blocked)


def test_two_runs_with_concurrency_two_both_proceed(cluster, world, tmp_path):
    nodes = world.add_nodes(workers=2)
    procs = {n: run_tasks(tmp_path, n, holding_tasks(args(world, n, concurrency=2), tmp_path / f"release-{n}"),
                          cluster.kubeconfig) for n in nodes}
    try:
        wait_for(lambda: all(p.last("acquire") for p in procs.values()), 90, "both to acquire")
        assert sorted(slots(cluster.client, world).values()) == sorted(nodes)
        assert all(lease_of(cluster.client, f"node-{n}") for n in nodes)
        for n in nodes:
            (tmp_path / f"release-{n}").touch()
        assert all(p.wait(120) == 0 for p in procs.values())
        assert slots(cluster.client, world) == {}
    finally:
        for p in procs.values():
            if p.proc.poll() is None:
                p.kill()


# -- a lease held by Node Health Check ---------------------------------------------------------
def test_valid_foreign_lease_blocks_naming_the_holder(cluster, world):
    node = world.add_nodes(workers=1)[0]
    nm, _changed = maintenance.ensure(cluster.client, node)
    foreign_lease(cluster.client, node, "NodeHealthCheck-x")

    res = run_module("nmo_lease", args(world, node), cluster.kubeconfig)
    assert res.get("failed")
    assert res["msg"].startswith(BLOCKED_PREFIX) and "NodeHealthCheck-x" in res["msg"]
    assert res["holders"][0]["holder"] == "NodeHealthCheck-x"
    assert slots(cluster.client, world) == {}  # nothing taken while blocked
    assert leases.holder(lease_of(cluster.client, f"node-{node}")) == "NodeHealthCheck-x"
    status = maintenance.get(cluster.client, nm["metadata"]["name"])["status"]
    assert status["phase"] == "Pending" and "NodeHealthCheck-x" in status["lastError"]
    assert not status.get("errorOnLeaseCount"), "a wait is not NMO's lost-lease count (NMO fails above 3)"
    events = events_of(cluster.client, nm["metadata"]["name"], "BlockedByNodeHealthCheck")
    assert events and events[0]["message"].startswith(BLOCKED_PREFIX) and "NodeHealthCheck-x" in events[0]["message"]

    dry = run_module("nmo_lease", args(world, node, wait=True), cluster.kubeconfig, check=True)
    assert not dry["failed"] and dry["would_wait"] and "NodeHealthCheck-x" in dry["blocked"]

    timed = run_module("nmo_lease", args(world, node, wait=True, timeout=2), cluster.kubeconfig)
    assert timed.get("failed") and "timed out after 2 s" in timed["msg"] and "NodeHealthCheck-x" in timed["msg"]


def test_expired_foreign_lease_is_taken_over(cluster, world):
    node = world.add_nodes(workers=1)[0]
    foreign_lease(cluster.client, node, "NodeHealthCheck-x", age=7200, transitions=1)
    res = run_module("nmo_lease", args(world, node), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert [a["action"] for a in res["acquired"]] == ["created", "taken_over"]
    spec = lease_of(cluster.client, f"node-{node}")["spec"]
    assert spec["holderIdentity"] == "nmo.maintenance" and spec["leaseTransitions"] == 2
    assert spec["leaseDurationSeconds"] == 3600 and spec["acquireTime"] == spec["renewTime"]


def test_waiting_run_takes_over_when_the_foreign_lease_lapses(cluster, world, tmp_path):
    node = world.add_nodes(workers=1)[0]
    nm, _changed = maintenance.ensure(cluster.client, node)
    name = nm["metadata"]["name"]
    foreign_lease(cluster.client, node, "NodeHealthCheck-x", duration=600)
    run = run_tasks(tmp_path, "waiting", [{"name": "acquire", "nmo.maintenance.nmo_lease": {
        **args(world, node), "wait": True, "timeout": 60}}], cluster.kubeconfig)
    try:
        wait_for(lambda: events_of(cluster.client, name, "BlockedByNodeHealthCheck"), 60, "the blocked event")
        # NHC stops renewing: its lease now lapses 2 s from now, which no watch event announces
        held = lease_of(cluster.client, f"node-{node}")
        held["spec"]["renewTime"] = leases.format_time(times.utcnow() - timedelta(seconds=598))
        cluster.client.put(lease_store.leases_path(NS, f"node-{node}"), held)
        assert run.wait(120) == 0
    finally:
        if run.proc.poll() is None:
            run.kill()
    res = run.last("acquire")["result"]
    assert res["waited"] > 0 and res["holders"][0]["holder"] == "NodeHealthCheck-x"
    assert [a["action"] for a in res["acquired"]] == ["created", "taken_over"]
    assert lease_of(cluster.client, f"node-{node}")["spec"]["leaseTransitions"] == 1
    blocked = events_of(cluster.client, name, "BlockedByNodeHealthCheck")
    assert len(blocked) == 1 and blocked[0]["count"] == 1  # once per situation, not per tick
    assert events_of(cluster.client, name, "LeaseAcquired")
    status = maintenance.get(cluster.client, name)["status"]
    assert not status.get("errorOnLeaseCount") and status["lastError"] == ""


# -- crash and rerun ---------------------------------------------------------------------------
def test_rerun_after_a_crash_resumes_with_its_own_slot_and_lease(cluster, world, tmp_path):
    node, other = world.add_nodes(workers=2)
    run = run_tasks(tmp_path, "crashing", holding_tasks(args(world, node), tmp_path / "never"), cluster.kubeconfig)
    try:
        wait_for(lambda: run.last("acquire"), 90, "the first run to acquire")
    finally:
        run.kill()  # killed in the middle of its maintenance
    before = lease_of(cluster.client, f"node-{node}")["spec"]
    assert slots(cluster.client, world) == {f"{prefix(world)}-0": node}

    blocked = run_module("nmo_lease", args(world, other), cluster.kubeconfig)
    assert blocked.get("failed") and node in blocked["msg"] and f"{prefix(world)}-0" in blocked["msg"]

    res = run_module("nmo_lease", args(world, node), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert res["slot"] == f"{prefix(world)}-0" and [a["action"] for a in res["acquired"]] == ["renewed", "renewed"]
    after = lease_of(cluster.client, f"node-{node}")["spec"]
    assert after["acquireTime"] == before["acquireTime"] and after["leaseTransitions"] == 0
    assert after["renewTime"] > before["renewTime"]
    assert slots(cluster.client, world) == {f"{prefix(world)}-0": node}


# -- release only what is ours -----------------------------------------------------------------
def test_release_never_deletes_a_lease_held_by_someone_else(cluster, world):
    node, other = world.add_nodes(workers=2)
    foreign_lease(cluster.client, node, "NodeHealthCheck-x")
    assert not run_module("nmo_lease", args(world, other), cluster.kubeconfig).get("failed")

    res = run_module("nmo_lease", args(world, node, state="released"), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert res["changed"] is False and res["released"] == []
    assert res["not_released"][0]["holder"] == "NodeHealthCheck-x"
    assert any("NodeHealthCheck-x" in w for w in res.get("warnings", []))
    assert leases.holder(lease_of(cluster.client, f"node-{node}")) == "NodeHealthCheck-x"
    assert slots(cluster.client, world) == {f"{prefix(world)}-0": other}  # another node's slot stays


# -- etcd quorum guard, kubeadm ----------------------------------------------------------------
def test_etcd_member_down_blocks_a_second_until_it_is_ready_again(cluster, world, tmp_path):
    cp = world.add_nodes(control_planes=3)
    world.etcd_members(ready={cp[0]: False})
    nm, _changed = maintenance.ensure(cluster.client, cp[1])
    name = nm["metadata"]["name"]
    message = f"etcd quorum would not be kept while node {cp[1]} is in maintenance"

    run = run_tasks(tmp_path, "cp1", [{"name": "acquire", "nmo.maintenance.nmo_lease": {
        **args(world, cp[1]), "wait": True, "timeout": 90}}], cluster.kubeconfig)
    try:
        event = wait_for(lambda: [e for e in events_of(cluster.client, name, "EtcdQuorumNotMaintained")
                                  if e["message"] == message], 60, "the etcd event")
        assert event[0]["type"] == "Warning"
        status = maintenance.get(cluster.client, name)["status"]
        assert status["phase"] == "Pending" and status["lastError"].startswith(message)
        assert run.proc.poll() is None and lease_of(cluster.client, f"node-{cp[1]}") is None
        assert slots(cluster.client, world) == {}

        world.set_pod_ready("kube-system", f"etcd-{cp[0]}", True)
        assert run.wait(120) == 0
    finally:
        if run.proc.poll() is None:
            run.kill()
    got = run.last("acquire")["result"]
    assert got["etcd"]["allowed"] and got["etcd"]["flavour"] == "kubeadm" and got["waited"] > 0
    assert lease_of(cluster.client, f"node-{cp[1]}") is not None

    # cp[1] now holds its lease: a third one would leave 1 of 3 healthy; no wait: fails at once
    res = run_module("nmo_lease", args(world, cp[2], concurrency=3), cluster.kubeconfig)
    assert res.get("failed")
    assert res["msg"].startswith(f"etcd quorum would not be kept while node {cp[2]} is in maintenance")
    assert cp[1] in res["msg"] and res["etcd"]["quorum"] == 2
    assert lease_of(cluster.client, f"node-{cp[2]}") is None


def test_single_control_plane_is_refused(cluster, world):
    cp = world.add_nodes(control_planes=1)[0]
    world.etcd_members()
    nm, _changed = maintenance.ensure(cluster.client, cp)
    res = run_module("nmo_lease", args(world, cp, wait=True, timeout=60), cluster.kubeconfig)
    assert res.get("failed") and "can never be maintained under this guard" in res["msg"]  # refused, not waited for
    assert res["msg"].startswith(f"etcd quorum would not be kept while node {cp} is in maintenance")
    assert res["etcd"]["members"] == 1 and res["etcd"]["quorum"] == 1
    assert events_of(cluster.client, nm["metadata"]["name"], "EtcdQuorumNotMaintained")
    assert lease_of(cluster.client, f"node-{cp}") is None and slots(cluster.client, world) == {}


def test_control_plane_without_etcd_is_allowed_with_a_warning(cluster, world):
    cp = world.add_nodes(control_planes=1)[0]
    res = run_module("nmo_lease", args(world, cp, etcd_guard_namespace=f"absent-{world.id}"), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert res["etcd"]["flavour"] == "none" and res["etcd"]["allowed"]
    assert any("external etcd" in w for w in res.get("warnings", []))


# -- etcd quorum guard, OpenShift --------------------------------------------------------------
def disruptions_allowed(cluster: Any, world: Any) -> int:
    pdb = cluster.client.get(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/etcd-guard-pdb")
    return pdb.get("status", {}).get("disruptionsAllowed")


def test_openshift_guard_pdb(cluster, world):
    cp = world.add_nodes(control_planes=3)
    world.etcd_guard_pods()
    guard = {"etcd_guard_namespace": world.namespace}  # auto: the namespace exists, so OpenShift
    wait_for(lambda: disruptions_allowed(cluster, world) == 1, 60, "disruptionsAllowed 1")

    res = run_module("nmo_lease", args(world, cp[0], **guard), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert res["etcd"]["flavour"] == "openshift" and res["etcd"]["allowed"]
    assert run_module("nmo_lease", args(world, cp[0], state="released"), cluster.kubeconfig)["changed"]

    world.set_pod_ready(world.namespace, f"etcd-guard-{cp[0]}", False)
    wait_for(lambda: disruptions_allowed(cluster, world) == 0, 60, "disruptionsAllowed 0")
    nm, _changed = maintenance.ensure(cluster.client, cp[1])
    res = run_module("nmo_lease", args(world, cp[1], **guard), cluster.kubeconfig)
    assert res.get("failed")
    assert res["msg"].startswith(f"etcd quorum would not be kept while node {cp[1]} is in maintenance")
    assert "etcd-guard-pdb allows 0" in res["msg"]
    assert [e["message"] for e in events_of(cluster.client, nm["metadata"]["name"], "EtcdQuorumNotMaintained")] == [
        f"etcd quorum would not be kept while node {cp[1]} is in maintenance"]

    # the node whose guard pod is already down is already disrupted: it may go
    res = run_module("nmo_lease", args(world, cp[0], **guard), cluster.kubeconfig)
    assert not res.get("failed"), res
    assert "already not Ready" in res["etcd"]["reason"]
