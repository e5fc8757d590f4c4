"""Run identity against the local control plane: overlapping runs, killed controllers, long hooks.

Every playbook runs as the least-privilege user. A run's hook tells the test where it is by
writing a file, and waits for a file the test writes: the test never sleeps to synchronise.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
from topology import wait_for

from .maintenance_support import (
    LEASES,
    NodeRecorder,
    Run,
    leases_naming,
    maintenance_of,
    nm_name,
    node_clean,
    reasons_of,
    run,
    run_of,
    slot_prefix,
    wait_clean,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


# -- hooks that report where they are and wait for the test ----------------------------------------
GATED_HOOK = """\
- name: Tell the test this run is in its work hook
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ test_run }}-{{ inventory_hostname }}.start"
    content: "{{ now().timestamp() }}"
    mode: "0644"
- name: Work until the test releases the node
  ansible.builtin.wait_for:
    path: "{{ test_dir }}/release-{{ inventory_hostname }}"
    timeout: 300
- name: Tell the test the work is over
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ test_run }}-{{ inventory_hostname }}.end"
    content: "{{ now().timestamp() }}"
    mode: "0644"
"""

TIMED_HOOK = """\
- name: Work begins
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ test_run }}-{{ inventory_hostname }}.start"
    content: "{{ now().timestamp() }}"
    mode: "0644"
- name: The work takes a moment (it is the work, not a wait for something)
  ansible.builtin.pause:
    seconds: 2
- name: Work ends
  ansible.builtin.copy:
    dest: "{{ test_dir }}/{{ test_run }}-{{ inventory_hostname }}.end"
    content: "{{ now().timestamp() }}"
    mode: "0644"
"""

FAILING_HOOK = """\
- name: The firmware update fails in the first run only
  ansible.builtin.fail:
    msg: firmware update failed
  when: test_fail | default(false) | bool
"""


def hook_file(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def hook_vars(tmp_path: Path, run_name: str, **more) -> Dict:
    return {"test_dir": str(tmp_path), "test_run": run_name, **more}


def hook_intervals(tmp_path: Path) -> List[Tuple[str, float, float]]:
    """(node, start, end) of every hook run that finished, from the files the hooks wrote."""
    found = []
    for start in tmp_path.glob("*.start"):
        end = start.with_suffix(".end")
        if end.exists():
            node = start.stem.split("-", 1)[1]
            found.append((node, float(start.read_text()), float(end.read_text())))
    return found


class TimedNodeRecorder(NodeRecorder):
    """NodeRecorder with the time of each change, to ask what was true during a hook."""

    def __init__(self, client, world) -> None:
        super().__init__(client, world)
        self.stamped: List[Tuple[float, set]] = []

    def _look(self) -> None:
        before = len(self.history)
        super()._look()
        if len(self.history) != before:
            self.stamped.append((time.time(), set(self.history[-1])))

    def in_maintenance_throughout(self, node: str, start: float, end: float) -> bool:
        states = [s for t, s in self.stamped if t <= start][-1:] + [s for t, s in self.stamped if start < t <= end]
        return bool(states) and all(node in s for s in states)


def run_lease_of(cluster, run_id: str) -> Optional[dict]:
    return cluster.client.get_or_none(f"{LEASES}/nmo-run-{run_id}")


# -- overlapping runs ------------------------------------------------------------------------------
def test_a_second_run_leaves_a_live_maintenance_to_its_run(cluster, world, user, tmp_path):
    world.add_nodes(workers=2)
    _w1, w2 = world.workers
    world.deployment("web", 2)
    gated = hook_file(tmp_path, "gated.yml", GATED_HOOK)
    inventory = write_inventory(world, tmp_path)

    with TimedNodeRecorder(cluster.client, world) as nodes:
        first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w2],
                    extra_vars={"node_maintenance_hooks_work": [gated], **hook_vars(tmp_path, "a")})
        try:
            wait_for((tmp_path / f"a-{w2}.start").exists, 180, "run A in its work hook")
            run_a = run_of(cluster.client, w2)
            assert run_a and run_lease_of(cluster, run_a), "run A holds the NodeMaintenance and its run lease"

            second = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w2],
                         extra_vars={"node_maintenance_hooks_work": [gated], **hook_vars(tmp_path, "b")})
            assert second.proc.returncode == 0, second.output[-4000:]
            assert f"is in maintenance by run {run_a}, which is alive" in second.output, second.output[-3000:]
            assert not (tmp_path / f"b-{w2}.start").exists(), "run B ran its hook on a node it does not hold"
            summary = [r for r in second.records() if r["task"].endswith("Summary | Per-node result")]
            assert "skipped (in maintenance by run" in str(summary), summary
            assert node_clean(cluster.client, w2) is not None, "run B ended run A's maintenance"
            assert run_of(cluster.client, w2) == run_a, "run B adopted run A's NodeMaintenance"
            assert "ResumeMaintenance" not in reasons_of(cluster.client, nm_name(w2))

            (tmp_path / f"release-{w2}").touch()
            assert first.wait() == 0, first.output[-4000:]
        finally:
            if first.proc.poll() is None:
                first.kill()
            first.close()
    assert nodes.order == [w2] and len([s for s in nodes.history if w2 in s]) == 1, \
        f"worker-02 left maintenance and came back: {nodes.history}"
    (start_a, end_a), = [(s, e) for n, s, e in hook_intervals(tmp_path) if n == w2]
    assert nodes.in_maintenance_throughout(w2, start_a, end_a), nodes.stamped
    wait_clean(cluster.client, world.nodes)
    assert maintenance_of(cluster.client, w2) is None
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []
    wait_run_gone(cluster.client, run_a, 10)  # its heartbeat ends with ansible-playbook


def test_overlapping_groups_share_the_slots_and_never_adopt(cluster, world, user, tmp_path):
    """Run A on workers 1-3 and run B on workers 2-4, started together, concurrency 1 across
    both: never two nodes at once, every node in maintenance during every hook that ran on
    it, nothing adopted from a live run, nothing left behind."""
    world.add_nodes(workers=4)
    w1, w2, w3, w4 = world.workers
    world.deployment("web", 4)
    world.pdb("web", "web", max_unavailable=1)
    timed = hook_file(tmp_path, "timed.yml", TIMED_HOOK)
    inventory = write_inventory(world, tmp_path)

    with TimedNodeRecorder(cluster.client, world) as nodes:
        runs = [Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", ",".join(group)],
                    extra_vars={"node_maintenance_hooks_work": [timed], **hook_vars(tmp_path, name)})
                for name, group in (("a", [w1, w2, w3]), ("b", [w2, w3, w4]))]
        try:
            codes = [r.wait() for r in runs]
            outputs = [r.output for r in runs]
        finally:
            for r in runs:
                if r.proc.poll() is None:
                    r.kill()
                r.close()
    assert codes == [0, 0], "\n\n".join(o[-3000:] for o in outputs)
    assert nodes.most_at_once == 1, f"more than one node at once: {nodes.history}"
    intervals = hook_intervals(tmp_path)
    assert {interval[0] for interval in intervals} == {w1, w2, w3, w4}, intervals
    for node, start, end in intervals:
        assert nodes.in_maintenance_throughout(node, start, end), (node, start, end, nodes.stamped)
    for node in world.workers:
        assert "ResumeMaintenance" not in reasons_of(cluster.client, nm_name(node)), f"{node} was adopted"
    wait_clean(cluster.client, world.nodes)
    assert [n for n in world.nodes if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, world.nodes, slot_prefix(world)) == []


def test_a_long_hook_keeps_its_leases(cluster, world, user, tmp_path):
    """Node lease and slot of 30 s; the hook lasts until both were renewed by the run's
    heartbeat, and they never lapsed."""
    world.add_nodes(workers=1)
    (w1,) = world.workers
    gated = hook_file(tmp_path, "gated.yml", GATED_HOOK)
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_duration=30)
    lease_path = f"{LEASES}/node-{w1}"
    playbook = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1],
                   extra_vars={"node_maintenance_hooks_work": [gated], **hook_vars(tmp_path, "a")})
    try:
        wait_for((tmp_path / f"a-{w1}.start").exists, 180, "the run in its work hook")
        first = cluster.client.get(lease_path)["spec"]
        slot = f"{LEASES}/{slot_prefix(world)}-0"
        first_slot = cluster.client.get(slot)["spec"]
        wait_for(lambda: cluster.client.get(lease_path)["spec"]["renewTime"] != first["renewTime"]
                 and cluster.client.get(slot)["spec"]["renewTime"] != first_slot["renewTime"], 45,
                 "the heartbeat to renew the node lease and the slot")
        renewed = cluster.client.get(lease_path)["spec"]
        assert renewed["holderIdentity"] == "nmo.maintenance" and renewed["acquireTime"] == first["acquireTime"]
        assert renewed["leaseTransitions"] == first["leaseTransitions"], "renewed, not taken over"
        (tmp_path / f"release-{w1}").touch()
        assert playbook.wait() == 0, playbook.output[-3000:]
    finally:
        if playbook.proc.poll() is None:
            playbook.kill()
        playbook.close()
    wait_clean(cluster.client, [w1])
    assert cluster.client.get_or_none(lease_path) is None


# -- a killed controller -----------------------------------------------------------------------------
def session_processes(pgid: int) -> List[int]:
    """PIDs of the processes of process group ``pgid`` (the killed run's workers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def run_leases_of_pid(cluster, pid: int) -> List[str]:
    items = (cluster.client.get_or_none(LEASES) or {}).get("items", [])
    return [lease["metadata"]["name"] for lease in items if lease["metadata"]["name"].startswith("nmo-run-")
            and f"/{pid}/" in (lease["metadata"].get("annotations") or {}).get("nmo.maintenance/controller", "")]


def processes_of(inventory: str) -> List[int]:
    """PIDs of the live processes whose command line names ``inventory``: ansible-playbook,
    its workers, and the run's heartbeat, which all share its command line."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            continue
        if str(inventory) in cmdline and state != "Z":
            found.append(int(entry))
    return found


# point: (task to kill at, world set-up, whether the run's own workers may be left waiting in a hook)
KILL_POINTS = {
    "run start": "Run | Start this run",
    "state read": "Read the maintenance state of every node",
    "preflight": "Preflight | What would block the maintenance",
    "slot wait": "Begin | NodeMaintenance, leases and etcd guard",
    "drain": "Drain | Evict the pods",
    "work hook": "Hooks | Run on the node the hooks of phase work",
    "gate": "Gate | Attempts",
    "end": "End | Uncordon",
    "failure and rollback": "Failed | Record it on the NodeMaintenance, then roll back or keep",
}


@pytest.mark.parametrize("point", list(KILL_POINTS))
def test_sigkill_of_ansible_playbook_leaves_no_writer_and_a_rerun_finishes(cluster, world, user, tmp_path, point):
    world.add_nodes(workers=2)
    w1, w2 = world.workers
    extra: Dict = {**hook_vars(tmp_path, "a")}
    gated = hook_file(tmp_path, "gated.yml", GATED_HOOK)
    prefix = slot_prefix(world)
    blocker = None
    if point == "slot wait":  # another node holds the only slot
        blocker = cluster.client.post(LEASES, {
            "metadata": {"name": f"{prefix}-0", "namespace": "medik8s-leases"},
            "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600,
                     "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 5))}})
    if point == "drain":
        world.vm("vm-blocked", node=w1)  # a PDB that refuses until the test relaxes it
        extra["node_maintenance_preflight"] = "warn"
    if point == "work hook":
        extra["node_maintenance_hooks_work"] = [gated]
    if point == "gate":
        extra["node_maintenance_gate"] = gated
    if point == "failure and rollback":
        extra["node_maintenance_hooks_work"] = [hook_file(tmp_path, "failing.yml", FAILING_HOOK)]
        extra["test_fail"] = True
    inventory = write_inventory(world, tmp_path, node_maintenance_lease_timeout=300)

    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", w1], extra_vars=extra)
    pid = first.proc.pid
    in_hook = point in ("work hook", "gate")
    try:
        marker = f"TASK [nmo.maintenance.node_maintenance : {KILL_POINTS[point]}" if point not in (
            "state read",) else f"TASK [{KILL_POINTS[point]}"
        if in_hook:
            wait_for((tmp_path / f"a-{w1}.start").exists, 180, f"the run at its {point}")
        else:
            wait_for(lambda: marker in first.output or first.proc.poll() is not None, 180, f"the run at {point}")
            assert first.proc.poll() is None, f"the run ended before {point}:\n{first.output[-3000:]}"
        if point == "slot wait":
            wait_for(lambda: "BlockedByNodeHealthCheck" in reasons_of(cluster.client, nm_name(w1)), 60,
                     "the run waiting for the slot")
        if point == "drain":
            wait_for(lambda: "DrainError" in reasons_of(cluster.client, nm_name(w1)), 60, "the drain refused")
        os.kill(pid, signal.SIGKILL)  # ansible-playbook alone: its workers live on, as they do
        first.wait()

        wait_for(lambda: run_leases_of_pid(cluster, pid) == [], 30, "the heartbeat to end the killed run")
        if not in_hook:
            wait_for(lambda: session_processes(pid) == [], 60,
                     f"every worker of the killed run to exit: {session_processes(pid)}")
            # the heartbeat left the session (setsid): found by the command line it shares
            wait_for(lambda: processes_of(inventory) == [], 30,
                     f"the killed run's heartbeat to exit: {processes_of(inventory)}")
        before = (node_clean(cluster.client, w1), sorted(leases_naming(cluster.client, [w1], prefix)))
        # What the rerun finds to adopt. Killed at the end, the worker may have passed its one
        # liveness check before the kill and finished the end: then nothing is left to adopt.
        left_for_rerun = maintenance_of(cluster.client, w1) is not None
        if blocker is not None:  # what a leftover waiting for the slot would now take
            cluster.client.delete(f"{LEASES}/{prefix}-0")
            before = (before[0], [name for name in before[1] if "someone-else" not in name])
        if point == "drain":
            cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/"
                                 "kubevirt-disruption-budget-vm-blocked", {"spec": {"minAvailable": 0}}, "merge")
        if in_hook:
            (tmp_path / f"release-{w1}").touch()
        if not in_hook:
            # no leftover took the freed slot or evicted the VM's pod
            assert (node_clean(cluster.client, w1), sorted(leases_naming(cluster.client, [w1], prefix))) == before
            if point == "drain":
                assert world.pods(node=w1, namespace=world.namespace), "a leftover evicted after the kill"
    finally:
        if first.proc.poll() is None:
            first.kill()
        try:
            os.killpg(pid, signal.SIGKILL)  # what is left in a hook (Ansible's own modules)
        except ProcessLookupError:
            pass
        first.close()

    for node in (w1, w2):  # the rerun's hooks and gate go straight through
        (tmp_path / f"release-{node}").touch()
    again = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                extra_vars={**extra, "test_fail": False, "test_run": "b"})
    assert again.proc.returncode == 0, again.output[-4000:]
    wait_clean(cluster.client, [w1, w2])
    assert [n for n in (w1, w2) if maintenance_of(cluster.client, n)] == []
    assert leases_naming(cluster.client, [w1, w2], prefix) == []
    if left_for_rerun:
        assert "ResumeMaintenance" in reasons_of(cluster.client, nm_name(w1)), "the rerun did not say it adopted"
