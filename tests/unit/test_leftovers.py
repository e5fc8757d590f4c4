"""What a gone run left on its controller, from /proc-like data (model/leftovers.py), and the
ending of real processes of a fake run (workflows/leftovers.py) on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leftovers as model
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import leftovers, run

PLAYBOOK = "/usr/bin/python3 /venv/bin/ansible-playbook playbooks/maintenance.yml -l w1"


def stat(pid: int, comm: str, state: str, ppid: int, pgrp: int, sid: int, start: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    # cutime cstime priority nice threads itreal starttime ...
    return f"{pid} ({comm}) {state} {ppid} {pgrp} {sid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 1000 10 0"


def proc(pid, ppid, sid, start, cmdline="", state="S", pgrp=None, comm="x"):
    parsed = model.parse_stat(stat(pid, comm, state, ppid, pgrp if pgrp is not None else sid, sid, start), cmdline)
    assert parsed is not None
    return parsed


# The table after `kill -9` of ansible-playbook 100 (started at tick 500) in a work hook:
# worker 200 (its own session, reparented to init) runs the local connection's sh 201, the
# module 202, the hook's command 203 and its sleep 204; worker 300 runs an ssh client 301 in a
# session of its own (the ssh connection's start_new_session); 400 is a rerun's worker, whose
# ansible-playbook 399 lives; 500 is someone else's shell.
TABLE = [
    proc(1, 0, 1, 1, "/sbin/init"),
    proc(200, 1, 200, 900, PLAYBOOK),
    proc(201, 200, 200, 901, "/bin/sh -c python3 AnsiballZ_command.py"),
    proc(202, 201, 200, 902, "python3 AnsiballZ_command.py"),
    proc(203, 202, 200, 903, "sh -c echo start $$ >> F; ...", comm="sh"),
    proc(204, 203, 200, 950, "sleep 0.1", comm="sleep"),
    proc(300, 1, 300, 910, PLAYBOOK),
    proc(301, 300, 301, 911, "ssh -tt node-1 /bin/sh -c ...", comm="ssh"),
    proc(399, 7, 7, 2000, PLAYBOOK),
    proc(400, 399, 400, 2001, PLAYBOOK),
    proc(500, 1, 500, 40, "bash"),
]


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for its new parent to reap it."""
    found = leftovers.read_proc(pid)
    return found is not None and found.state not in ("Z", "X")


def pids(procs):
    return [p.pid for p in procs]


def test_stat_is_parsed_whatever_the_command_name_holds() -> None:
    parsed = model.parse_stat(stat(42, "a) (b", "S", 1, 40, 41, 777))
    assert parsed is not None
    assert (parsed.pid, parsed.ppid, parsed.pgrp, parsed.sid, parsed.start) == (42, 1, 40, 41, 777)
    assert parsed.comm == "a) (b"
    assert model.parse_stat("garbage") is None and model.parse_stat("1 (x) S 1") is None


def test_the_workers_are_the_live_children_of_ansible_playbook() -> None:
    table = [proc(100, 1, 7, 500, PLAYBOOK), proc(200, 100, 200, 900, PLAYBOOK),
             proc(201, 200, 200, 901), proc(202, 100, 202, 902, state="Z")]
    assert model.children(table, 100) == [(200, 900)]


def test_a_noted_worker_leaves_its_session_and_every_descendant() -> None:
    found = model.left_over(TABLE, [(200, 900), (300, 910)])
    assert pids(found) == [200, 201, 202, 203, 204, 300, 301]  # the ssh client, in its own session, too


def test_a_recycled_pid_is_not_the_worker() -> None:
    # PID 200 is now another process (another start time), leading its own session
    table = [proc(200, 1, 200, 5000, "vim"), proc(201, 200, 200, 5001, "less")]
    assert model.left_over(table, [(200, 900)]) == []


def test_a_finished_workers_background_process_is_found_by_its_session() -> None:
    # the worker 200 exited; the hook's nohup'ed child was reparented to init, still in its session
    table = [proc(1, 0, 1, 1), proc(205, 1, 200, 960, "flash --all")]
    assert pids(model.left_over(table, [(200, 900)])) == [205]


def test_the_caller_and_zombies_are_spared() -> None:
    table = [*TABLE, proc(206, 200, 200, 970, state="Z")]
    assert pids(model.left_over(table, [(200, 900)], spare=[204])) == [200, 201, 202, 203]


def test_a_worker_forked_after_the_last_note_is_found_by_its_command_line() -> None:
    anchor = (100, 500)
    # 300 started at 910, after a note at tick 905; 200 was noted before; 400's ansible-playbook lives
    assert model.late_workers(TABLE, anchor, PLAYBOOK, 905) == [(300, 910)]
    assert model.late_workers(TABLE, anchor, PLAYBOOK, 920) == []
    assert model.late_workers(TABLE, anchor, "", 0) == []


def test_the_next_run_of_the_same_command_is_no_late_worker() -> None:
    # 600: a new ansible-playbook of the very same command, started by the same shell 7 after the
    # last note, leading its own session; 700: a late worker, a fork of the anchor (its stack)
    stack = 0x7FFC1000
    table = [proc(7, 1, 7, 40, "bash"), proc(1, 0, 1, 1, "/sbin/init"),
             proc(600, 7, 600, 930, PLAYBOOK)._replace(stack=0x7FFD2000),
             proc(700, 1, 700, 931, PLAYBOOK)._replace(stack=stack)]
    anchor = (100, 500)
    assert model.late_workers(table, anchor, PLAYBOOK, 905, anchor_stack=stack) == [(700, 931)]
    # without the stack (address randomization off): only an orphan, never a process a live one started
    assert model.late_workers(table, anchor, PLAYBOOK, 905) == [(700, 931)]
    orphan_stack_unknown = [*table[:2], proc(600, 7, 600, 930, PLAYBOOK)]
    assert model.late_workers(orphan_stack_unknown, anchor, PLAYBOOK, 905) == []


def test_the_stack_address_is_read_from_stat() -> None:
    text = stat(42, "python3", "S", 1, 42, 42, 777) + " 0 0 140736528986912 0"
    assert model.parse_stat(text).stack == 140736528986912
    assert model.parse_stat(stat(42, "python3", "S", 1, 42, 42, 777)).stack == 0


def test_still_there_needs_the_same_start() -> None:
    ended = [proc(203, 202, 200, 903), proc(204, 203, 200, 950)]
    now = [proc(203, 1, 200, 903), proc(204, 1, 204, 9999)]
    assert pids(model.still_there(now, ended)) == [203]


def test_described_briefly_with_the_worker_named() -> None:
    text = model.describe(model.left_over(TABLE, [(200, 900)]), limit=3, worker_cmdline=PLAYBOOK)
    assert text == ("Ansible worker PID 200, PID 201 (/bin/sh -c python3 AnsiballZ_command.py), "
                    "PID 202 (python3 AnsiballZ_command.py) and 2 more")
    assert model.describe([]) == "nothing"


# -- real processes: a fake ansible-playbook, its setsid worker and a hook's command -------------------
FAKE_PLAYBOOK = """
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()  # as Ansible's WorkerProcess does
    subprocess.run(["sh", "-c", 'echo start $$ >> "$0"; trap "" HUP; while :; do sleep 0.05; done', sys.argv[1]])
    os._exit(0)
while True:
    time.sleep(60)
"""


@pytest.fixture
def own_records(tmp_path, monkeypatch):
    monkeypatch.setattr(leftovers.tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path


def test_the_heartbeat_ends_what_a_killed_controller_left(own_records: Path, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    controller = subprocess.Popen([sys.executable, "-c", FAKE_PLAYBOOK, str(marks)], start_new_session=True)
    try:
        wait_for(lambda: leftovers.anchor_stack(controller.pid), 30, "the controller's stack address")
        tracker = leftovers.Tracker("r-1", controller.pid, run.process_start(controller.pid))
        wait_for(lambda: marks.exists() and tracker.note() is None and tracker.doc["workers"], 30,
                 "the fake worker in its hook")
        hook_pid = int(marks.read_text().split()[1])
        assert leftovers.read_records()[0]["workers"] == tracker.doc["workers"]
        controller.kill()  # SIGKILL: its worker lives on, reparented
        controller.wait()
        assert alive(hook_pid)
        ended = tracker.controller_gone(None)
        assert not alive(hook_pid), "the hook's command outlived the heartbeat's ending"
        assert ended["count"] == 3 and ended["sigkilled"] == 0 and not ended["still"], ended
        assert f"PID {hook_pid} (sh -c echo start" in ended["processes"]
        # the record stays for the next run, which says what was ended (no cluster needed to say it)
        (doc,) = leftovers.read_records()
        assert doc["ended"]["by"] == "its heartbeat"
        text = leftovers.sentence(doc, doc["ended"])
        assert text.startswith("run r-1: ansible-playbook is gone; what it left running on the controller was ended "
                               "(3 process(es): Ansible worker PID ")
        assert "by its heartbeat (SIGTERM) before the run was released" in text
        host = leftovers.socket.gethostname()
        assert text.endswith(f"(its controller: ansible-playbook PID {controller.pid} on {host})")
    finally:
        try:
            os.killpg(controller.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


LATE_FORK = """
import os, subprocess, sys, time
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
if os.fork() == 0:
    os.setsid()
    subprocess.run(["sh", "-c", 'echo start $$ >> "$0"; while :; do sleep 0.05; done', sys.argv[1]])
    os._exit(0)
while True:
    time.sleep(60)
"""


def test_the_heartbeat_never_ends_the_next_run_of_the_same_command(own_records: Path, tmp_path: Path) -> None:
    """A run ends and the next, the same command from the same parent, starts at once (CI's
    test_truth_drain did so): the first run's heartbeat, ending what its controller left, takes a
    worker forked after its last note for its own, but never the next ansible-playbook."""
    marks, go = tmp_path / "marks", tmp_path / "go"
    argv = [sys.executable, "-c", LATE_FORK, str(marks), str(go)]
    controller = subprocess.Popen(argv, start_new_session=True)
    following = None
    try:
        # the kernel says a new program's stack a moment after its exec: a heartbeat starts long after
        wait_for(lambda: leftovers.anchor_stack(controller.pid), 30, "the controller's stack address")
        tracker = leftovers.Tracker("r-3", controller.pid, run.process_start(controller.pid))
        assert tracker.doc["stack"] and tracker.note() is None and tracker.doc["workers"] == []
        go.touch()  # the worker is forked after the last note
        wait_for(marks.exists, 30, "the late worker in its hook")
        hook_pid = int(marks.read_text().split()[1])
        controller.kill()
        controller.wait()
        following = subprocess.Popen(argv, start_new_session=True)  # the next run, same command
        wait_for(lambda: len(marks.read_text().split()) >= 4, 30, "the next run's own worker")
        ended = tracker.controller_gone(None)
        assert not alive(hook_pid), ended
        assert following.poll() is None, "the next run was ended as a leftover of the first"
        next_hook = int(marks.read_text().split()[3])
        assert alive(next_hook) and f"PID {next_hook} " not in ended["processes"], ended
    finally:
        for p in (controller, following):
            if p is not None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        # each worker made a session of its own (as Ansible's do): the next run's lives on else
        said = marks.read_text().split() if marks.exists() else []
        for hook in said[1::2]:
            try:
                os.killpg(os.getpgid(int(hook)), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if following is not None:
            following.wait()


def test_a_process_that_ignores_sigterm_gets_sigkill(tmp_path: Path) -> None:
    stubborn = subprocess.Popen(["sh", "-c", 'trap "" TERM; echo up > "$0"; while :; do sleep 0.05; done',
                                 str(tmp_path / "up")], start_new_session=True)
    try:
        wait_for((tmp_path / "up").exists, 30, "the stubborn process")
        doc = {"run": "r-2", "anchor": [1, 0], "cmdline": "", "workers": [[stubborn.pid,
                                                                           int(run.process_start(stubborn.pid))]]}
        ended = leftovers.end_left(doc, spare=(os.getpid(),), grace=0.3, kill_wait=5)
        stubborn.wait(5)
        assert ended["sigkilled"] >= 1 and not ended["still"], ended
    finally:
        if stubborn.poll() is None:
            os.killpg(stubborn.pid, signal.SIGKILL)


def test_a_run_whose_heartbeat_was_killed_too_is_said_elsewhere_only_for_another_machine() -> None:
    here = f"{leftovers.socket.gethostname()}/1/2"
    lapsed = [{"metadata": {"name": "nmo-run-a", "annotations": {run.CONTROLLER_ANNOTATION: "awx-ee-7/10/20",
                                                                 run.BOOT_ANNOTATION: "b"}}},
              {"metadata": {"name": "nmo-run-b", "annotations": {run.CONTROLLER_ANNOTATION: here,
                                                                 run.BOOT_ANNOTATION: leftovers.boot_id()}}}]
    (said,) = leftovers.elsewhere(lapsed, ["a", "b"])
    assert said.startswith("run a is gone without its heartbeat (its run lease lapsed): its controller was awx-ee-7")
    assert leftovers.elsewhere(lapsed, ["b"]) == []


def test_the_next_runs_start_never_touches_a_live_run_or_another_clusters(own_records: Path) -> None:
    """settle_gone's guards, before any request: a record of another API server is not looked at
    (its run lease is not in this cluster), and one whose ansible-playbook lives is a live run."""
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        me = [os.getpid(), int(run.process_start(os.getpid()) or 0)]
        worker = [[sleeper.pid, int(run.process_start(sleeper.pid) or 0)]]
        dead_anchor = [2 ** 22 + 1, 1]  # above any PID here: gone
        for name, server, anchor in (("other-cluster", "https://elsewhere:6443", dead_anchor),
                                     ("live-run", "https://here:6443", me)):
            leftovers.write_record({"run": name, "server": server, "host": "h", "boot": leftovers.boot_id(),
                                    "anchor": anchor, "cmdline": "", "workers": worker, "noted": 0, "ended": None})
        here = SimpleNamespace(host="https://here:6443")
        assert leftovers.settle_gone(here, "mine", alive=lambda run_id: False) == []
        assert alive(sleeper.pid)
        assert sorted(d["run"] for d in leftovers.read_records()) == ["live-run", "other-cluster"]
        # a record of another boot holds nothing alive: removed, nothing signalled
        leftovers.write_record({"run": "old-boot", "server": "https://here:6443", "boot": "another", "anchor": me,
                                "workers": worker})
        leftovers.settle_gone(here, "mine", alive=lambda run_id: False)
        assert "old-boot" not in [d["run"] for d in leftovers.read_records()] and alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()
