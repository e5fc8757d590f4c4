"""What a killed run left running on its controller (model/leftovers.py, workflows/leftovers.py)."""

from __future__ import annotations

from typing import List

from ansible_collections.nmo.maintenance.plugins.module_utils.model.leftovers import (
    Proc,
    left_running,
    parse_stat,
    workers_of,
)
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows.leftovers import Workers


def stat(pid: int, ppid: int, sid: int, start: int, comm: str = "python") -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime
    # cstime priority nice threads itrealvalue starttime ...
    return f"{pid} ({comm}) S {ppid} {sid} {sid} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"


def test_a_stat_line_with_spaces_and_parentheses_in_its_name():
    assert parse_stat(stat(42, 7, 42, 1000, "ansible-playbook (w) x")) == Proc(42, 7, 42, "1000")
    assert parse_stat("garbage") is None and parse_stat("1 (x) S") is None


ANCHOR = 100
WORLD = [Proc(ANCHOR, 1, 90, "500"), Proc(201, ANCHOR, 201, "600"), Proc(202, ANCHOR, 202, "610"),
         Proc(301, 201, 201, "620"), Proc(302, 301, 201, "630"), Proc(400, 1, 400, "640")]


def test_the_workers_are_the_anchors_children_and_their_sessions_what_is_left():
    workers = workers_of(WORLD, ANCHOR)
    assert workers == {201: "600", 202: "610"}
    # the anchor killed: 201 and its hook (301, 302) were adopted by init; 202 had ended
    after = [Proc(201, 1, 201, "600"), Proc(301, 201, 201, "620"), Proc(302, 301, 201, "630"),
             Proc(400, 1, 400, "640")]
    assert [p.pid for p in left_running(after, workers)] == [201, 301, 302]
    # a reused PID (another start) is not the worker: nothing of its session is touched
    reused = [Proc(201, 1, 201, "999"), Proc(301, 201, 201, "1000")]
    assert left_running(reused, workers) == []


def test_the_workers_are_remembered_while_the_anchor_lives_and_ended_after():
    views: List[List[Proc]] = [WORLD, [p for p in WORLD if p.pid != 202]]
    state = {"now": 0.0, "seen": 0}

    def read() -> List[Proc]:
        state["seen"] += 1
        return views[min(state["seen"] - 1, len(views) - 1)] if state["seen"] <= 2 else []

    workers = Workers(ANCHOR, read)
    workers.look()  # both workers
    workers.look()  # 202 ended: still remembered, harmless
    assert workers.known == {201: "600", 202: "610"}
    ended = workers.end(grace=1.0, clock=lambda: state["now"], sleep=lambda s: state.update(now=state["now"] + s))
    assert ended == []  # nothing read any more (the third read): nothing to end
