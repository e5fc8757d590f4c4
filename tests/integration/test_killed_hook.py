"""A killed run's hook never overlaps the rerun's (issue 41, item 7; docs/design.md §6.4).

ansible-playbook is SIGKILLed (it alone, as `kill -9 <pid>` does) while a node's work hook runs a
long command on the controller. Before, the worker running the hook lived on (adopted by init)
and finished the flash while the rerun ran the same hook again. Now the run's heartbeat ends
what the killed run left running within seconds, says so in the NodeMaintenance, and the rerun's
hook runs alone. The hook writes a start and an end line with its shell's PID; it works until the
test writes the release file (a bounded loop: no sleep synchronises the test).
"""

from __future__ import annotations

import os
import signal
from typing import Dict, Optional

import pytest
from topology import wait_for

from .blocked_support import errors
from .maintenance_support import (
    LEASES,
    Run,
    events_of,
    maintenance_of,
    nm_name,
    wait_clean,
    wait_run_gone,
    write_inventory,
)
from .rollout_support import finished, write_hook

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

FLASH = """\
- name: The firmware flash, until the test releases it (at most 2 minutes)
  ansible.builtin.shell: |
    echo "start $$" >> {{ test_dir }}/flash.log
    n=0
    while [ ! -f {{ test_dir }}/release ] && [ $n -lt 600 ]; do sleep 0.2; n=$((n + 1)); done
    echo "end $$" >> {{ test_dir }}/flash.log
  changed_when: true
"""


def start_of(pid: int) -> Optional[str]:
    """The process's start (clock ticks after boot, /proc/PID/stat's 22nd field), None once it
    has exited (gone, or a zombie its new parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


STARTS: Dict[int, Optional[str]] = {}  # each flash's start, taken when the test first sees its PID


def alive(pid: int) -> bool:
    """Whether the flash of ``pid`` still runs: the PID alone is not enough, as a main lane's
    processes go round the PIDs (pid_max 32768) and another process may hold it by the end."""
    start = start_of(pid)
    return start is not None and start == STARTS.get(pid, start)


def flashes(tmp_path) -> list:
    path = tmp_path / "flash.log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def flash_and_kill(user, inventory, tmp_path, run_id, hooks, heartbeat_too=False) -> int:
    """Run the playbook until the flash starts, then SIGKILL ansible-playbook alone (and its
    heartbeat first when asked): its workers are left as they are. The flash's shell PID."""
    proc = Run("maintenance.yml", inventory, user.kubeconfig, extra_vars={"node_maintenance_run_id": run_id, **hooks})
    try:
        wait_for(lambda: proc.proc.poll() is not None or any(f[0] == "start" for f in flashes(tmp_path)), 180,
                 "the flash to start")
        assert proc.proc.poll() is None, errors(proc.output)
        first = int(flashes(tmp_path)[0][1])
        STARTS[first] = start_of(first)  # to tell it from a later process given the same PID
        if heartbeat_too:
            os.kill(proc.last(START)["result"]["heartbeat_pid"], signal.SIGKILL)
        os.kill(proc.proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.proc.poll() is None:
            proc.kill()
        proc.close()
    return first


def world_with_flash(world, tmp_path):
    node = world.add_nodes(workers=1)[0]
    hooks = {"node_maintenance_hooks_work": [write_hook(tmp_path, "work.yml", FLASH)], "test_dir": str(tmp_path),
             "node_maintenance_lease_timeout": 120}
    return node, write_inventory(world, tmp_path), hooks


def test_a_killed_runs_hook_is_ended_before_the_rerun_runs_it_again(cluster, world, user, tmp_path):
    node, inventory, hooks = world_with_flash(world, tmp_path)
    killed = f"k{world.id}"
    first = flash_and_kill(user, inventory, tmp_path, killed, hooks)
    # the heartbeat ends what the killed run left running, and says so on the NodeMaintenance
    wait_for(lambda: not alive(first), 30, f"the killed run's flash (PID {first}) to be ended")
    told = f"run {killed}: ansible-playbook is gone; what it left running on the controller was ended"
    wait_for(lambda: told in ((maintenance_of(cluster.client, node) or {}).get("status") or {}).get("lastError", ""),
             30, "the NodeMaintenance to say so")
    assert ["end", str(first)] not in flashes(tmp_path)
    wait_run_gone(cluster.client, killed)
    # ... and in an event of the node's story, naming the flash's shell
    (event,) = events_of(cluster.client, nm_name(node), "LeftoverEnded")
    assert event["type"] == "Warning" and f"PID {first} (/bin/sh -c" in event["message"], event["message"]

    (tmp_path / "release").touch()
    again = Run("maintenance.yml", inventory, user.kubeconfig,
                extra_vars={"node_maintenance_run_id": f"r{world.id}", **hooks})
    assert finished(again, 300) == 0, errors(again.output)
    wait_clean(cluster.client, [node])
    lines = flashes(tmp_path)
    second = int(lines[1][1])
    assert lines == [["start", str(first)], ["start", str(second)], ["end", str(second)]], lines
    # the rerun says, at its start, what the killed run left and who ended it
    said = " ".join(again.output.split())  # a warning is wrapped to the terminal's width
    assert f"{told} (" in said and "by its heartbeat (SIGTERM) before the run was released" in said, said[-3000:]


START = "Run | Start this run (id, run lease, heartbeat on the controller)"


def test_a_killed_runs_hook_whose_heartbeat_was_killed_too_is_ended_by_the_reruns_start(
        cluster, world, user, tmp_path):
    """ansible-playbook and its heartbeat both SIGKILLed (each leads a session of its own, and so
    does the worker in the hook): nothing of the killed run ends the flash. The rerun's start, on the
    same controller, ends it before any node of the rerun, and says so."""
    node, inventory, hooks = world_with_flash(world, tmp_path)
    killed = f"kh{world.id}"
    first = flash_and_kill(user, inventory, tmp_path, killed, hooks, heartbeat_too=True)
    assert alive(first), "the flash ended with ansible-playbook and its heartbeat"
    # its run lease would lapse within a minute (nobody deletes it now): gone at once
    cluster.client.delete(f"{LEASES}/nmo-run-{killed}")

    again = Run("maintenance.yml", inventory, user.kubeconfig,
                extra_vars={"node_maintenance_run_id": f"rh{world.id}", **hooks})
    try:
        wait_for(lambda: again.proc.poll() is not None or len(flashes(tmp_path)) >= 2, 180, "the rerun's flash")
        (tmp_path / "release").touch()  # every flash still running may end now
    finally:
        assert finished(again, 300) == 0, errors(again.output)
    wait_clean(cluster.client, [node])
    lines = flashes(tmp_path)
    second = int(lines[1][1])
    assert lines == [["start", str(first)], ["start", str(second)], ["end", str(second)]], lines
    assert not alive(first)
    said = " ".join(again.output.split())
    assert (f"run {killed}: ansible-playbook is gone; what it left running on the controller was ended" in said
            and "by this run's start (the run's heartbeat was gone too)" in said), said[-3000:]
