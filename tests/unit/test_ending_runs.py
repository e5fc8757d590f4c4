"""A run of this controller whose ansible-playbook is gone is ending, not alive
(workflows/ending_runs.py), and the heartbeat sees its controller go at once
(workflows/leftovers.py exit_waiter, anchor_runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import ending_runs, leftovers, run

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=timezone.utc)
HOST, BOOT = "controller-1", "boot-a"


def run_lease(run_id: str, controller: str, boot: str = BOOT, renewed: datetime = NOW) -> leases.Lease:
    return {"metadata": {"name": run.lease_name(run_id),
                         "annotations": {run.CONTROLLER_ANNOTATION: controller, run.BOOT_ANNOTATION: boot}},
            "spec": {"holderIdentity": "nmo.maintenance", "leaseDurationSeconds": 60,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def test_the_controller_annotation_is_read_back() -> None:
    assert ending_runs.controller_of(run_lease("r", "controller-1/4242/987")) == ("controller-1", 4242, 987)
    assert ending_runs.controller_of(run_lease("r", "")) is None
    assert ending_runs.controller_of(run_lease("r", "host/notapid/1")) is None
    assert ending_runs.controller_of(run_lease("r", "4242/987")) is None


def test_only_a_valid_lease_of_this_machine_whose_process_is_gone_and_heartbeat_runs_is_ending() -> None:
    gone = {(100, 5)}  # the process 100 started at tick 5 no longer runs

    def running(pid: int, start: int) -> bool:
        return (pid, start) not in gone

    seen = [
        run_lease("ended", f"{HOST}/100/5"),  # its ansible-playbook is gone: ending
        run_lease("live", f"{HOST}/200/6"),  # its ansible-playbook runs
        run_lease("elsewhere", "controller-2/100/5"),  # another machine's: never judged from here
        run_lease("rebooted", f"{HOST}/100/5", boot="boot-b"),  # another boot of this host
        run_lease("lapsed", f"{HOST}/100/5", renewed=NOW - timedelta(minutes=5)),  # gone already
        run_lease("old", ""),  # an older release's lease says no controller: alive
        {"metadata": {"name": "node-w1", "annotations": {}}, "spec": {}},  # not a run lease
    ]
    seen.append(run_lease("killed", f"{HOST}/100/5"))  # its heartbeat was killed with it: nothing deletes it

    def beating(run_id: str) -> bool:
        return run_id != "killed"

    assert ending_runs.ending_here(seen, NOW, HOST, BOOT, running, beating) == [run.lease_name("ended")]
    assert ending_runs.ending_here(seen, NOW, HOST, "", running, beating) == [], "no boot id here: nothing is told"


def test_a_zombie_does_not_run_and_an_exit_ends_the_pause_at_once() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = leftovers.read_proc(child.pid).start
        assert leftovers.anchor_runs(child.pid, start)
        assert not leftovers.anchor_runs(child.pid, start + 1), "another process's start: not this one"
        pause = leftovers.exit_waiter(child.pid)
        began = time.monotonic()
        pause(0.05)  # still running: the whole pause
        assert time.monotonic() - began >= 0.04
        child.stdin.close()  # it exits; not reaped yet, so a zombie
        began = time.monotonic()
        pause(30)
        assert time.monotonic() - began < 10, "the pause outlived the process it waits on"
        assert leftovers.read_proc(child.pid) is not None, "reaped already: the zombie case is not tested"
        assert not leftovers.anchor_runs(child.pid, start), "an exited, unreaped process counts as running"
    finally:
        child.wait()
    assert not leftovers.anchor_runs(child.pid, start)


def test_the_heartbeat_is_known_from_the_users_record_of_the_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(leftovers, "folder", lambda: str(tmp_path))
    me = leftovers.read_proc(os.getpid())
    leftovers.write_record({"run": "beating", "beat": [os.getpid(), me.start]})
    leftovers.write_record({"run": "stale", "beat": [os.getpid(), me.start + 1]})  # a PID used again
    leftovers.write_record({"run": "older", "anchor": [1, 1]})  # a record of an older release: no beat
    assert leftovers.beats("beating")
    assert not leftovers.beats("stale") and not leftovers.beats("older") and not leftovers.beats("none")
