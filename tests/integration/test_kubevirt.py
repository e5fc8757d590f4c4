"""KubeVirt live migration in a drain (kubevirt: migrate), on the local control plane.

KubeVirt cannot run on kwok's nodes: its API shape (hack/kubevirt/crds.yaml) is installed
and a stand-in for its migration controllers (hack/kubevirt/standin.py, started and stopped
here as a process) plays KubeVirt's observable part: migration phases, the target
virt-launcher pod on another node, the VMI's nodeName and migrationState, the VM's budget
raised to minAvailable 2 during the migration, the source pod ended. The three VMs of docs/design.md §12.3
(vm-database-01, vm-webserver-02, vm-order-processing) each run alone behind a minAvailable 1
PodDisruptionBudget, so no eviction can move them.
"""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from kubevirt.world import StandIn, add_vm, install_crds, remove_crds
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import Client
from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import MultiWatcher, Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import crd
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.drain import DrainFailed, DrainOptions, drain

from .maintenance_support import (
    AvailabilityRecorder,
    Background,
    NodeRecorder,
    WatchRecorder,
    events_of,
    leases_naming,
    maintenance_of,
    nm_name,
    nm_status,
    reasons_of,
    run,
    slot_prefix,
    start_maintenance,
    wait_clean,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.side_lane]  # CI: beside the main suite (hack/test)

API = "/apis/kubevirt.io/v1"
SEED_VMS = ("vm-database-01", "vm-webserver-02", "vm-order-processing")


@pytest.fixture(scope="module")
def kubevirt_crds(cluster: Any) -> Any:
    made = install_crds(cluster.client)
    for _attempt in range(3):
        try:
            crd.ensure(cluster.client)  # NodeMaintenance, at this collection's revision
            break
        except Exception:  # another test installed it meanwhile
            continue
    yield
    remove_crds(cluster.client, made)


@pytest.fixture
def standin(cluster: Any, world: Any, kubevirt_crds: Any, tmp_path: Any) -> Any:
    """The stand-in for KubeVirt's controllers, serving this test's world."""
    world.ensure_namespace()
    log = tmp_path / "standin.log"
    with StandIn(cluster.kubeconfig, [world.namespace], step=0.3, log=log) as process:
        process.log_path = log
        yield process


def own_client(cluster: Any) -> Client:
    return Client(cluster.client.configuration, pool_size=40)


def vmims(cluster: Any, world: Any) -> List[Dict[str, Any]]:
    return cluster.client.get(f"{API}/namespaces/{world.namespace}/virtualmachineinstancemigrations").get("items", [])


def vmi(cluster: Any, world: Any, name: str) -> Dict[str, Any]:
    return cluster.client.get(f"{API}/namespaces/{world.namespace}/virtualmachineinstances/{name}")


def launchers(world: Any, name: str) -> List[Dict[str, Any]]:
    return [p for p in world.pods(namespace=world.namespace, selector=f"vm.kubevirt.io/name={name}")
            if not p["metadata"].get("deletionTimestamp")]


def running(pods: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def budget(cluster: Any, world: Any, name: str) -> Dict[str, Any]:
    return cluster.client.get(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                              f"kubevirt-disruption-budget-{name}")


class VmRecorder(WatchRecorder):
    """Pods and migrations of the world's namespace, looked at after every event: two running
    copies of a VM are only allowed while one of its migrations is unfinished."""

    def __init__(self, client: Any, namespace: str) -> None:
        self.pods = Watcher(client, f"/api/v1/namespaces/{namespace}/pods")
        self.vmims = Watcher(client, f"{API}/namespaces/{namespace}/virtualmachineinstancemigrations")
        self.budgets = Watcher(client, f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets")
        super().__init__(self.pods)
        self.watcher = MultiWatcher(self.pods, self.vmims, self.budgets)
        self.doubles: List[str] = []
        self.most_in_flight = 0
        self.raised: Dict[str, int] = {}  # the highest minAvailable each VM's budget had

    def __enter__(self) -> VmRecorder:
        self.watcher.start()
        self.start()
        return self

    def _look(self) -> None:
        unfinished = {m["spec"]["vmiName"] for m in self.vmims.objects.values()
                      if (m.get("status") or {}).get("phase") not in ("Succeeded", "Failed")}
        self.most_in_flight = max(self.most_in_flight, sum(1 for m in self.vmims.objects.values()
                                                           if (m.get("status") or {}).get("phase")
                                                           not in ("Succeeded", "Failed")))
        for pdb in self.budgets.objects.values():
            name = pdb["metadata"]["name"]
            self.raised[name] = max(self.raised.get(name, 0), int(pdb["spec"].get("minAvailable") or 0))
        copies: Dict[str, int] = {}
        for pod in running(list(self.pods.objects.values())):
            name = pod["metadata"].get("labels", {}).get("vm.kubevirt.io/name")
            if name:
                copies[name] = copies.get(name, 0) + 1
        for name, count in copies.items():
            if count > 1 and name not in unfinished:
                self.doubles.append(f"{name}: {count} running with no migration in flight")


# -- the drain alone --------------------------------------------------------------------------------
def test_migrate_moves_the_seeds_vm_and_the_drain_finishes(cluster, world, standin):
    """docs/design.md §12.3, the way out by hand done by the drain: vm-order-processing alone behind
    minAvailable 1 on worker-02; with kubevirt=migrate the drain creates one migration,
    follows it to Succeeded, and the pod KubeVirt ends leaves the node."""
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    add_vm(world, "vm-order-processing", w2)
    nm = start_maintenance(cluster, world, w2)
    name = nm["metadata"]["name"]
    with VmRecorder(cluster.client, world.namespace) as vms, \
            AvailabilityRecorder(cluster.client, world.namespace) as pods:
        result = drain(own_client(cluster), DrainOptions(node=w2, maintenance=name, kubevirt="migrate", timeout=60))
    assert result["migrations_created"] == 1
    [m] = result["migrations"]
    assert m["state"] == "migrated" and m["vmi"] == "vm-order-processing" and m["targetNode"] in (w1, w3), m
    assert [p["name"] for p in result["evicted"]] == [m["pod"]], "the pod KubeVirt ended left by eviction"
    [vmim] = vmims(cluster, world)
    assert vmim["status"]["phase"] == "Succeeded" and vmim["spec"]["vmiName"] == "vm-order-processing"
    phases = [t["phase"] for t in vmim["status"]["phaseTransitionTimestamps"]]
    assert phases == ["Pending", "Scheduling", "Scheduled", "PreparingTarget", "TargetReady", "Running", "Succeeded"]
    assert vmi(cluster, world, "vm-order-processing")["status"]["nodeName"] == m["targetNode"]
    left = running(launchers(world, "vm-order-processing"))
    assert [p["spec"]["nodeName"] for p in left] == [m["targetNode"]], "one copy, on the target"
    assert pods.fewest["vm-order-processing"] >= 1, "the VM's budget was violated"
    assert not vms.doubles, vms.doubles
    assert vms.raised == {"kubevirt-disruption-budget-vm-order-processing": 2}, "KubeVirt's budget raise not seen"
    assert budget(cluster, world, "vm-order-processing")["spec"]["minAvailable"] == 1
    status = nm_status(cluster, name)
    assert status["phase"] == "Succeeded" and status["drainProgress"] == 100
    assert status["migrations"][0]["state"] == "migrated"
    reasons = [e["reason"] for e in events_of(cluster.client, name)]
    assert "MigrationStarted" in reasons and "MigrationSucceeded" in reasons and "DrainError" not in reasons, reasons
    done = next(e for e in events_of(cluster.client, name) if e["reason"] == "MigrationSucceeded")
    assert f"from node {w2} to node {m['targetNode']}" in done["message"]


def test_a_failing_migration_leaves_the_pod_pending_with_kubevirts_reason(cluster, world, standin):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    add_vm(world, "vm-database-01", w1, fail_migration="target domain crashed: migration aborted")
    nm = start_maintenance(cluster, world, w1)
    name = nm["metadata"]["name"]
    with pytest.raises(DrainFailed) as failed:
        drain(own_client(cluster), DrainOptions(node=w1, maintenance=name, kubevirt="migrate", timeout=8))
    result = failed.value.details
    assert "timed out after 8 s" in failed.value.message
    assert "target domain crashed: migration aborted" in failed.value.message
    assert result["migrations_created"] == 1, "no second migration: one per VM and drain"
    [m] = result["migrations"]
    assert m["state"] == "failed" and m["phase"] == "Failed"
    [vmim] = vmims(cluster, world)
    assert vmim["status"]["phase"] == "Failed"
    status = nm_status(cluster, name)
    assert "target domain crashed: migration aborted" in status["lastError"], status["lastError"]
    assert status["pendingPods"] == [m["pod"]]
    failed_events = [e for e in events_of(cluster.client, name) if e["reason"] == "MigrationFailed"]
    assert len(failed_events) == 1 and failed_events[0]["type"] == "Warning"
    assert "target domain crashed" in failed_events[0]["message"]
    # the VM stays where it was, one copy, its budget back at 1
    assert [p["spec"]["nodeName"] for p in running(launchers(world, "vm-database-01"))] == [w1]
    assert budget(cluster, world, "vm-database-01")["spec"]["minAvailable"] == 1


def test_a_vmi_that_is_not_migratable_is_blocked_with_its_reason(cluster, world, standin):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    add_vm(world, "vm-webserver-02", w1,
           not_migratable="DisksNotLiveMigratable: cannot migrate VMI: PVC rootdisk is not shared, "
                          "live migration requires that all PVCs must be shared (using ReadWriteMany access mode)")
    nm = start_maintenance(cluster, world, w1)
    name = nm["metadata"]["name"]
    with pytest.raises(DrainFailed) as failed:
        drain(own_client(cluster), DrainOptions(node=w1, maintenance=name, kubevirt="migrate", timeout=5))
    assert "is not live-migratable (DisksNotLiveMigratable: cannot migrate VMI" in failed.value.message
    assert failed.value.details["migrations_created"] == 0 and vmims(cluster, world) == []
    status = nm_status(cluster, name)
    assert "DisksNotLiveMigratable" in status["lastError"] and status["migrations"][0]["state"] == "blocked"
    errors = [e for e in events_of(cluster.client, name) if e["reason"] == "DrainError"
              and e["message"].startswith("VirtualMachineInstance")]
    assert len(errors) == 1 and errors[0].get("count", 1) == 1, "one event, no storm"


def test_wait_is_the_default_and_makes_no_kubevirt_request(cluster, world, standin):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    add_vm(world, "vm-order-processing", w1)
    nm = start_maintenance(cluster, world, w1)
    with pytest.raises(DrainFailed) as failed:
        drain(own_client(cluster), DrainOptions(node=w1, maintenance=nm["metadata"]["name"], timeout=3))
    assert "migrations" not in failed.value.details and vmims(cluster, world) == []
    assert "disruption budget" in failed.value.message


def test_a_migration_made_by_hand_is_followed_not_doubled(cluster, world, standin):
    """The way out by hand of docs/design.md §12.3, started before the drain: the drain follows it."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    add_vm(world, "vm-order-processing", w1)
    nm = start_maintenance(cluster, world, w1)
    cluster.client.post(f"{API}/namespaces/{world.namespace}/virtualmachineinstancemigrations", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "migrate-vm-order-processing"}, "spec": {"vmiName": "vm-order-processing"}})
    result = drain(own_client(cluster), DrainOptions(node=w1, maintenance=nm["metadata"]["name"], kubevirt="migrate",
                                                     timeout=60))
    assert result["migrations_created"] == 0
    assert [m["migration"] for m in result["migrations"]] == ["migrate-vm-order-processing"]
    assert [m["metadata"]["name"] for m in vmims(cluster, world)] == ["migrate-vm-order-processing"]
    assert running(launchers(world, "vm-order-processing"))[0]["spec"]["nodeName"] == w2


def test_a_migration_in_flight_shows_in_the_status_playbook_and_the_timeout_holds(
        cluster, world, kubevirt_crds, user, tmp_path):
    """No stand-in: a migration made by hand stays Pending, as when KubeVirt cannot schedule
    its target. The drain follows it (no second one), status.yml lists it in flight, and the
    drain's timeout still ends the wait."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    add_vm(world, "vm-order-processing", w1)
    cluster.client.post(f"{API}/namespaces/{world.namespace}/virtualmachineinstancemigrations", {
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "migrate-vm-order-processing"}, "spec": {"vmiName": "vm-order-processing"}})
    nm = start_maintenance(cluster, world, w1)
    name = nm["metadata"]["name"]
    draining = Background(lambda: drain(own_client(cluster), DrainOptions(
        node=w1, maintenance=name, kubevirt="migrate", timeout=25)))
    wait_for(lambda: any(m.get("state") == "migrating" for m in nm_status(cluster, name).get("migrations") or []),
             20, "the drain to follow the migration")
    inventory = write_inventory(world, tmp_path)
    status = run("status.yml", inventory, user.kubeconfig, extra_vars={"nmo_nodes": w1})
    assert status.proc.returncode == 0, status.output[-3000:]
    assert (f"{world.namespace}/vm-order-processing migrating, phase Pending "
            "(VirtualMachineInstanceMigration migrate-vm-order-processing)") in status.output, status.output[-3000:]
    with pytest.raises(DrainFailed) as failed:
        draining.join(60)
    assert "timed out after 25 s" in failed.value.message and "migrating, phase Pending" in failed.value.message
    assert failed.value.details["migrations_created"] == 0 and len(vmims(cluster, world)) == 1
    started = [e for e in events_of(cluster.client, name) if e["reason"] == "MigrationStarted"]
    assert len(started) == 1 and "made by someone else" in started[0]["message"]


# -- the role, end to end ---------------------------------------------------------------------------
def seed_vms(world: Any) -> Dict[str, str]:
    """The three VMs of docs/design.md §12.3 on a 6-worker world: vm-order-processing on worker-02."""
    w = world.workers
    placed = {"vm-database-01": w[0], "vm-order-processing": w[1], "vm-webserver-02": w[3]}
    for name, node in placed.items():
        add_vm(world, name, node)
    return placed


def test_workers_maintained_with_every_vm_live_migrated_once_per_drain(cluster, world, kubevirt_crds, user, tmp_path):
    world.add_nodes(workers=6)
    placed = seed_vms(world)
    inventory = write_inventory(world, tmp_path)
    with StandIn(cluster.kubeconfig, [world.namespace], step=0.6, log=tmp_path / "standin.log"), \
            NodeRecorder(cluster.client, world) as nodes, VmRecorder(cluster.client, world.namespace) as vms, \
            AvailabilityRecorder(cluster.client, world.namespace) as pods:
        result = run("maintenance.yml", inventory, user.kubeconfig,
                     args=["-l", "workers", "-e", "node_maintenance_kubevirt=migrate",
                           "-e", "node_maintenance_progress_interval=1"])
    assert result.proc.returncode == 0, result.output[-5000:]
    assert "go (migrate)" in result.output, "the pre-flight says the VM nodes go, by migration"
    assert ": migrating, phase " in result.output, "a live line shows a migration in flight"
    assert nodes.order == world.workers and nodes.most_at_once == 1, nodes.history

    # every VM migrated exactly once by each drain of a node it ran on, all Succeeded
    migrations = vmims(cluster, world)
    assert all(m["status"]["phase"] == "Succeeded" for m in migrations), [m["status"] for m in migrations]
    per_drain: Dict[tuple, int] = {}
    for m in migrations:
        source = m["status"]["migrationState"]["sourceNode"]
        assert m["metadata"]["labels"]["nmo.maintenance/drained-node"] == source, "made by the drain of its node"
        key = (m["spec"]["vmiName"], source)
        per_drain[key] = per_drain.get(key, 0) + 1
    assert all(count == 1 for count in per_drain.values()), per_drain
    for name, node in placed.items():
        assert (name, node) in per_drain, f"{name} was not migrated off {node}"
    assert vms.most_in_flight <= 2, "more migrations at once than KubeVirt's parallelOutboundMigrationsPerNode"

    # never two copies after a migration ended, never below the budget, nothing left behind
    assert not vms.doubles, vms.doubles
    assert all(pods.fewest[name] >= 1 for name in placed), f"a VM's budget was violated: {pods.fewest}"
    for name in placed:
        copies = running(launchers(world, name))
        assert len(copies) == 1 and copies[0]["spec"]["nodeName"] == vmi(cluster, world, name)["status"]["nodeName"]
        assert budget(cluster, world, name)["spec"]["minAvailable"] == 1
    assert [p for p in world.pods(namespace=world.namespace)
            if (p.get("status") or {}).get("phase") == "Succeeded"] == [], "an ended virt-launcher pod was left"
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.nodes if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []
    for node in set(placed.values()):
        story = reasons_of(cluster.client, nm_name(node))
        assert "MigrationStarted" in story and "MigrationSucceeded" in story, f"{node}: {story}"
    # the shipped ClusterRole grants what the migrations needed, and no more
    assert user.can("create", "virtualmachineinstancemigrations", "*")
    assert user.can("watch", "virtualmachineinstances", "*")
    assert not [v for v in ("update", "patch", "delete") if user.can(v, "virtualmachineinstancemigrations", "*")]
    assert not [v for v in ("create", "update", "patch", "delete") if user.can(v, "virtualmachineinstances", "*")]


def test_wait_stays_the_default_the_preflight_blocks_the_vm_nodes(cluster, world, kubevirt_crds, user, tmp_path):
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    add_vm(world, "vm-order-processing", w2)
    add_vm(world, "vm-webserver-02", w3,
           not_migratable="InterfaceNotLiveMigratable: cannot migrate VMI which does not use masquerade, bridge with "
                          "kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin "
                          "to connect to the pod network")
    inventory = write_inventory(world, tmp_path)
    waiting = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"])
    assert waiting.proc.returncode != 0
    assert f"{w2}  no-go" in waiting.output and "can never allow it" in waiting.output
    assert maintenance_of(cluster.client, w1) is None, "the pre-flight stopped the run before any node was touched"

    migrating = run("maintenance.yml", inventory, user.kubeconfig,
                    args=["-l", "workers", "-e", "node_maintenance_kubevirt=migrate"])
    assert migrating.proc.returncode != 0
    assert f"{w2}  go (migrate)" in migrating.output, migrating.output[-4000:]
    assert f"{w3}  no-go" in migrating.output
    assert "cannot be live-migrated: VirtualMachineInstance" in migrating.output
    assert "is not live-migratable (InterfaceNotLiveMigratable: cannot migrate VMI" in migrating.output
    assert vmims(cluster, world) == [] and maintenance_of(cluster.client, w1) is None
