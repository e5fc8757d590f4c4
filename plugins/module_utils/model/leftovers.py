"""What a killed run left running on its controller (docs/design.md §6.4): pure reading.

ansible-playbook runs each task of a host in a worker process it forks, and the worker makes a
session of its own (it detaches from the terminal). A module the task runs, and whatever the
module starts (a hook's command, an ssh client to the node), stay in that session. When
ansible-playbook is killed (SIGKILL: it cannot pass the signal on), its workers are adopted by
init and go on: a firmware flash of the killed run would run beside the rerun's. The run's
heartbeat (workflows/heartbeat.py) remembers the workers of its anchor while it lives; once the
anchor is gone, those workers' sessions are what the run left running.

Pure: lines of /proc/<pid>/stat come in, process facts out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    sid: int
    start: str  # clock ticks since boot: a reused PID does not share it


def parse_stat(text: str) -> Optional[Proc]:
    """One /proc/<pid>/stat line; None when it cannot be read. The command name (field 2) may hold
    spaces and parentheses: the fields are split after its last ')'."""
    if ")" not in text:
        return None
    head, rest = text.rsplit(")", 1)
    fields = rest.split()
    try:
        pid = int(head.split("(", 1)[0])
        return Proc(pid, int(fields[1]), int(fields[3]), fields[19])
    except (ValueError, IndexError):
        return None


def workers_of(procs: Iterable[Proc], anchor: int) -> Dict[int, str]:
    """The anchor's children (its workers): pid -> start."""
    return {p.pid: p.start for p in procs if p.ppid == anchor}


def adopted(procs: Iterable[Proc], cmdlines: Dict[int, bytes], anchor_cmdline: bytes, anchor_start: str
            ) -> Dict[int, str]:
    """Workers forked too late to be remembered (within the last look): adopted by init, leaders
    of their own session, started after the anchor, with the anchor's command line (a fork
    without exec keeps it)."""
    try:
        since = int(anchor_start)
    except ValueError:
        return {}
    return {p.pid: p.start for p in procs if p.ppid == 1 and p.sid == p.pid and p.start.isdigit()
            and int(p.start) >= since and anchor_cmdline and cmdlines.get(p.pid) == anchor_cmdline}


def left_running(procs: Iterable[Proc], workers: Dict[int, str]) -> List[Proc]:
    """The processes of the remembered workers' sessions that still run: each worker still the
    same process (its start), and every process of its session."""
    procs = list(procs)
    alive = {p.pid for p in procs if workers.get(p.pid) == p.start}
    return sorted((p for p in procs if p.sid in alive), key=lambda p: p.pid)
