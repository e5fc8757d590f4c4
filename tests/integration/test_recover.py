"""recover.yml and status.yml with names the cluster does not have, and slots of any prefix.

The playbooks run as an operator runs them after an incident: without the inventory
(``-i localhost,``), with names typed by hand.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from helpers import run_module, run_playbook
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model.marks import CORDONED_BEFORE, QUARANTINED
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import (
    disruption,
    ending_runs,
    leftovers,
    lifecycle,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import run as runs

from .maintenance_support import LEASES, AuditLog, leases_naming, maintenance_of, node_clean, slot_prefix, wait_clean

pytestmark = [pytest.mark.cluster]

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"


def playbook(name: str, cluster: Any, extra: Optional[Dict[str, Any]] = None, check: bool = False) -> Any:
    args: List[str] = ["--check"] if check else []
    for key, value in (extra or {}).items():
        args += ["-e", f"{key}={value}"]
    return run_playbook(None, cluster.kubeconfig, args=args, playbook_path=str(PLAYBOOKS / name))


def begin(cluster: Any, node: str, prefix: str) -> None:
    result = run_module("nmo_maintenance", {"node": node, "install_crd": True, "slot_prefix": prefix, "wait": False},
                        cluster.kubeconfig)
    assert not result.get("failed"), result.get("msg")
    assert node_clean(cluster.client, node) is not None and maintenance_of(cluster.client, node) is not None


def slots_held_by(cluster: Any, node: str) -> List[str]:
    return sorted(lease["metadata"]["name"] for lease in cluster.client.get(LEASES).get("items", [])
                  if lease.get("spec", {}).get("holderIdentity") == node)


def test_a_typo_is_reported_and_the_real_nodes_are_still_recovered(cluster, world):
    w1, w2 = world.add_nodes(workers=2)
    prefix = f"t{world.id}-slot"
    begin(cluster, w1, prefix)
    begin(cluster, w2, f"t{world.id}-other")  # a second run's slot prefix

    typo = w1.replace("worker", "wroker")
    names = f"{typo},{w1},Node_X,..,{w2}"
    recovered = playbook("recover.yml", cluster, {"nmo_nodes": names})

    assert recovered.rc != 0, "unknown names must fail the run"
    failure = recovered.last("fail")["msg"]
    assert f"Unknown node name(s), not recovered: {typo}, Node_X, .." in failure, failure
    assert "Still held" not in failure and "Failed to end" not in failure, failure
    wait_clean(cluster.client, [w1, w2])
    assert maintenance_of(cluster.client, w1) is None and maintenance_of(cluster.client, w2) is None
    # no inventory, no prefix given: the slots were found by their label, whatever their prefix
    assert slots_held_by(cluster, w1) == [] and slots_held_by(cluster, w2) == []
    assert leases_naming(cluster.client, [w1, w2], f"t{world.id}-") == []


def test_a_custom_slot_prefix_is_accepted_and_a_slot_it_cannot_release_is_reported(cluster, world):
    w1, w2 = world.add_nodes(workers=2)
    custom = f"t{world.id}-custom"
    begin(cluster, w1, custom)
    begin(cluster, w2, f"t{world.id}-elsewhere")

    given = playbook("recover.yml", cluster, {"nmo_nodes": w1, "node_maintenance_slot_prefix": custom})
    assert given.rc == 0, given.stdout[-3000:]
    wait_clean(cluster.client, [w1])
    assert slots_held_by(cluster, w1) == [] and maintenance_of(cluster.client, w1) is None

    # the prefix given is not the one w2's slot has: the node is ended, the slot named as left
    other = playbook("recover.yml", cluster, {"nmo_nodes": w2, "node_maintenance_slot_prefix": custom})
    assert other.rc != 0, "a slot left held must fail the run"
    failure = other.last("fail")["msg"]
    assert f"{w2}: lease t{world.id}-elsewhere-0 (holder {w2})" in failure, failure
    assert slots_held_by(cluster, w2) == [f"t{world.id}-elsewhere-0"]
    assert maintenance_of(cluster.client, w2) is None and node_clean(cluster.client, w2) is None

    # without a prefix, the slot is found by its label and released
    again = playbook("recover.yml", cluster, {"nmo_nodes": w2})
    assert again.rc == 0, again.stdout[-3000:]
    assert slots_held_by(cluster, w2) == []


def test_status_names_the_unknown_nodes_and_shows_the_others(cluster, world):
    (w1,) = world.add_nodes(workers=1)
    typo = w1 + "x"
    status = playbook("status.yml", cluster, {"nmo_nodes": f"{w1},{typo}"})
    assert status.rc != 0
    assert f"Unknown node name(s): {typo}" in status.stdout
    assert f"{w1}  Ready" in status.stdout, "the known node's table is shown"
    assert status.last("fail")["msg"] == f"Unknown node name(s), no such node in the cluster: {typo}"


# -- issue 32, item 5: what no live run holds, what is not ours, and a quarantine ----------------------
BLOCKER = "drain: the PodDisruptionBudget web allows no eviction"


def options(world: Any, node: str, run_id: str = "") -> lifecycle.Options:
    # room for every node at once: the slots are not what is tested here
    return lifecycle.Options(node=node, run_id=run_id,
                             lease=disruption.Request(node=node, slot_prefix=slot_prefix(world), concurrency=10))


def pending(cluster: Any, node: str, run_id: str) -> None:
    """A begin of run ``run_id`` that made its NodeMaintenance and then waited for a place."""
    nm, _created = maintenance.ensure(cluster.client, node, "waits for a place", run_id=run_id)
    maintenance.update_status(cluster.client, nm, {"phase": "Pending", "lastError": "waiting for a place"})


def quarantined(cluster: Any, world: Any, node: str) -> None:
    """The node as the rollout's quarantine leaves it: begun (cordoned, tainted, our marks), its
    NodeMaintenance ended and its leases released, the quarantine's label and annotation on it."""
    lifecycle.begin(cluster.client, options(world, node))
    maintenance.delete(cluster.client, maintenance_of(cluster.client, node))
    disruption.release(cluster.client, disruption.Request(node=node, slot_prefix=slot_prefix(world)))
    cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {QUARANTINED: "true"},
                                                                "annotations": {QUARANTINED: BLOCKER}}}, "merge")


def held_for(client: Any, nodes: List[str]) -> List[str]:
    """The node leases of ``nodes`` and the leases (slots) they hold, whatever the prefix."""
    return [text for text in leases_naming(client, nodes, prefix="/")  # no lease name starts with '/'
            if any(f"node-{n} " in text or text.endswith(f"(holder {n})") for n in nodes)]


def cordoned(cluster: Any, node: str) -> bool:
    return bool(cluster.client.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"))


@pytest.mark.usefixtures("crd_installed")
def test_recover_ends_what_no_live_run_holds_and_never_what_is_not_ours(cluster, world):
    """Without names: a Failed NodeMaintenance (node cordoned, tainted, leases held) and two
    Pending ones (one on a node an administrator had cordoned) of a run that is gone are ended,
    a maintenance of a live run and a quarantined node are listed and left (check mode first:
    nothing written). Named: a quarantine is lifted (uncordoned, or left cordoned when it was
    before), a node with no maintenance of ours is left as it is, also one whose administrator's
    cordon an ended maintenance kept; a second run has nothing to do."""
    failed, waiting, admins_waiting, live, q_free, q_cordoned, ended, plain = world.add_nodes(workers=8)
    dead_run, live_run = f"t{world.id}-dead", f"t{world.id}-live"
    client = cluster.client
    runs.start(client, dead_run, "test-recover")
    lifecycle.begin(client, options(world, failed, dead_run))
    record = {"phase": "Failed", "lastError": "firmware flash failed"}
    maintenance.update_status(client, maintenance_of(client, failed), record)
    world.cordon(admins_waiting)
    pending(cluster, waiting, dead_run)
    pending(cluster, admins_waiting, dead_run)
    runs.stop(client, dead_run)
    runs.start(client, live_run, "test-recover", duration=900)
    try:
        lifecycle.begin(client, options(world, live, live_run))
        quarantined(cluster, world, q_free)
        world.cordon(q_cordoned)
        quarantined(cluster, world, q_cordoned)
        world.cordon(ended)
        lifecycle.begin(client, options(world, ended))
        lifecycle.end(client, options(world, ended))  # it kept the administrator's cordon, and said so
        assert cordoned(cluster, ended) and CORDONED_BEFORE not in client.get(f"/api/v1/nodes/{ended}")[
            "metadata"].get("annotations", {})

        dry = playbook("recover.yml", cluster, check=True)
        assert dry.rc == 0, dry.stdout[-3000:]
        would = dry.last("nmo_recover")["recovered"]
        assert {failed, waiting, admins_waiting} <= set(would) and not {live, q_free} & set(would), would
        assert all(maintenance_of(client, n) for n in (failed, waiting, admins_waiting)), "check mode wrote"
        assert node_clean(client, failed) is not None

        unnamed = playbook("recover.yml", cluster)
        assert unnamed.rc == 0, unnamed.stdout[-3000:]
        said = unnamed.last("nmo_recover")["said"]
        assert f"{failed}: maintenance ended (its NodeMaintenance {maintenance.default_name(failed)} (Failed) is of " \
               f"run {dead_run}, which is gone)" in said, said
        assert (f"{live}: in maintenance by run {live_run}, which is alive (its run lease is being renewed): left to "
                "that run") in said
        assert f"{q_free}: quarantined ({BLOCKER}): left out of service; playbooks/recover.yml -e nmo_nodes={q_free} " \
               "lifts the quarantine" in said
        assert not any(line.startswith((f"{ended}:", f"{plain}:")) for line in said), "not ours: not looked at"
        assert all(maintenance_of(client, n) is None for n in (failed, waiting, admins_waiting))
        wait_clean(client, [failed])
        assert held_for(client, [failed, waiting, admins_waiting]) == []
        assert cordoned(cluster, admins_waiting), "a begin that never cordoned lifted the administrator's cordon"
        assert maintenance_of(client, live) is not None and cordoned(cluster, live), "a live run's node was ended"
        assert cordoned(cluster, q_free), "a quarantine was lifted without being named"

        names = f"{q_free},{q_cordoned},{ended},{plain}"
        named = playbook("recover.yml", cluster, {"nmo_nodes": names})
        assert named.rc == 0, named.stdout[-3000:]
        said = named.last("nmo_recover")["said"]
        assert f"{q_free}: quarantine lifted ({BLOCKER}); uncordoned" in said, said
        assert (f"{q_cordoned}: quarantine lifted ({BLOCKER}); node {q_cordoned} was cordoned before the maintenance "
                "began: left cordoned") in said
        assert f"{ended}: no maintenance of nmo.maintenance, left as it is (its cordon is not ours)" in said
        assert f"{plain}: no maintenance of nmo.maintenance, left as it is" in said
        wait_clean(client, [q_free])
        for node in (q_free, q_cordoned):
            meta = client.get(f"/api/v1/nodes/{node}")["metadata"]
            assert QUARANTINED not in meta.get("labels", {}) and QUARANTINED not in meta.get("annotations", {}), meta
        assert cordoned(cluster, q_cordoned) and cordoned(cluster, ended), "a cordon that was not ours was lifted"

        again = playbook("recover.yml", cluster, {"nmo_nodes": names})
        assert again.rc == 0 and not again.last("nmo_recover")["changed"], again.stdout[-3000:]
        assert again.last("nmo_recover")["recovered"] == []
    finally:
        runs.stop(client, live_run)


def test_a_run_that_has_just_ended_here_is_gone_to_recover_started_at_once(cluster, world):
    """recover.yml run the instant a failed run ended, as its last line says: the run's
    ansible-playbook is gone but its heartbeat has not yet deleted its run lease. Recover takes
    that run for what it is, ending (workflows/ending_runs.py): it waits for the delete, then
    ends the node's maintenance, instead of refusing a run "which is alive"."""
    (node,) = world.add_nodes(workers=1)
    client = cluster.client
    ended_run = f"t{world.id}-ended"
    dead = subprocess.Popen(["true"])  # a process of this machine that ran and is reaped
    dead.wait()
    # its run lease names that process as its controller (host/pid/start), on this boot, and
    # its heartbeat (here: this test's own process, which deletes the lease below) still runs
    runs.start(client, ended_run, f"{socket.gethostname()}/{dead.pid}/1", boot=leftovers.boot_id())
    lease_path = f"{LEASES}/{runs.lease_name(ended_run)}"
    # the record whole, as the heartbeat writes it: another run's start on this machine (the side
    # lane's, a soak's) removes a record without this boot and leaves one of another API server
    leftovers.write_record({"run": ended_run, "server": client.host, "host": socket.gethostname(),
                            "boot": leftovers.boot_id(), "anchor": [dead.pid, 1],
                            "beat": [os.getpid(), leftovers.read_proc(os.getpid()).start]})
    lifecycle.begin(client, options(world, node, ended_run))
    maintenance.update_status(client, maintenance_of(client, node), {"phase": "Failed", "lastError": "flash failed"})

    # with nobody to delete it, the wait ends by its timeout and the lease is left to lapse
    _seen, waited = ending_runs.settle(client, timeout=0.5)
    assert ended_run in waited and client.get_or_none(lease_path) is not None

    # the heartbeat's delete comes once recover.yml has read the leases (then recover waits)
    audit = AuditLog(cluster)

    def heartbeat() -> None:
        wait_for(lambda: any(e.get("verb") == "list" and (e.get("objectRef") or {}).get("resource") == "leases"
                             and e.get("userAgent", "").startswith("nmo.maintenance") for e in audit.entries()),
                 120, "recover.yml to list the leases")
        client.delete(lease_path)

    deleter = threading.Thread(target=heartbeat, daemon=True)
    deleter.start()
    recovered = playbook("recover.yml", cluster, {"nmo_nodes": node})
    deleter.join(10)
    assert recovered.rc == 0, recovered.stdout[-3000:]
    said = recovered.last("nmo_recover")["said"]
    assert any(line.startswith(f"{node}: maintenance ended") and f"run {ended_run}, which is gone" in line
               for line in said), said
    assert maintenance_of(client, node) is None
    wait_clean(client, [node])
    leftovers.remove_record(ended_run)
