"""Topology budgets and the control plane one at a time, on the local control plane (docs/design.md §5.6).

The nodes are kwok nodes of the test's own world, labelled with zones and pools of the
world's own values, so the budgets count no node of another test. Most cases call the core
of ``nmo_maintenance`` (``lifecycle.begin`` and ``end``) from threads, as several runs
would, each run with its run lease kept alive by the heartbeat's own beat; one playbook run
checks the role end to end, one ansible-playbook is killed mid-wait. Nothing sleeps to
synchronise: every wait is on a condition (a watch, a file a hook writes).
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Dict, Iterator, List, Set

import pytest
from helpers import run_module, run_playbook
from topology import WORLD_LABEL, wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.api.waiter import Watcher
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import BlockedError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import leases as lease_store
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import (
    disruption,
    etcd_guard,
    heartbeat,
    lifecycle,
    recover,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs

from .maintenance_support import (
    LEASES,
    Background,
    NodeRecorder,
    Run,
    events_of,
    leases_naming,
    maintenance_of,
    nm_name,
    run_tasks,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .test_clock_skew import skewed

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("crd_installed")]
ZONE = "topology.kubernetes.io/zone"
NS = leases.LEASE_NAMESPACE
BLOCKED_PREFIX = disruption.BLOCKED_PREFIX


# -- helpers ------------------------------------------------------------------------------------
def options(world: Any, node: str, run_id: str = "", **lease: Any) -> lifecycle.Options:
    etcd = etcd_guard.Options(member_selector=f"component=etcd,{WORLD_LABEL}={world.id}")
    return lifecycle.Options(node=node, run_id=run_id,
                             lease=disruption.Request(node=node, slot_prefix=slot_prefix(world), etcd=etcd, **lease))


def begin(cluster: Any, world: Any, node: str, run_id: str = "", **lease: Any) -> Dict[str, Any]:
    return lifecycle.begin(cluster.client, options(world, node, run_id, **lease))


def end(cluster: Any, world: Any, node: str, run_id: str = "") -> Dict[str, Any]:
    return lifecycle.end(cluster.client, options(world, node, run_id))


@contextmanager
def live_run(cluster: Any, run_id: str) -> Iterator[str]:
    """A run lease kept alive (and the run's leases renewed) by the heartbeat's own beat."""
    runs.start(cluster.client, run_id, "test-budgets")
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(runs.RENEW_EVERY / 2):
            heartbeat.beat(cluster.client, run_id, NS, runs.RUN_LEASE_DURATION)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield run_id
    finally:
        stop.set()
        thread.join()
        runs.stop(cluster.client, run_id)


def places(cluster: Any, world: Any) -> Dict[str, str]:
    """Every valid slot and budget place of the world's prefix: name -> holder."""
    now = cluster.client.server_now()
    return {lease["metadata"]["name"]: leases.holder(lease) for lease in lease_store.list_leases(cluster.client)
            if lease["metadata"]["name"].startswith(slot_prefix(world) + "-") and leases.is_valid(lease, now)}


def budget_places(cluster: Any, world: Any, node: str) -> List[str]:
    return [lease["metadata"]["name"] for lease in leases.own_places(
        lease_store.list_leases(cluster.client), node, slot_prefix(world))]


def zoned(world: Any, zones: Dict[str, int], **labels: str) -> Dict[str, List[str]]:
    """``count`` kwok workers in each zone (the world's own zone values)."""
    return {zone: world.add_nodes(workers=count, labels={ZONE: f"{world.id}-{zone}", **labels})
            for zone, count in zones.items()}


def not_ready_node(cluster: Any, world: Any, labels: Dict[str, str]) -> str:
    """A node that no kubelet (nor kwok) keeps Ready: NotReady for as long as the test runs."""
    name = f"node-{world.id}-down-{len(world.nodes):02d}"
    cluster.client.post("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {WORLD_LABEL: world.id, **labels}}})
    world.nodes.append(name)
    return name


ZONE_BUDGET = [{"topology_key": ZONE, "max": 1}]


class PlaceRecorder(threading.Thread):
    """Every change of the leases namespace: which nodes hold a place of which family, and
    the nodes' zones, so a test asks what was ever true at once."""

    def __init__(self, cluster: Any, world: Any) -> None:
        super().__init__(daemon=True)
        self.watcher = Watcher(cluster.client, LEASES, {})
        self.prefix = slot_prefix(world)
        self.history: List[Dict[str, Set[str]]] = []
        self._done = threading.Event()

    def look(self) -> None:
        families: Dict[str, Set[str]] = {}
        for lease in self.watcher.objects.values():
            name = lease["metadata"]["name"]
            if name.startswith(self.prefix + "-") and leases.BUDGET_ANNOTATION in (
                    lease["metadata"].get("annotations") or {}):
                families.setdefault(name.rpartition("-")[0], set()).add(leases.holder(lease))
        if not self.history or self.history[-1] != families:
            self.history.append(families)

    def run(self) -> None:
        self.look()
        while not self._done.is_set():
            self.watcher.drain_events(0.2)
            self.look()

    def __enter__(self) -> PlaceRecorder:
        self.watcher.start()
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._done.set()
        self.join()
        self.watcher.close()


# -- the role: two zones x three nodes, concurrency 4, one node a zone -------------------------------
WORK_HOOK = """\
- name: The work takes until the other zone has had a node in maintenance too
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/both-zones"
    timeout: 120
"""


def test_one_node_a_zone_with_concurrency_four_both_zones_progress(cluster, world, user, tmp_path):
    by_zone = zoned(world, {"a": 3, "b": 3})
    zone_of = {n: z for z, nodes in by_zone.items() for n in nodes}
    hook = tmp_path / "work.yml"
    hook.write_text(WORK_HOOK)
    inventory = write_inventory(world, tmp_path)
    with NodeRecorder(cluster.client, world) as nodes, PlaceRecorder(cluster, world) as held:
        proc = Run("maintenance.yml", inventory, user.kubeconfig,
                   extra_vars={"node_maintenance_hooks_work": [str(hook)], "test_dir": str(tmp_path),
                               "node_maintenance_concurrency": 4, "node_maintenance_budgets": ZONE_BUDGET})
        try:
            # released once one node of each zone was in maintenance at the same moment
            wait_for(lambda: proc.proc.poll() is not None or any(len({zone_of[n] for n in s}) == 2
                                                                 for s in nodes.history),
                     90, "a node of each zone in maintenance at once")
            (tmp_path / "both-zones").touch()
            code = proc.wait(240)
        finally:
            if proc.proc.poll() is None:
                proc.kill()
            proc.close()
    assert code == 0, proc.output[-4000:]
    for moment in nodes.history:
        for zone in ("a", "b"):
            assert len([n for n in moment if zone_of[n] == zone]) <= 1, f"two nodes of zone {zone}: {nodes.history}"
    assert set(nodes.order) == set(zone_of), f"every node maintained: {nodes.order}"
    assert max(len(s) for s in nodes.history) == 2, "both zones progressed together"
    families = {f for moment in held.history for f in moment}
    assert len(families) == 2, f"one place family a zone: {families}"
    assert all(len(h) <= 1 for moment in held.history for h in moment.values()), held.history
    # the wait said which budget and who: on the NodeMaintenance's events of a node that waited,
    # for the place's holders or for an earlier node of the run's order (design §18.7)
    waited = [e for n in zone_of for e in events_of(cluster.client, nm_name(n), "BlockedByNodeHealthCheck")]
    assert waited and all(f"topology_key {ZONE}" in e["message"] and
                          ("place(s) are held" in e["message"] or "goes first" in e["message"])
                          for e in waited), waited
    wait_clean(cluster.client, world.nodes)
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []


# -- a percentage of a labelled pool, NotReady nodes counted ------------------------------------------
def test_a_percentage_of_a_pool_counts_its_notready_node(cluster, world):
    pool = {"pool": f"gpu-{world.id}"}
    nodes = world.add_nodes(workers=9, labels=pool)
    down = not_ready_node(cluster, world, pool)  # 10 nodes: 30% is 3, one of them already down
    budget = [{"selector": f"pool=gpu-{world.id}", "max": "30%"}]
    taken, refused = [], []
    for node in nodes:
        try:
            begin(cluster, world, node, concurrency=10, budgets=budget)
            taken.append(node)
        except BlockedError as exc:
            refused.append((node, exc))
    assert taken == nodes[:2], (taken, refused)
    node, exc = refused[0]
    assert f"selector 'pool=gpu-{world.id}', max 30%" in exc.message and "2 of 3 place(s) are held" in exc.message
    assert all(n in exc.message for n in taken) and down in exc.message, exc.message
    status = maintenance.get(cluster.client, nm_name(node))["status"]
    assert status["phase"] == "Pending" and "30%" in status["lastError"]
    assert not budget_places(cluster, world, node), "a refused node holds no place"
    assert sum(1 for holder in places(cluster, world).values() if holder == node) == 0
    # once one of the two ends, the next one goes; the global slots never held more than 10
    end(cluster, world, taken[0])
    begin(cluster, world, node, concurrency=10, budgets=budget)
    assert len(budget_places(cluster, world, node)) == 1


# -- two runs sharing the budgets; a wait that ends when the other run's node ends -------------------
def test_two_runs_share_a_zone_and_the_wait_ends_with_the_other_runs_node(cluster, world):
    by_zone = zoned(world, {"a": 2, "b": 1})
    a1, a2 = by_zone["a"]
    (b1,) = by_zone["b"]
    with live_run(cluster, f"a{world.id}") as run_a, live_run(cluster, f"b{world.id}") as run_b:
        first = begin(cluster, world, a1, run_a, concurrency=4, budgets=ZONE_BUDGET)
        assert len(first["lease"]["places"]) == 1
        other_zone = begin(cluster, world, b1, run_b, concurrency=4, budgets=ZONE_BUDGET)  # its own zone: at once
        assert other_zone["lease"]["waited"] < 5
        waiting = Background(lambda: begin(cluster, world, a2, run_b, concurrency=4, budgets=ZONE_BUDGET,
                                           wait=True, timeout=60))
        wait_for(lambda: "place(s) are held" in ((maintenance.get(cluster.client, nm_name(a2)) or {}).get(
            "status") or {}).get("lastError", ""), 30, f"{a2} Pending behind the zone budget")
        status = maintenance.get(cluster.client, nm_name(a2))["status"]
        assert status["phase"] == "Pending"
        assert f"domain {ZONE}={world.id}-a" in status["lastError"] and a1 in status["lastError"]
        assert f"run {run_a}" in status["lastError"], status["lastError"]
        event = events_of(cluster.client, nm_name(a2), "BlockedByNodeHealthCheck")
        assert event and event[-1]["message"] == status["lastError"]
        assert not budget_places(cluster, world, a2) and a2 not in places(cluster, world).values(), \
            "a waiting node sits on no slot and no place"
        assert waiting.returned_at is None
        end(cluster, world, a1, run_a)
        done = waiting.join(60)
        assert done["lease"]["waited"] > 0 and len(done["lease"]["places"]) == 1
        assert any(h.get("kind") == "budget" and h["holder"] == a1 for h in done["lease"]["holders"])
        place = lease_store.read(cluster.client, NS, done["lease"]["places"][0])
        assert leases.run_annotation(place) == run_b and leases.holder(place) == a2
        assert ZONE in place["metadata"]["annotations"][leases.BUDGET_ANNOTATION]
        # a run that has no zone budget still counts: a2 (in maintenance) fills zone a for run b's budget
        end(cluster, world, b1, run_b)
        end(cluster, world, a2, run_b)
    assert places(cluster, world) == {}


def test_a_run_without_the_budget_counts_against_it(cluster, world):
    by_zone = zoned(world, {"a": 2})
    a1, a2 = by_zone["a"]
    begin(cluster, world, a1, concurrency=4)  # another run, no budgets: a global slot only
    with pytest.raises(BlockedError) as blocked:
        begin(cluster, world, a2, concurrency=4, budgets=ZONE_BUDGET)
    assert "already disrupted" in blocked.value.message and a1 in blocked.value.message
    assert not budget_places(cluster, world, a2)
    end(cluster, world, a1)


# -- a run killed while its node waits ---------------------------------------------------------------
def test_a_run_killed_mid_wait_holds_nothing_and_the_next_run_proceeds(cluster, world, tmp_path):
    a1, a2 = zoned(world, {"a": 2})["a"]
    with live_run(cluster, f"h{world.id}") as holder:
        begin(cluster, world, a1, holder, concurrency=2, budgets=ZONE_BUDGET)
        killed = f"k{world.id}"
        conn = {"kubeconfig": cluster.kubeconfig}
        proc = run_tasks(tmp_path, "waiter", [
            {"name": "run", "nmo.maintenance.nmo_run": {**conn, "run_id": killed}},
            {"name": "begin", "nmo.maintenance.nmo_maintenance": {
                **conn, "node": a2, "run_id": killed, "slot_prefix": slot_prefix(world), "concurrency": 2,
                "budgets": ZONE_BUDGET, "wait": True, "timeout": 120,
                "etcd_pod_selector": f"component=etcd,{WORLD_LABEL}={world.id}"}}], cluster.kubeconfig)
        try:
            wait_for(lambda: "place(s) are held" in ((maintenance.get(cluster.client, nm_name(a2)) or {}).get(
                "status") or {}).get("lastError", ""), 60, f"{a2} waiting in the killed run")
            proc.kill()
        finally:
            if proc.proc.poll() is None:
                proc.kill()
            proc.close()
        wait_run_gone(cluster.client, killed)
        assert not budget_places(cluster, world, a2) and a2 not in places(cluster, world).values()
        assert leases.run_annotation(maintenance_of(cluster.client, a2)) == killed
        end(cluster, world, a1, holder)
    with live_run(cluster, f"n{world.id}") as next_run:
        resumed = begin(cluster, world, a2, next_run, concurrency=2, budgets=ZONE_BUDGET)
        assert resumed["adopted_from"] == killed and len(resumed["lease"]["places"]) == 1
        end(cluster, world, a2, next_run)
    assert places(cluster, world) == {}


# -- recover: the places go with the node's slots ------------------------------------------------------
def test_recover_releases_the_places_of_a_node_left_behind(cluster, world):
    a1, a2 = zoned(world, {"a": 2})["a"]
    begin(cluster, world, a1, concurrency=2, budgets=ZONE_BUDGET)
    assert len(budget_places(cluster, world, a1)) == 1
    # its NodeMaintenance deleted by hand: a1 is left behind, found by its marks and leases
    maintenance.delete(cluster.client, maintenance_of(cluster.client, a1))
    done = recover.recover(cluster.client, recover.RecoverOptions(slot_prefix=slot_prefix(world)))
    assert a1 in done["recovered"] and not done.get("failed"), done
    assert budget_places(cluster, world, a1) == [] and a1 not in places(cluster, world).values()
    # the zone is free again: a2 goes, and recover.yml by name ends it with its place
    begin(cluster, world, a2, concurrency=2, budgets=ZONE_BUDGET)
    named = recover.recover(cluster.client, recover.RecoverOptions(nodes=[a2]))
    assert named["recovered"] == [a2] and not named.get("failed"), named
    assert places(cluster, world) == {}


# -- control-plane nodes one at a time --------------------------------------------------------------
def test_two_control_plane_nodes_with_concurrency_two_never_together(cluster, world):
    cp1, cp2 = world.add_nodes(control_planes=2)
    (worker,) = world.add_nodes(workers=1)
    opts = dict(concurrency=2)
    first = lifecycle.begin(cluster.client, _cp_options(world, cp1, **opts))
    assert first["lease"]["places"] == [f"{slot_prefix(world)}-control-plane-0"]
    with pytest.raises(BlockedError) as blocked:
        lifecycle.begin(cluster.client, _cp_options(world, cp2, **opts))
    assert "the control-plane budget (max 1" in blocked.value.message and cp1 in blocked.value.message
    assert not budget_places(cluster, world, cp2) and cp2 not in places(cluster, world).values()
    # raised on purpose: both at once
    second = lifecycle.begin(cluster.client, _cp_options(world, cp2, control_plane_concurrency=2, **opts))
    assert second["lease"]["places"] == [f"{slot_prefix(world)}-control-plane-1"]
    for node in (cp1, cp2):
        end(cluster, world, node)
    assert begin(cluster, world, worker, **opts)["lease"]["places"] == [], "a worker is under no budget"
    end(cluster, world, worker)
    assert places(cluster, world) == {}


def _cp_options(world: Any, node: str, **lease: Any) -> lifecycle.Options:
    """The world has no etcd pods: the guard is told so (external etcd), the budget still applies."""
    opts = options(world, node, **lease)
    opts.lease.etcd = etcd_guard.Options(flavour="none")
    return opts


# -- bad input: a clear error, nothing written ---------------------------------------------------------
BAD = [
    ([{"topology_key": ZONE, "max": 0}], "budgets[0].max: 0 must be between 1 and 1000"),
    ([{"selector": "pool=gpu", "max": "150%"}], "budgets[0].max: '150%' is not a percentage"),
    ([{"selector": "pool=gpu", "max": -1}], "budgets[0].max: -1 must be between 1 and 1000"),
    ([{"selector": "pool=gpu", "max": 1.5}], "budgets[0].max: 1.5 must be a whole number"),
    ([{"selector": "pool in (gpu", "max": 1}], "budgets[0].selector: 'pool in (gpu' is not a valid label selector"),
    ([{"topology_key": "zone name", "max": 1}], "budgets[0].topology_key: 'zone name' is not a valid label key"),
    ([{"topology_key": ZONE, "max": 1, "maxx": 2}], "budgets[0]: unknown key(s) maxx"),
]


def test_bad_budgets_are_refused_before_any_write(cluster, world):
    (node,) = world.add_nodes(workers=1)
    conn = {"kubeconfig": cluster.kubeconfig, "node": node, "slot_prefix": slot_prefix(world)}
    tasks = [{"name": f"bad {i}", "nmo.maintenance.nmo_maintenance": {**conn, "budgets": budgets},
              "ignore_errors": True} for i, (budgets, _said) in enumerate(BAD)]
    tasks.append({"name": "bad cp", "nmo.maintenance.nmo_lease": {**conn, "control_plane_concurrency": 0},
                  "ignore_errors": True})
    done = run_playbook([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}], cluster.kubeconfig)
    results = done.results("nmo_maintenance") + done.results("nmo_lease")
    assert len(results) == len(BAD) + 1
    for result, said in zip(results, [s for _b, s in BAD] + ["control_plane_concurrency: 0 must be between 1"]):
        assert result.get("failed") and said in result["msg"], (said, result.get("msg"))
    assert maintenance_of(cluster.client, node) is None, "nothing written"
    assert leases_naming(cluster.client, [node], slot_prefix(world)) == []


# -- what the slots survive, the budgets survive: an API server restart, a skewed clock ------------------
def test_a_zone_wait_outlives_an_api_server_restart_and_never_doubles_the_zone(cluster, world):
    """kube-apiserver restarts while a2 waits behind a1's zone place: the wait's watch reopens,
    no one takes the place in the gap, and a2 begins only once a1 ended."""
    a1, a2 = zoned(world, {"a": 2})["a"]
    try:
        with live_run(cluster, f"r{world.id}") as run_id, PlaceRecorder(cluster, world) as recorder:
            begin(cluster, world, a1, run_id, concurrency=4, budgets=ZONE_BUDGET)
            waiting = Background(lambda: begin(cluster, world, a2, run_id, concurrency=4, budgets=ZONE_BUDGET,
                                               wait=True, timeout=180))
            wait_for(lambda: "place(s) are held" in ((maintenance.get(cluster.client, nm_name(a2)) or {}).get(
                "status") or {}).get("lastError", ""), 30, f"{a2} Pending behind the zone budget")
            cluster.restart("kube-apiserver")
            assert waiting.returned_at is None, "the wait ended during the API server restart"
            assert not budget_places(cluster, world, a2), f"{a2} took a place of a full zone after the restart"
            ended_at = time.monotonic()
            end(cluster, world, a1, run_id)
            done = waiting.join(120)
            assert waiting.returned_at >= ended_at
            assert len(done["lease"]["places"]) == 1 and done["lease"]["waited"] > 0
            end(cluster, world, a2, run_id)
        zone = [h for h in recorder.history if any(a1 in holders or a2 in holders for holders in h.values())]
        assert zone and all(len(holders) <= 1 for h in zone for holders in h.values()), recorder.history
        assert any(a2 in holders for h in zone for holders in h.values()), "a2 never held its zone's place"
    finally:
        cluster.restart_controllers()
    assert places(cluster, world) == {}


@pytest.mark.parametrize("offset", ["-60s", "+60s"])
def test_a_skewed_controller_respects_a_fresh_zone_place_and_writes_the_servers_time(cluster, world, offset):
    """A zone place is a lease like a slot: a controller whose clock is a minute off neither
    takes a fresh one for lapsed nor writes one that a controller on time takes for lapsed."""
    a1, a2 = zoned(world, {"a": 2})["a"]
    args = {"slot_prefix": slot_prefix(world), "duration": 30, "concurrency": 4, "budgets": ZONE_BUDGET}
    held = run_module("nmo_lease", {**args, "node": a1}, cluster.kubeconfig)
    assert not held.get("failed"), held.get("msg")

    blocked = run_module("nmo_lease", {**args, "node": a2}, cluster.kubeconfig, env=skewed(offset))
    assert blocked.get("failed") and "place(s) are held" in blocked["msg"], blocked
    assert f"{ZONE}={world.id}-a" in blocked["msg"] and a1 in blocked["msg"], blocked["msg"]
    assert not budget_places(cluster, world, a2)

    released = run_module("nmo_lease", {**args, "node": a1, "state": "released"}, cluster.kubeconfig)
    assert not released.get("failed"), released.get("msg")
    taken = run_module("nmo_lease", {**args, "node": a2}, cluster.kubeconfig, env=skewed(offset))
    assert not taken.get("failed"), taken.get("msg")
    (place,) = budget_places(cluster, world, a2)
    renewed = leases.parse_time(lease_store.read(cluster.client, NS, place)["spec"]["renewTime"])
    now = cluster.client.server_now()
    assert abs(renewed - now) < timedelta(seconds=3), f"{place} renewed at {renewed}, server time {now}"
    again = run_module("nmo_lease", {**args, "node": a1}, cluster.kubeconfig)
    assert again.get("failed") and "place(s) are held" in again["msg"], again
    run_module("nmo_lease", {**args, "node": a2, "state": "released"}, cluster.kubeconfig)
    assert places(cluster, world) == {}
