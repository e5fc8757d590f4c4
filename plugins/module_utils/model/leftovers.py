"""What a gone run left running on its controller, found in a picture of the process table.

Ansible forks a worker process for every task of every host (``WorkerProcess``). The worker
calls ``os.setsid()`` first: it leads a session and a process group of its own (its PID), so
neither a signal to ``ansible-playbook``'s process group nor ``ansible-playbook``'s death
reaches it. What the task starts lives in that session: the local connection's ``/bin/sh``,
the module's Python, a ``command``'s program and whatever that program leaves in the
background; only the ssh connection's client starts a session of its own (``start_new_session``),
and stays the worker's child. When ``ansible-playbook`` is SIGKILLed, the workers are
reparented to init and go on: a work hook runs to its end while a rerun may start the same
hook again on the same node (issue 41).

So the run's heartbeat, which watches ``ansible-playbook`` anyway, notes its children (the
workers, each with its start time so that a recycled PID is never taken for one) every second.
What is left of the run once ``ansible-playbook`` is gone is then, here:

- every noted worker still alive (same PID and start time),
- every process of a noted worker's session or process group (what its task started, also
  a background child reparented to init), and
- every descendant of those (an ssh client in its own session, and what it started).

A worker forked in the last second before the kill, before a note, is found too: a session
leader whose command line is ``ansible-playbook``'s (a fork that did not exec) started after
the last note, whose parent is no longer ``ansible-playbook``, and which is a fork of it and
not a new ``ansible-playbook`` of the same command (the next run, started at once from the same
shell or test, has the same command line, the same kind of parent and leads a session too). A
fork keeps its parent's address space, so its stack starts where ``ansible-playbook``'s does
(``/proc/<pid>/stat``'s startstack); a new program's stack is placed at random by the kernel's
address space randomization. Where that randomization is off or the address cannot be read,
only an orphan (its parent init or gone) is taken for a late worker.

No I/O here: the processes come in as ``Proc`` tuples read from ``/proc/<pid>/stat``
(workflows/leftovers.py reads them).
"""

from __future__ import annotations

from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple


class Proc(NamedTuple):
    pid: int
    ppid: int
    pgrp: int
    sid: int
    state: str
    start: int  # clock ticks since boot (stat field 22): with the PID, one process for good
    comm: str
    cmdline: str = ""
    stack: int = 0  # startstack (stat field 28): a fork's is its parent's; 0 when not readable


Worker = Tuple[int, int]  # (pid, start)


def parse_stat(text: str, cmdline: str = "") -> Optional[Proc]:
    """One process from the text of its ``/proc/<pid>/stat``; None when it is not one."""
    head, sep, rest = text.rpartition(")")
    if not sep or "(" not in head:
        return None
    pid_text, _open, comm = head.partition("(")
    fields = rest.split()
    try:
        # after the command: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
        # cmajflt utime stime cutime cstime priority nice num_threads itrealvalue starttime vsize
        # rss rsslim startcode endcode startstack
        stack = int(fields[25]) if len(fields) > 25 else 0
        return Proc(int(pid_text), int(fields[1]), int(fields[2]), int(fields[3]), fields[0], int(fields[19]), comm,
                    cmdline, stack)
    except (IndexError, ValueError):
        return None


def children(procs: Iterable[Proc], pid: int) -> List[Worker]:
    """The live children of ``pid`` (its workers, for ansible-playbook), each with its start."""
    return sorted((p.pid, p.start) for p in procs if p.ppid == pid and p.state not in ("Z", "X"))


def late_workers(procs: Sequence[Proc], anchor: Worker, anchor_cmdline: str, since: int,
                 anchor_stack: int = 0) -> List[Worker]:
    """Workers of the anchor forked after the last note (start >= ``since``), now orphaned: session
    leaders with the anchor's command line whose parent is not the anchor any more and not
    another process of that command line (another ansible-playbook of the same command), and
    forks of the anchor: the anchor's stack address (``anchor_stack``), or, when that is not
    known (0), an orphan whose parent is init or gone. A new ansible-playbook of the same
    command is neither (it has a stack of its own and a live parent that started it)."""
    if not anchor_cmdline:
        return []
    by_pid = {p.pid: p for p in procs}
    found = []
    for p in procs:
        if p.pid != p.sid or p.cmdline != anchor_cmdline or p.start < since or p.start < anchor[1]:
            continue
        if p.state in ("Z", "X") or p.pid == anchor[0]:
            continue
        parent = by_pid.get(p.ppid)
        if p.ppid == anchor[0] or (parent is not None and parent.cmdline == anchor_cmdline):
            continue  # a live ansible-playbook's own worker
        if anchor_stack:
            if p.stack != anchor_stack:
                continue  # a program of its own (the next run of the same command), not a fork
        elif parent is not None and p.ppid != 1:
            continue  # started by a live process: not an orphaned worker
        found.append((p.pid, p.start))
    return sorted(found)


def left_over(procs: Sequence[Proc], workers: Iterable[Worker], spare: Iterable[int] = ()) -> List[Proc]:
    """The processes still there of the noted ``workers``: those alive with their start time,
    the members of their sessions and process groups, and every descendant of all of those.
    ``spare``: PIDs never counted (the caller itself). Zombies are nothing to end."""
    live = [p for p in procs if p.state not in ("Z", "X")]
    by_pid: Dict[int, Proc] = {p.pid: p for p in live}
    leaders: Set[int] = {pid for pid, start in workers if pid in by_pid and by_pid[pid].start == start}
    # a worker that exited leaves its session behind: its members name it as sid, but a new
    # process that got the worker's PID since is not the worker, and neither is its session
    gone_worker_ids: Set[int] = {pid for pid, _start in workers if pid not in by_pid}
    ids = leaders | gone_worker_ids
    found: Dict[int, Proc] = {}
    for p in live:
        if p.pid in leaders or p.sid in ids or p.pgrp in ids:
            found[p.pid] = p
    kids: Dict[int, List[Proc]] = {}
    for p in live:
        kids.setdefault(p.ppid, []).append(p)
    todo = list(found)
    while todo:
        for child in kids.get(todo.pop(), []):
            if child.pid not in found:
                found[child.pid] = child
                todo.append(child.pid)
    for pid in spare:
        found.pop(pid, None)
    return sorted(found.values(), key=lambda p: p.pid)


def still_there(procs: Iterable[Proc], ended: Iterable[Proc]) -> List[Proc]:
    """Which of ``ended`` are still alive (the same PID and start time, not a zombie)."""
    live = {(p.pid, p.start) for p in procs if p.state not in ("Z", "X")}
    return [p for p in ended if (p.pid, p.start) in live]


def describe(procs: Sequence[Proc], limit: int = 6, worker_cmdline: str = "") -> str:
    """``Ansible worker PID 11, PID 12 (sh -c 'echo ...') and PID 13 (sleep 1)``: what was (or
    is) left; a process with ``worker_cmdline`` (a fork of ansible-playbook) is called a worker."""
    parts = []
    for p in procs[:limit]:
        what = (p.cmdline or p.comm).strip()
        if worker_cmdline and p.cmdline == worker_cmdline:
            parts.append(f"Ansible worker PID {p.pid}")
        else:
            parts.append(f"PID {p.pid} ({what[:80]}{'...' if len(what) > 80 else ''})")
    more = len(procs) - limit
    if more > 0:
        parts.append(f"{more} more")
    if len(parts) > 1:
        return ", ".join(parts[:-1]) + " and " + parts[-1]
    return parts[0] if parts else "nothing"
