"""Every input checked before the first write, and leases that cannot lapse under a live run
(issue 23, cases 2 and 7 and the window).

Refusals are asserted against the cluster and the API server's audit log: the refused run
wrote nothing at all (no NodeMaintenance, no lease, not even its run lease; the node as it
was). The heartbeat tests run a real work hook that waits for a file the test writes.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, List

import pytest
from helpers import run_module
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases, renewal, times

from .maintenance_support import (
    LEASES,
    AuditLog,
    NodeRecorder,
    Run,
    maintenance_of,
    nm_name,
    reasons_of,
    run,
    run_of,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .test_bad_input import snapshot

pytestmark = [pytest.mark.cluster]

GATED_HOOK = """\
- name: Tell the test this run is in its work hook
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ inventory_hostname }}.start"
    content: "{{ now().timestamp() }}"
    mode: "0644"
- name: Work until the test releases the node
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/release-{{ inventory_hostname }}"
    timeout: 600
"""


def writes_of(audit: AuditLog, user: str) -> List[Any]:
    """What ``user`` wrote since ``audit`` began, but for the heartbeat of an earlier test's
    run, which deletes its run lease a moment after that run is over."""
    writes = [(e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("name"))
              for e in audit.settled().writes_of(user)]
    return [w for w in writes if not (w[0] == "delete" and (w[2] or "").startswith("nmo-run-"))]


def refused_before_any_write(cluster: Any, user: Any, world: Any, tmp_path: Path, extra: Dict[str, Any],
                             playbook: str = "maintenance.yml") -> Run:
    """Run ``playbook`` with ``extra``; it must fail, and write nothing (audit log, cluster)."""
    nodes = world.nodes
    inventory = write_inventory(world, tmp_path)
    before = snapshot(cluster.client, nodes)
    audit = AuditLog(cluster)
    args = ["-l", nodes[0]] if playbook == "maintenance.yml" else []
    result = run(playbook, inventory, user.kubeconfig, args=args, extra_vars=extra)
    assert result.proc.returncode != 0, result.output[-3000:]
    writes = writes_of(audit, user.name)
    assert writes == [], f"refused input, yet written: {writes}"
    assert snapshot(cluster.client, nodes) == before, "bad input changed the cluster"
    assert all(maintenance_of(cluster.client, n) is None for n in nodes)
    return result


# -- case 7: a string where a list is wanted ------------------------------------------------------------
LISTS = ["node_maintenance_hooks_before_drain", "node_maintenance_hooks_work", "node_maintenance_hooks_after"]


@pytest.mark.parametrize("shape, given", [("string", "a string was given"), ("dict", "a dict was given")])
def test_a_list_option_given_as_a_string_or_a_dict_is_refused_before_any_write(
        cluster, user, world, tmp_path, shape, given):
    """The issue's case: node_maintenance_hooks_work as a string passed the argument spec and
    the file check, and the node was cordoned and drained before the loop failed."""
    world.add_nodes(workers=1)
    world.deployment("web", 3)
    hook = tmp_path / "flash.yml"
    hook.write_text("- name: Flash\n  ansible.builtin.debug:\n    msg: flashing\n")
    value: Any = str(hook) if shape == "string" else {"file": str(hook)}
    extra = {name: value for name in LISTS}
    if shape == "dict":
        extra["node_maintenance_gate"] = [str(hook)]  # a string option given a list
    result = refused_before_any_write(cluster, user, world, tmp_path, extra)
    for name in LISTS:
        assert f"{name}: {given}" in result.output and "a list is needed" in result.output, result.output[-3000:]
    if shape == "dict":
        assert "node_maintenance_gate: a list was given" in result.output, result.output[-3000:]
    assert "input check failed, nothing was done to the node" in result.output
    assert "must resolve to a 'list'" not in result.output


def test_recover_refuses_node_names_given_as_a_dict(cluster, user, world, tmp_path):
    world.add_nodes(workers=1)
    (node,) = world.workers
    result = refused_before_any_write(cluster, user, world, tmp_path, {"nmo_nodes": {node: True}},
                                      playbook="recover.yml")
    assert "nmo_nodes: a dict was given" in result.output and "a list is needed" in result.output, \
        result.output[-3000:]


# -- case 2: a lease shorter than the heartbeat -----------------------------------------------------------
def test_a_lease_below_the_minimum_is_refused_before_any_write(cluster, user, world, tmp_path):
    """-e node_maintenance_lease_duration=5 (a string, as -e gives it) was accepted."""
    world.add_nodes(workers=1)
    inventory = write_inventory(world, tmp_path)
    (node,) = world.workers
    before = snapshot(cluster.client, [node])
    audit = AuditLog(cluster)
    result = run("maintenance.yml", inventory, user.kubeconfig,
                 args=["-l", node, "-e", "node_maintenance_lease_duration=5"])
    assert result.proc.returncode != 0, result.output[-3000:]
    assert "node_maintenance_lease_duration: 5 is shorter than the 30 s a lease needs" in result.output, \
        result.output[-3000:]
    assert writes_of(audit, user.name) == []
    assert snapshot(cluster.client, [node]) == before
    assert [lease["metadata"]["name"] for lease in (cluster.client.get_or_none(LEASES) or {}).get("items", [])
            if node in lease["metadata"]["name"] or lease["spec"].get("holderIdentity") == node] == []


@pytest.mark.parametrize("module, args", [
    ("nmo_lease", {"duration": 5}),
    ("nmo_maintenance", {"duration": 29}),
    ("nmo_run", {"duration": 20}),
])
def test_the_modules_refuse_a_lease_below_the_minimum(cluster, world, module, args):
    world.add_nodes(workers=1)
    (node,) = world.workers
    before = snapshot(cluster.client, [node])
    audit = AuditLog(cluster)
    params = dict(args) if module == "nmo_run" else {"node": node, "slot_prefix": slot_prefix(world), **args}
    result = run_module(module, params, cluster.kubeconfig)
    assert result.get("failed"), result
    assert f"duration: {args['duration']} is shorter than the 30 s a lease needs" in result["msg"], result["msg"]
    assert writes_of(audit, "admin") == [], "refused, yet written"
    assert snapshot(cluster.client, [node]) == before


def lease_spec(cluster: Any, name: str) -> Dict[str, Any]:
    found = cluster.client.get_or_none(f"{LEASES}/{name}")
    return (found or {}).get("spec") or {}


def renewed_for(renewals: List[str]) -> float:
    """Seconds from the first renewTime seen to the last."""
    if len(renewals) < 2:
        return 0.0
    first, last = (times.parse_time(renewals[0]), times.parse_time(renewals[-1]))
    return (last - first).total_seconds() if first and last else 0.0


def test_the_heartbeat_keeps_a_minimum_lease_through_a_long_hook_against_a_second_run(
        cluster, world, user, tmp_path):
    """Node lease and slot of the shortest duration accepted (30 s); the work hook lasts until
    the slot's last renewal is a whole duration after the first one seen (about 30 s, 4 renewals
    one beat apart: a slot not renewed would have lapsed). A second run (concurrency 1, the same slot
    prefix) tries to take the slot for another node all along: it never gets it while the first
    lives, and the slot is never seen lapsed; then it takes its turn."""
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    hook = tmp_path / "gated.yml"
    hook.write_text(GATED_HOOK)
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_duration=renewal.MIN_LEASE_SECONDS)
    slot = f"{slot_prefix(world)}-0"
    renewals: List[str] = []
    lapsed: List[str] = []
    held_by: List[str] = []
    stop = threading.Event()

    def sample() -> None:  # the slot as the API server has it, each half second
        while not stop.is_set():
            spec = lease_spec(cluster, slot)
            if spec:
                held_by.append(spec.get("holderIdentity", ""))
                now = cluster.client.server_now()
                if not leases.is_valid({"spec": spec}, now) and spec.get("holderIdentity") == w1:
                    lapsed.append(f"{spec} at {now}")
                if spec.get("holderIdentity") == w1 and spec["renewTime"] not in renewals:
                    renewals.append(spec["renewTime"])
            stop.wait(0.5)

    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                extra_vars={"node_maintenance_hooks_work": [str(hook)], "test_dir": str(tmp_path)})
    second = None
    sampler = threading.Thread(target=sample, daemon=True)
    try:
        with NodeRecorder(cluster.client, world) as nodes:
            wait_for((tmp_path / f"{w1}.start").exists, 180, "the first run in its work hook")
            sampler.start()
            second = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w2],
                         extra_vars={"node_maintenance_lease_timeout": 600})
            wait_for(lambda: renewed_for(renewals) >= renewal.MIN_LEASE_SECONDS, 120,
                     "the heartbeat to renew the slot for a whole duration")
            assert len(renewals) >= 4, renewals  # one beat apart, not one late renewal
            assert second.proc.poll() is None, second.output[-3000:]
            assert set(held_by) == {w1}, f"the slot changed hands while the first run lived: {set(held_by)}"
            assert lapsed == [], f"the slot lapsed under the live run: {lapsed[:3]}"
            assert maintenance_of(cluster.client, w2) is not None  # the second run is waiting, Pending
            assert w2 not in {n for state in nodes.history for n in state}, nodes.history
            (tmp_path / f"release-{w1}").touch()
            assert first.wait(120) == 0, first.output[-3000:]
            assert second.wait(300) == 0, second.output[-3000:]
        assert nodes.most_at_once == 1, f"two nodes in maintenance at once: {nodes.history}"
        assert nodes.order == [w1, w2], nodes.history
    finally:
        stop.set()
        for proc in (first, second):
            if proc is not None and proc.proc.poll() is None:
                proc.kill()
            if proc is not None:
                proc.close()
    wait_clean(cluster.client, [w1, w2])


def test_a_slot_lost_during_the_hook_stops_the_node_before_its_next_step(cluster, world, user, tmp_path):
    """While the work hook runs, the slot goes to another node (as after a lapse another run
    takes it). The next step, the Ready wait, sees it and the node stops there: never reported
    done, with the slot named."""
    world.add_nodes(workers=1)
    (w1,) = world.workers
    hook = tmp_path / "gated.yml"
    hook.write_text(GATED_HOOK)
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_duration=renewal.MIN_LEASE_SECONDS)
    slot = f"{slot_prefix(world)}-0"
    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                extra_vars={"node_maintenance_hooks_work": [str(hook)], "test_dir": str(tmp_path)})
    try:
        wait_for((tmp_path / f"{w1}.start").exists, 180, "the run in its work hook")
        ours = cluster.client.get(f"{LEASES}/{slot}")
        cluster.client.delete(f"{LEASES}/{slot}")
        now = leases.format_time(cluster.client.server_now())
        cluster.client.post(LEASES, {"metadata": {"name": slot, "namespace": "medik8s-leases",
                                                  "labels": ours["metadata"].get("labels") or {},
                                                  "annotations": {"nmo.maintenance/run": "another-run"}},
                                     "spec": {"holderIdentity": "node-elsewhere", "leaseDurationSeconds": 3600,
                                              "acquireTime": now, "renewTime": now}})
        (tmp_path / f"release-{w1}").touch()
        rc = first.wait(180)
        assert rc != 0, first.output[-3000:]
        assert f"the maintenance slot of {w1} is gone" in first.output, first.output[-4000:]
        assert "another run may hold the slot; stopped" in first.output
        assert "SucceedMaintenance" not in reasons_of(cluster.client, nm_name(w1))
        taken = lease_spec(cluster, slot)
        assert taken.get("holderIdentity") == "node-elsewhere", "the other run's slot was touched"
    finally:
        if first.proc.poll() is None:
            first.kill()
        first.close()
        cluster.client.delete(f"{LEASES}/{slot}")
    # The node is kept out of service (its Ready wait failed). Ending it is refused while the run
    # that holds it looks alive, so wait for its heartbeat to delete its run lease first: on a
    # busy machine that comes a moment after ansible-playbook has exited.
    holder = run_of(cluster.client, w1)
    if holder:
        wait_run_gone(cluster.client, holder)
    ended = run_module("nmo_maintenance", {"node": w1, "state": "absent", "slot_prefix": slot_prefix(world)},
                       cluster.kubeconfig)
    assert not ended.get("failed"), ended.get("msg")
    wait_clean(cluster.client, [w1])


# -- the window --------------------------------------------------------------------------------------------
def test_a_window_already_over_says_so_for_each_node(cluster, user, world, tmp_path):
    world.add_nodes(workers=2)
    inventory = write_inventory(world, tmp_path)
    before = snapshot(cluster.client, world.nodes)
    ended = (datetime.now(timezone.utc) - timedelta(minutes=30)).astimezone(timezone(timedelta(hours=1)))
    given = ended.strftime("%Y-%m-%dT%H:%M:%S+01:00")
    result = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                 extra_vars={"node_maintenance_window_end": given})
    assert result.proc.returncode == 0, result.output[-3000:]
    utc = ended.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for node in world.workers:
        assert f"the window ended at {utc} (30 min ago, node_maintenance_window_end {given}): {node} not begun" \
            in " ".join(result.output.split()), result.output[-3000:]
    assert snapshot(cluster.client, world.nodes) == before


@pytest.mark.parametrize("given, wanted", [
    ("2026-11-29T18:00:00", "node_maintenance_window_end: '2026-11-29T18:00:00' has no time zone"),
    ("29.11.2026 18:00", "node_maintenance_window_end: '29.11.2026 18:00' is not a date and time in ISO 8601"),
])
def test_a_window_end_without_a_zone_or_not_iso_is_refused_before_any_write(
        cluster, user, world, tmp_path, given, wanted):
    world.add_nodes(workers=1)
    result = refused_before_any_write(cluster, user, world, tmp_path, {"node_maintenance_window_end": given})
    assert wanted in result.output, result.output[-3000:]
    assert "to_datetime" not in result.output
