"""A gone run's processes on the controller, ended before any other run takes its nodes.

``kill -9`` of ``ansible-playbook`` does not end its workers: each leads a session of its own
(model/leftovers.py says why and what is found). A worker in a node's work hook then finishes
the hook while a rerun, which resumes the node as soon as the run lease is gone, runs the same
hook on the same node: two firmware flashes at once (issue 41). Ansible's own answer to a
SIGTERM or Ctrl-C is to signal every worker's process group; a SIGKILL leaves nobody to do it.
The run's heartbeat is still there (docs/design.md §6.2), so it does it:

- While ``ansible-playbook`` lives, the heartbeat notes its workers (PID and start time) every
  second in a small local record, one per run, readable by the user alone (``Record``).
- When ``ansible-playbook`` is gone, the heartbeat ends what is left of the workers (SIGTERM,
  a wait on the processes themselves, SIGKILL for what is still there after ``GRACE`` seconds),
  records a ``LeftoverEnded`` event on each NodeMaintenance of the run, and only then deletes
  the run lease. So no rerun, on this machine or another, adopts a node of the run while a
  process of the run still works on it.
- When the heartbeat died too, the run lease lapses after its duration and the next run's start
  on this machine (same user, same boot) reads the record and ends what is left, before any of
  its nodes (``settle_gone``). Either way the next run's start says what was ended.

The record is kept when something was ended, for the next run to say so; removed otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..api.client import Client
from ..errors import NmoError
from ..model import leases
from ..model import leftovers as model
from ..stores import events, maintenance
from . import run

GRACE = 10.0  # seconds between SIGTERM and SIGKILL
KILL_WAIT = 5.0  # seconds to wait for SIGKILLed processes to be gone
LEFTOVER_ENDED = events.LEFTOVER_ENDED


# -- the process table ---------------------------------------------------------------------------
def read_procs(root: str = "/proc") -> List[model.Proc]:
    procs = []
    for entry in os.listdir(root):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(root, entry, "stat"), encoding="utf-8", errors="replace") as handle:
                stat = handle.read()
            with open(os.path.join(root, entry, "cmdline"), "rb") as handle:
                cmdline = handle.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue  # gone meanwhile
        proc = model.parse_stat(stat, cmdline)
        if proc is not None:
            procs.append(proc)
    return procs


def read_proc(pid: int, root: str = "/proc") -> Optional[model.Proc]:
    try:
        with open(os.path.join(root, str(pid), "stat"), encoding="utf-8", errors="replace") as handle:
            return model.parse_stat(handle.read())
    except OSError:
        return None


def anchor_runs(pid: int, start: int, root: str = "/proc") -> bool:
    """Whether the process of ``pid`` that started at ``start`` (clock ticks since boot) still
    runs: not gone, its PID not another process's, and no zombie (an exited process its parent
    has not reaped yet is gone for every purpose here)."""
    proc = read_proc(pid, root)
    return proc is not None and proc.start == start and proc.state not in ("Z", "X")


def exit_waiter(pid: int) -> Callable[[float], None]:
    """A pause of up to the seconds given that ends as soon as process ``pid`` exits: on its
    pidfd where the kernel has them (readable once the process has exited), else a plain sleep.
    The pidfd is opened once and lives as long as the process that asked (the heartbeat)."""
    try:
        fd = os.pidfd_open(pid)  # type: ignore[attr-defined]
    except (AttributeError, OSError):
        return time.sleep
    poller = select.poll()
    poller.register(fd, select.POLLIN)

    def pause(seconds: float) -> None:
        if not poller.poll(max(seconds, 0.0) * 1000):
            return
        time.sleep(min(seconds, 0.05))  # exited, but not yet reaped or seen gone: no busy loop

    return pause


def children_of(pid: int, root: str = "/proc") -> Optional[List[model.Worker]]:
    """The children of ``pid`` from ``/proc/<pid>/task/*/children`` (cheap: no scan of the
    table); None when the kernel does not say (then ``read_procs`` answers)."""
    found: List[model.Worker] = []
    try:
        tasks = os.listdir(os.path.join(root, str(pid), "task"))
        for task in tasks:
            with open(os.path.join(root, str(pid), "task", task, "children"), encoding="ascii") as handle:
                for child in handle.read().split():
                    proc = read_proc(int(child), root)
                    if proc is not None and proc.ppid == pid and proc.state not in ("Z", "X"):
                        found.append((proc.pid, proc.start))
    except (OSError, ValueError):
        return None
    return sorted(set(found))


def boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def ticks_now() -> int:
    """Now, in the clock ticks since boot of a process's start time."""
    try:
        with open("/proc/uptime", encoding="ascii") as handle:
            return int(float(handle.read().split()[0]) * os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def randomized() -> bool:
    """Whether the kernel places a new program's stack at random (then a fork is told from a new
    program of the same command by its stack address, model/leftovers.py)."""
    try:
        with open("/proc/sys/kernel/randomize_va_space", encoding="ascii") as handle:
            return handle.read().strip() not in ("", "0")
    except OSError:
        return False


def cmdline_of(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def anchor_stack(pid: int) -> int:
    """ansible-playbook's stack address, its forks' mark; 0 where it tells nothing."""
    proc = read_proc(pid)
    return proc.stack if proc is not None and randomized() else 0


# -- the local record ----------------------------------------------------------------------------
def folder() -> str:
    return os.path.join(tempfile.gettempdir(), f"nmo-maintenance-runs-{os.getuid()}")


def record_path(run_id: str) -> str:
    return os.path.join(folder(), f"{run_id}.json")


def write_record(doc: Dict[str, Any]) -> None:
    target = record_path(doc["run"])
    try:
        os.makedirs(folder(), mode=0o700, exist_ok=True)
        handle, temp = tempfile.mkstemp(prefix=".run-", dir=folder())
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(doc, out)
        os.replace(temp, target)
    except OSError:
        pass  # a full or read-only temp folder: the run goes on, untracked


def read_records() -> List[Dict[str, Any]]:
    """Every run record of this user (a folder of someone else's is never read)."""
    try:
        info = os.stat(folder())
        if info.st_uid != os.getuid():
            return []
        names = sorted(os.listdir(folder()))
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            with open(os.path.join(folder(), name), encoding="utf-8") as handle:
                doc = json.load(handle)
            if isinstance(doc, dict) and doc.get("run"):
                found.append(doc)
        except (OSError, ValueError):
            continue
    return found


def beats(run_id: str) -> bool:
    """Whether the heartbeat of run ``run_id`` (as this user's record of it names it) still runs."""
    try:
        with open(record_path(run_id), encoding="utf-8") as handle:
            beat = json.load(handle).get("beat") or []
        return len(beat) == 2 and bool(beat[1]) and anchor_runs(int(beat[0]), int(beat[1]))
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def remove_record(run_id: str) -> None:
    try:
        os.unlink(record_path(run_id))
    except OSError:
        pass


class Tracker:
    """The heartbeat's notes of ``ansible-playbook``'s workers (``note`` every second)."""

    def __init__(self, run_id: str, anchor_pid: int, anchor_start: Optional[str], server: str = "") -> None:
        self.doc: Dict[str, Any] = {
            "run": run_id, "server": server, "host": socket.gethostname(), "boot": boot_id(),
            "anchor": [anchor_pid, int(anchor_start or 0)], "cmdline": cmdline_of(anchor_pid),
            "stack": anchor_stack(anchor_pid), "workers": [], "noted": ticks_now(), "ended": None,
            # the heartbeat itself: while it runs, a command of this controller waits for it to
            # delete the run lease of a run whose ansible-playbook is gone (ending_runs.py)
            "beat": [os.getpid(), int(run.process_start(os.getpid()) or 0)]}
        write_record(self.doc)

    def note(self) -> None:
        pid = self.doc["anchor"][0]
        now = ticks_now()
        workers = children_of(pid)
        if workers is None:
            workers = model.children(read_procs(), pid)
        self.doc["noted"] = now
        if [list(w) for w in workers] != self.doc["workers"]:
            self.doc["workers"] = [list(w) for w in workers]
            write_record(self.doc)

    def forget(self) -> None:
        """The run lease is deleted: the record goes, unless it says what was ended (for the next
        run to say)."""
        if not self.doc.get("ended"):
            remove_record(self.doc["run"])

    def controller_gone(self, client: Optional[Client]) -> Dict[str, Any]:
        """``ansible-playbook`` is gone: end what its workers left (and tell the run's
        NodeMaintenances); the record stays when something was ended, for the next run to say."""
        self.doc["noted"] = min(self.doc["noted"], ticks_now())
        ended = end_left(self.doc, spare=(os.getpid(),))
        if not ended["processes"]:
            return ended  # the record goes once the run lease is deleted (forget)
        ended["by"] = "its heartbeat"
        self.doc["ended"] = ended
        write_record(self.doc)
        if client is not None:
            tell(client, self.doc["run"], sentence(self.doc, ended))
        return ended


# -- ending them ---------------------------------------------------------------------------------
def found_left(doc: Dict[str, Any], procs: Sequence[model.Proc], spare: Sequence[int] = (),
               others: Sequence[Dict[str, Any]] = ()) -> List[model.Proc]:
    """What the run of ``doc`` left, never a live ansible-playbook of another run (``others``:
    the other records; their anchors are spared with their own workers' sessions)."""
    anchor = (int(doc["anchor"][0]), int(doc["anchor"][1]))
    workers = [(int(p), int(s)) for p, s in doc.get("workers") or []]
    workers += model.late_workers(procs, anchor, doc.get("cmdline") or "", int(doc.get("noted") or 0),
                                  int(doc.get("stack") or 0))
    live = {(p.pid, p.start) for p in procs}
    runs = {(int(o["anchor"][0]), int(o["anchor"][1])) for o in others
            if o.get("run") != doc.get("run") and len(o.get("anchor") or []) == 2}
    running = runs & live
    workers = [w for w in workers if w not in running]
    return model.left_over(procs, workers, [*spare, *(pid for pid, _start in running)])


def end_left(doc: Dict[str, Any], spare: Sequence[int] = (), grace: float = GRACE,
             kill_wait: float = KILL_WAIT) -> Dict[str, Any]:
    """End what the run of ``doc`` left: SIGTERM to each process, a wait until they are gone
    (``grace``), SIGKILL to those still there. What was ended, and how."""
    procs = read_procs()
    left = found_left(doc, procs, spare, read_records())
    if not left:
        return {"processes": [], "killed": 0, "at": time.time()}
    said = model.describe(left, worker_cmdline=doc.get("cmdline") or "")
    signal_all(left, signal.SIGTERM)
    still = wait_gone(left, grace)
    sigkilled = len(still)
    if still:
        signal_all(still, signal.SIGKILL)
        still = wait_gone(still, kill_wait)
    return {"processes": said, "count": len(left), "sigkilled": sigkilled,
            "still": model.describe(still, worker_cmdline=doc.get("cmdline") or "") if still else "", "at": time.time()}


def signal_all(procs: Sequence[model.Proc], signum: int) -> None:
    for proc in procs:
        now = read_proc(proc.pid)
        if now is None or now.start != proc.start:
            continue  # gone, or its PID given to another process since
        try:
            os.kill(proc.pid, signum)
        except OSError as exc:
            if exc.errno not in (errno.ESRCH, errno.EPERM):
                raise


def wait_gone(procs: Sequence[model.Proc], timeout: float,
              clock: Callable[[], float] = time.monotonic) -> List[model.Proc]:
    """Wait until none of ``procs`` is alive, at most ``timeout`` seconds: on their pidfds (each
    readable when its process exits) where the kernel has them, else looking at /proc every
    50 ms. Those still alive at the end."""
    deadline = clock() + timeout
    fds: List[int] = []
    try:
        for proc in procs:
            try:
                fds.append(os.pidfd_open(proc.pid))  # type: ignore[attr-defined]
            except (AttributeError, OSError):
                pass
        while True:
            still = model.still_there(alive_of(procs), procs)
            left = deadline - clock()
            if not still or left <= 0:
                return still
            if fds and len(fds) == len(procs):
                poller = select.poll()
                for fd in fds:
                    poller.register(fd, select.POLLIN)
                poller.poll(max(min(left, 0.5), 0.01) * 1000)
            else:
                select.select([], [], [], min(left, 0.05))
    finally:
        for fd in fds:
            os.close(fd)


def alive_of(procs: Sequence[model.Proc]) -> List[model.Proc]:
    return [p for p in (read_proc(proc.pid) for proc in procs) if p is not None]


def sentence(doc: Dict[str, Any], ended: Dict[str, Any]) -> str:
    anchor = doc.get("anchor") or [0, 0]
    killed = int(ended.get("sigkilled") or 0)
    how = "SIGTERM" + (f", then SIGKILL for {killed} still there after {GRACE:.0f} s" if killed else "")
    text = (f"run {doc['run']}: ansible-playbook is gone; what it left running on the controller was ended "
            f"({ended.get('count') or 0} process(es): {ended.get('processes')}) by {ended.get('by')} ({how}) "
            f"before the run was released, so no other run's hook overlaps it (its controller: ansible-playbook "
            f"PID {anchor[0]} on {doc.get('host') or 'this host'})")
    if ended.get("still"):
        text += f"; still there after SIGKILL: {ended['still']}"
    return text


def tell(client: Client, run_id: str, message: str) -> int:
    """Said on each NodeMaintenance of ``run_id``: a LeftoverEnded event and its lastError
    (where the node's story and its state are read); never raises."""
    told = 0
    try:
        recorder = events.EventRecorder(client)
        for nm in maintenance.list_all(client):
            if ((nm.get("metadata") or {}).get("annotations") or {}).get(leases.RUN_ANNOTATION) == run_id:
                recorder.record(nm, LEFTOVER_ENDED, message[:1000])
                maintenance.update_status(client, nm, {"lastError": message[:1000]})
                told += 1
    except NmoError:
        pass
    return told


# -- the next run's start ------------------------------------------------------------------------
def settle_gone(client: Client, my_run: str, namespace: str = leases.LEASE_NAMESPACE,
                alive: Optional[Callable[[str], bool]] = None) -> List[str]:
    """At a run's start, before any node: for every record of another run of this user against
    the same API server that is gone (its ansible-playbook gone, and its run lease deleted or
    lapsed), end what it left on this controller when its heartbeat could not (killed too), and
    say what was ended, by whom. Records of another boot hold nothing alive and are removed; a
    run against another cluster is never looked at (its run lease is not in this one). One
    sentence per gone run that left something."""
    said: List[str] = []
    this_boot = boot_id()
    for doc in read_records():
        run_id = str(doc["run"])
        if run_id == my_run:
            continue
        if doc.get("boot") != this_boot:
            remove_record(run_id)
            continue
        if doc.get("server") != client.host:
            continue
        anchor = doc.get("anchor") or [0, 0]
        if anchor_runs(int(anchor[0]), int(anchor[1])):
            continue  # its ansible-playbook lives: a live run, whatever its lease says now
        try:
            is_alive = alive(run_id) if alive is not None else leases.is_valid(
                run.read_lease(client, run_id, namespace), client.server_now())
        except NmoError:
            continue  # looked at again by the next run
        if is_alive:
            continue  # its heartbeat is at work (or the run lives on): its own business
        ended = end_left(doc, spare=(os.getpid(), os.getppid()))
        if ended["processes"]:
            ended["by"] = "this run's start (the run's heartbeat was gone too)"
            text = sentence(doc, ended)
            tell(client, run_id, text)
            said.append(text)
        elif doc.get("ended"):
            said.append(sentence(doc, doc["ended"]))
        if not ended.get("still"):
            remove_record(run_id)
    return said


def elsewhere(seen: Sequence[leases.Lease], lapsed: Sequence[str]) -> List[str]:
    """The runs whose run lease lapsed (``lapsed``: its heartbeat never deleted it, so it died
    too, or the controller's host) on another machine than this one: what they left running
    there cannot be ended from here. Said, one sentence a run."""
    said = []
    this = (socket.gethostname(), boot_id())
    for lease in seen:
        meta = lease.get("metadata") or {}
        run_id = meta.get("name", "")[len(leases.RUN_LEASE_PREFIX):]
        if run_id not in lapsed:
            continue
        notes = meta.get("annotations") or {}
        host = (notes.get(run.CONTROLLER_ANNOTATION) or "").split("/", 1)[0]
        boot = notes.get(run.BOOT_ANNOTATION) or ""
        if (host, boot) == this or not host:
            continue
        said.append(f"run {run_id} is gone without its heartbeat (its run lease lapsed): its controller was "
                    f"{host}{' (another boot)' if host == this[0] else ''}, not this machine, so a process it left "
                    f"there (a hook's task, when only ansible-playbook and its heartbeat were killed) cannot be ended "
                    f"from here; the run lease's lapse is all this run waits for (docs/design.md §6.2)")
    return said
