"""Ending what a killed run left running on its controller (docs/design.md §6.4).

The heartbeat calls ``Workers.look`` every second while ansible-playbook lives, and
``Workers.end`` once it is gone: SIGTERM to every process of the remembered workers' sessions,
a wait until they are gone (at most ``grace`` seconds), then SIGKILL to what is left.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Dict, List

from ..model.leftovers import Proc, adopted, left_running, parse_stat, workers_of


def processes() -> List[Proc]:
    found = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as handle:
                proc = parse_stat(handle.read())
        except OSError:
            continue
        if proc is not None:
            found.append(proc)
    return found


def cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


class Workers:
    """The workers of one ansible-playbook process, remembered while it lives."""

    def __init__(self, anchor: int, read: Callable[[], List[Proc]] = processes,
                 command: Callable[[int], bytes] = cmdline) -> None:
        self.anchor = anchor
        self.read = read
        self.command = command
        self.known: Dict[int, str] = {}
        self.anchor_cmdline = b""
        self.anchor_start = ""

    def look(self) -> None:
        procs = self.read()
        if not self.anchor_cmdline:
            self.anchor_cmdline = self.command(self.anchor)
            self.anchor_start = next((p.start for p in procs if p.pid == self.anchor), "")
        self.known.update(workers_of(procs, self.anchor))

    def end(self, grace: float = 10.0, clock: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep) -> List[int]:
        """End what the remembered workers left running; the PIDs that were running."""
        procs = self.read()
        late = [p for p in procs if p.ppid == 1 and p.sid == p.pid and p.pid not in self.known]
        self.known.update(adopted(late, {p.pid: self.command(p.pid) for p in late}, self.anchor_cmdline,
                                  self.anchor_start))
        running = left_running(procs, self.known)
        ended = [p.pid for p in running]
        for proc in running:
            _signal(proc.pid, signal.SIGTERM)
        deadline = clock() + grace
        while running and clock() < deadline:
            sleep(0.2)  # a process's exit is not watchable from here: looked at five times a second
            running = left_running(self.read(), self.known)
        for proc in running:
            _signal(proc.pid, signal.SIGKILL)
        return ended


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass  # gone already, or not ours to signal
