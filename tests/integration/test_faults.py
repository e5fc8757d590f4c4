"""Transient API failures on the local control plane (issue 13, point 5): the API server
restarted under a drain and under the end of a maintenance, and API Priority and Fairness
throttling the collection's own user hard. The runs finish, and nothing blames a
PodDisruptionBudget for what the API server did."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List

import pytest
from helpers import run_module
from topology import WORLD_LABEL, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ApiError
from ansible_collections.nmo.maintenance.plugins.modules import nmo_maintenance

from .maintenance_support import (
    AuditLog,
    Background,
    Run,
    events_of,
    leases_naming,
    maintenance_of,
    nm_status,
    node_clean,
    slot_prefix,
    start_maintenance,
    throttled,
    wait_clean,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crd_installed")]

PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def restarts(cluster: Any) -> Iterator[Any]:
    """For a test that stops or restarts the API server: it is running again afterwards,
    whatever the test did, and the controllers are fresh for the next test."""
    try:
        yield cluster
    finally:
        cluster.start("kube-apiserver")
        cluster.restart_controllers()


class FailureCountingClient(Client):
    """The real client, counting the attempts that got no answer or a transient one."""

    def __init__(self, configuration: Any) -> None:
        super().__init__(configuration)
        self.failures: List[int] = []

    def _send(self, *args: Any, **kwargs: Any) -> Dict[str, Any]:
        try:
            return super()._send(*args, **kwargs)
        except ApiError as exc:
            self.failures.append(exc.status)
            raise


def drain_errors(cluster: Any, name: str) -> List[Dict[str, Any]]:
    return events_of(cluster.client, name, "DrainError")


# -- (a) the API server restarted in the middle of a drain ---------------------------------------------
def test_a_drain_outlives_an_api_server_restart(restarts, cluster, world):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 4)
    world.vm("db", node=a)  # refused by its PodDisruptionBudget: the drain is still running at the restart
    vm_pod = "virt-launcher-db"
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]

    running = Background(lambda: run_module("nmo_drain", {"node": a, "maintenance": name, "timeout": 180,
                                                          "retry_delay": 1}, cluster.kubeconfig))
    wait_for(lambda: nm_status(cluster, name).get("pendingPods") == [vm_pod] and drain_errors(cluster, name),
             90, "the web pods gone and the VM pod pending behind its PDB")

    restarted = time.monotonic()
    cluster.restart("kube-apiserver")  # returns when the new API server is ready
    outage = time.monotonic() - restarted
    assert running.thread.is_alive(), "the drain ended during the API server restart"
    cluster.restart_controllers()  # the disruption controller then updates the PDB's status at once
    cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                         "kubevirt-disruption-budget-db", {"spec": {"minAvailable": 0}}, "merge")

    result = running.join(150)
    assert not result.get("failed"), result.get("msg")
    assert vm_pod in [p["name"] for p in result["evicted"]] and result["pending"] == []
    assert world.pods(node=a) == []
    status = nm_status(cluster, name)
    assert (status["phase"], status["drainProgress"], status["pendingPods"], status["lastError"]) == (
        "Succeeded", 100, [], ""), status
    errors = drain_errors(cluster, name)
    assert errors and all(e["message"].startswith(PDB_REFUSAL) for e in errors), \
        f"a DrainError that is not the PDB's: {errors}"
    print(f"\nAPI server restart: {outage:.1f} s; drain {result['elapsed']} s, {result['api_requests']} requests")


def test_the_role_outlives_an_api_server_restart_mid_drain(restarts, cluster, world, user, tmp_path):
    """maintenance.yml, as the least-privilege user, on a worker whose VM waits behind its
    PDB; the API server restarts during that drain (run lease, heartbeat, progress lines
    and drain all lose it), then the PDB allows: the run finishes and leaves nothing."""
    (node,) = world.add_nodes(workers=1)
    world.vm("db", node=node)
    # the pre-flight would rightly call a PDB that can never allow the eviction a blocker
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn")
    played = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
    try:
        wait_for(lambda: f"{node}: drainProgress 0%, 1 pending pod(s): virt-launcher-db" in played.output, 240,
                 "a progress line of the drain waiting for the VM")
        cluster.restart("kube-apiserver")
        cluster.restart_controllers()
        assert played.proc.poll() is None, "the run ended during the API server restart:\n" + played.output[-3000:]
        cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                             "kubevirt-disruption-budget-db", {"spec": {"minAvailable": 0}}, "merge")
        wait_for(lambda: played.proc.poll() is not None, 240, "the run to finish")
    finally:
        if played.proc.poll() is None:
            played.kill()
        rc = played.wait()
        played.close()
    assert rc == 0, played.output[-4000:]
    wait_clean(cluster.client, [node])
    assert maintenance_of(cluster.client, node) is None
    assert leases_naming(cluster.client, [node], slot_prefix(world)) == []
    assert world.pods(node=node) == []


# -- (b) the API server down when the maintenance ends ---------------------------------------------------
def params(world: Any, node: str, state: str) -> Dict[str, Any]:
    """nmo_maintenance's parameters with its defaults, as Ansible would hand them over."""
    given = {k: spec.get("default") for k, spec in nmo_maintenance.ARGUMENT_SPEC.items()}
    given.update(node=node, state=state, slot_prefix=f"t{world.id}-slot",
                 etcd_pod_selector=f"component=etcd,{WORLD_LABEL}={world.id}")
    return given


def test_end_outlives_an_api_server_that_is_down_when_it_starts(restarts, cluster, world):
    (node,) = world.add_nodes(workers=1)
    begun = nmo_maintenance.core(cluster.client, params(world, node, "present"))
    assert node_clean(cluster.client, node) is not None and begun["reached"] == ["maintenance", "lease", "taints",
                                                                                 "cordon"]
    prefix = f"t{world.id}-slot"
    assert len(leases_naming(cluster.client, [node], prefix)) == 2

    client = FailureCountingClient(cluster.client.configuration)
    cluster.stop("kube-apiserver")
    try:
        ending = Background(lambda: nmo_maintenance.core(client, params(world, node, "absent")))
        # The End is under way and meets the stopped server (connection refused, retried).
        wait_for(lambda: len(client.failures) >= 3, 30, "the End asking the stopped API server")
    finally:
        cluster.start("kube-apiserver")
    ended = ending.join(90)

    assert 0 in client.failures
    assert ended["reached"] == ["uncordon", "taints", "lease", "maintenance"] and ended["deleted"], ended
    assert ended["warnings"] == [], ended["warnings"]
    wait_clean(cluster.client, [node])
    assert maintenance_of(cluster.client, node) is None
    assert leases_naming(cluster.client, [node], prefix) == []


def test_end_through_ansible_outlives_an_api_server_restart(restarts, cluster, world, user):
    (node,) = world.add_nodes(workers=1)
    args = {k: v for k, v in params(world, node, "present").items() if k in ("node", "slot_prefix", "etcd_pod_selector")}
    begun = run_module("nmo_maintenance", args, user.kubeconfig)
    assert not begun.get("failed") and node_clean(cluster.client, node) is not None, begun.get("msg")
    audit = AuditLog(cluster)

    ending = Background(lambda: run_module("nmo_maintenance", {**args, "state": "absent"}, user.kubeconfig))
    cluster.restart("kube-apiserver")  # 10 s of graceful shutdown, its port closed at once: Ansible starts meanwhile
    ended = ending.join(120)

    assert not ended.get("failed"), ended.get("msg")
    assert ended["reached"] == ["uncordon", "taints", "lease", "maintenance"] and ended["deleted"]
    answered = len(audit.settled().requests_of(user.name))
    print(f"\nEnd across an API server restart: {ended['api_requests']} attempts, {answered} answered")
    assert ended["api_requests"] > answered, (
        f"the End sent {ended['api_requests']} requests and {answered} were answered: it never met the restart")
    wait_clean(cluster.client, [node])
    assert maintenance_of(cluster.client, node) is None
    assert leases_naming(cluster.client, [node], f"t{world.id}-slot") == []


# -- (c) API Priority and Fairness throttling the collection's user -----------------------------------------
def test_throttling_slows_the_drain_and_blames_no_budget(cluster, world, user):
    a, _b = world.add_nodes(workers=2)
    with world.only_schedulable(a):
        world.deployment("web", 24)
    # A budget that allows every eviction: a throttled eviction mistaken for its refusal would name it.
    world.pdb("web", "web", max_unavailable=24)
    nm = start_maintenance(cluster, world, a)
    name = nm["metadata"]["name"]
    audit = AuditLog(cluster)

    with throttled(cluster, user.name):
        checked = run_module("nmo_preflight", {"nodes": [a]}, user.kubeconfig)
        result = run_module("nmo_drain", {"node": a, "maintenance": name, "timeout": 180}, user.kubeconfig)

    rejected = len(audit.requests_of(user.name, code=429))
    print(f"\nthrottled: {rejected} requests answered 429; pre-flight {checked.get('elapsed')} s "
          f"({checked.get('api_requests')} requests), drain {result.get('elapsed')} s "
          f"({result.get('api_requests')} requests)")
    assert rejected > 0, "the FlowSchema throttled nothing: the test proves nothing"

    assert not checked.get("failed"), checked.get("msg")
    (report,) = checked["nodes"]
    assert report["verdict"] == "go" and report["blockers"] == [] and report["warnings"] == [], report
    assert all(e["dry_run"] == "allowed" for e in report["to_evict"]), report["to_evict"]

    assert not result.get("failed"), result.get("msg")
    assert len(result["evicted"]) == 24 and result["pending"] == []
    assert world.pods(node=a) == []
    status = nm_status(cluster, name)
    assert (status["phase"], status["drainProgress"], status["lastError"]) == ("Succeeded", 100, ""), status
    assert drain_errors(cluster, name) == [], "throttling was reported as a DrainError"
