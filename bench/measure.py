"""How a tool's run is measured: wall time, API requests from the audit log, peak RSS.

A run is one process (kubectl, or ansible-playbook with its forks and async jobs) started
by ``run_measured``. The harness makes itself a child subreaper, so the processes that
Ansible's async wrapper detaches stay in its tree and their memory is seen too.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper(on: bool = True) -> bool:
    """Orphaned descendants (daemonized async jobs) are re-parented to this process.
    Off while this process starts something that must outlive it unwatched (the cluster's
    components, which hack/cluster detaches): adopted, they would be zombies when they
    exit, as nothing here reaps them, and `hack/cluster stop` would wait on them forever."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_orphans() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# -- the machine ----------------------------------------------------------------------------
def machine() -> Dict[str, object]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {"nproc": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            "cpu_model": model, "kernel": platform.release(), "python": platform.python_version(),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


# -- the audit log --------------------------------------------------------------------------
@dataclass(frozen=True)
class Mark:
    inode: int
    offset: int
    wall: float  # time.time() when taken


class AuditLog:
    """The API server's JSON audit log; counts the requests of given users after a mark."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> Mark:
        st = self.path.stat()
        return Mark(st.st_ino, st.st_size, time.time())

    def _chunks(self, mark: Mark) -> List[Tuple[Path, int]]:
        """(file, offset) pairs holding what was written since the mark, oldest first.
        The server rotates the log to audit-<time>.log; a rotation since the mark is followed."""
        if self.path.stat().st_ino == mark.inode:
            return [(self.path, mark.offset)]
        rotated = [p for p in self.path.parent.glob("audit-*.log") if p.stat().st_ino == mark.inode]
        return [(p, mark.offset) for p in rotated] + [(self.path, 0)]

    def requests(self, mark: Mark, users: List[str], settle: float = 1.0) -> Dict[str, Requests]:
        """Requests of ``users`` logged since ``mark`` (after ``settle`` s, so that watches
        closed by the tool's exit are written)."""
        found = {u: Requests() for u in users}
        for event in self.events(mark, users, settle):
            found[event["user"]["username"]].add(event)
        return found

    def events(self, mark: Mark, users: List[str], settle: float = 1.0) -> List[Dict[str, object]]:
        """The completed requests of ``users`` logged since ``mark``, as the audit log has
        them (B7 reads their timestamps: when the operator evicted, when it wrote Succeeded)."""
        time.sleep(settle)
        found: List[Dict[str, object]] = []
        needles = [f'"username":"{u}"'.encode() for u in users]
        for path, offset in self._chunks(mark):
            with open(path, "rb") as handle:
                handle.seek(offset)
                for line in handle:
                    if not any(n in line for n in needles):
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue  # a line being written as we read
                    user = event.get("user", {}).get("username")
                    if user in users and event.get("stage") == "ResponseComplete":
                        found.append(event)
        return found


@dataclass
class Requests:
    total: int = 0
    by_verb: Counter = field(default_factory=Counter)
    by_resource: Counter = field(default_factory=Counter)
    by_code: Counter = field(default_factory=Counter)
    user_agents: Counter = field(default_factory=Counter)
    by_what: Counter = field(default_factory=Counter)  # "verb resource", as a rollout's requests go

    def add(self, event: Dict[str, object]) -> None:
        self.total += 1
        ref = event.get("objectRef") or {}
        resource = ref.get("resource", "?") + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        self.by_verb[event.get("verb", "?")] += 1
        self.by_resource[resource] += 1
        self.by_what[f"{event.get('verb', '?')} {resource}"] += 1
        self.by_code[str((event.get("responseStatus") or {}).get("code", "?"))] += 1
        self.user_agents[str(event.get("userAgent", "?")).split(" ", maxsplit=1)[0]] += 1

    def as_dict(self) -> Dict[str, object]:
        return {"total": self.total, "by_verb": dict(self.by_verb), "by_resource": dict(self.by_resource),
                "by_code": dict(self.by_code), "user_agents": dict(self.user_agents), "by_what": dict(self.by_what)}


# -- memory -----------------------------------------------------------------------------------
def high_water_rss(pid: int) -> int:
    """The peak RSS of a process's present program (VmHWM, bytes; 0 when unknown). Unlike
    ru_maxrss it starts afresh at exec: it never holds the harness's own memory, which a
    child forked from it carries until it runs the tool."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeSampler(threading.Thread):
    """Polls the RSS of every descendant of this process; keeps each one's peak (its high
    water mark, so a spike between two polls is not missed while the process lives on)."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak: Dict[int, Tuple[str, int]] = {}
        self.peak_total = 0
        self._stop_event = threading.Event()
        # Descendants from before the run are not the tool's: the cluster's components that
        # bench/run restarted (hack/cluster detaches them, and this subreaper adopts them).
        self.before = {p.pid for p in psutil.Process().children(recursive=True)}

    def run(self) -> None:
        me = psutil.Process()
        mine = me.cmdline()
        while not self._stop_event.is_set():
            total = 0
            try:
                children = me.children(recursive=True)
            except psutil.Error:
                children = []
            for proc in children:
                if proc.pid in self.before:
                    continue
                try:
                    if proc.cmdline() == mine:
                        continue  # a child not yet exec'd: still a copy of this harness
                    rss = proc.memory_info().rss
                    name = proc.name()
                except psutil.Error:
                    continue
                total += rss
                # An Ansible worker's mark starts at its parent's (a fork copies it): at most
                # the parent's own peak, which is sampled too.
                peak = max(rss, high_water_rss(proc.pid))
                if peak > self.peak.get(proc.pid, ("", 0))[1]:
                    self.peak[proc.pid] = (name, peak)
            self.peak_total = max(self.peak_total, total)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


# -- one measured run -------------------------------------------------------------------------
@dataclass
class Run:
    argv: List[str]
    rc: int
    wall: float
    started: float  # time.time()
    stdout: str
    stderr: str
    peak_rss_mib: float  # the largest single process of the tool
    peak_tree_mib: float  # all its processes at once
    timed_out: bool = False
    requests: Optional[Requests] = None
    extra: Dict[str, object] = field(default_factory=dict)


def run_measured(argv: List[str], env: Dict[str, str], timeout: float, cwd: Optional[str] = None,
                 on_start: Optional[Callable[[float], None]] = None) -> Run:
    """Run ``argv`` to its end (killed after ``timeout`` s) and measure it."""
    sampler = TreeSampler()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        sampler.start()
        started = time.time()
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        if on_start:
            on_start(started)
        timed_out = False
        status, usage = 0, None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > timeout:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                _pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
        reap_orphans()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    # The largest process's peak, from the sampler (every descendant, detached ones too).
    # Not ru_maxrss: Linux keeps in it the RSS a child had before exec, and a child forked
    # from this harness starts with the harness's memory (152 MiB after B5 listed 50,000
    # pods: that was the "peak" of every tool, kubectl included). It is kept as a note.
    waited = usage.ru_maxrss / 1024 if usage else 0.0
    sampled = max((rss for _pid, rss in sampler.peak.values()), default=0) / 2**20
    run = Run(argv, proc.returncode, wall, started, stdout, stderr, round(sampled, 1),
              round(sampler.peak_total / 2**20, 1), timed_out)
    run.extra["ru_maxrss_mib"] = round(waited, 1)
    # CPU seconds of the tool and the processes it waited for (Ansible's forked workers):
    # steadier than the wall time on a shared machine, where the wall time mostly measures
    # the others' load
    run.extra["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2) if usage else None
    # the largest processes, named (ansible-playbook, its forked workers running our modules, kubectl)
    run.extra["largest_processes_mib"] = [f"{name} {rss / 2**20:.1f}" for name, rss in sorted(
        sampler.peak.values(), key=lambda nr: -nr[1])[:3]]
    return run
