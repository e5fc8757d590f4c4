"""The peak memory of every process of a command: the command, what it forks (Ansible's
workers), and what it detaches (the run's heartbeat), each by its own high-water mark.

Read from /proc, no dependency. Each process's ``VmHWM`` restarts at ``exec``, so it never
holds this harness's memory, which ``ru_maxrss`` would (Linux keeps in it what a child had
before ``exec``: a child of pytest starts as a copy of pytest). This process is made a child
subreaper while the command runs, so a detached process stays in its tree and is seen.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on: bool) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _parents() -> Dict[int, int]:
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        out[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])  # the field after the state
    return out


def descendants(root: int) -> Set[int]:
    parents = _parents()
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found - {root}


def high_water(pid: int) -> Tuple[str, int]:
    """(its name, its VmHWM in bytes); ('', 0) when gone."""
    name, hwm = "", 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Name:"):
                name = line.split(None, 1)[1] if len(line.split()) > 1 else ""
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return "", 0
    return name, hwm


@dataclass
class Measured:
    rc: int
    seconds: float
    output: str
    peaks: Dict[int, Tuple[str, int]] = field(default_factory=dict)  # pid -> (name, bytes)

    def largest(self, count: int = 5) -> List[str]:
        top = sorted(self.peaks.items(), key=lambda kv: -kv[1][1])[:count]
        return [f"{name} (pid {pid}) {peak / 2**20:.1f} MiB" for pid, (name, peak) in top]

    @property
    def peak(self) -> int:
        return max((p for _n, p in self.peaks.values()), default=0)


def run_measured(argv: List[str], env: Dict[str, str], timeout: float, cwd: Optional[str] = None,
                 interval: float = 0.05) -> Measured:
    """Run ``argv`` to its end (killed after ``timeout`` s); every process's peak. The
    processes are polled every ``interval`` s until the command and all it left behind are gone."""
    me = os.getpid()
    before = descendants(me)
    peaks: Dict[int, Tuple[str, int]] = {}
    _subreaper(True)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        lines: List[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stdout or []), daemon=True)
        reader.start()
        mine = Path(f"/proc/{me}/cmdline").read_bytes()
        while True:
            alive = descendants(me) - before
            for pid in alive:
                try:
                    if Path(f"/proc/{pid}/cmdline").read_bytes() == mine:
                        continue  # forked, not yet exec'd: still a copy of this harness
                except OSError:
                    continue
                name, hwm = high_water(pid)
                if hwm > peaks.get(pid, ("", 0))[1]:
                    peaks[pid] = (name, hwm)
            _reap(me, {proc.pid} | before)
            if proc.poll() is not None and not alive - {proc.pid}:
                break
            if time.monotonic() - t0 > timeout:
                for pid in alive:
                    _kill(pid)
                proc.wait()
                break
            time.sleep(interval)
        reader.join(10)
        return Measured(proc.returncode, time.monotonic() - t0, "".join(lines), peaks)
    finally:
        _subreaper(False)


def _reap(me: int, others: Set[int]) -> None:
    """Wait for the orphans this subreaper adopted that have ended (not for the command
    itself, which Popen waits for, nor for children of this process from before)."""
    for pid, parent in _parents().items():
        if parent == me and pid not in others:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except OSError:
        pass
