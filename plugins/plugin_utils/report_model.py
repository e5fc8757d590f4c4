# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report's content (docs/report.md), built from what the run's tasks returned.

Pure: no Ansible, no I/O. The report callback (plugins/callback/nmo_report.py) feeds a
``Collector`` one ``TaskRecord`` a task result (host, task name, module, the role's phase the
task is part of, start and end time, status, result) and asks ``build()`` for the report at the
end of the playbook, whatever ended it. The phases of a node are the role's: each include of a
phase file in the role (tasks/main.yml) says which phase its tasks are in with the variable
``node_maintenance_phase`` (``PHASE_VAR``), which every task inside it inherits, the user's
own hook and gate tasks too; the callback reads it from the task (``phase_of``). A task's name
plays no part. Consecutive tasks of one phase make one stretch of it; a task outside every
phase (the look, the input check, the summary, the playbook's own plays) ends the stretch that
was open. The names the report shows are model/record.py's ``REPORTED``; a phase the role
names that the table does not know is shown under its own name. A module that knows finer steps
returns ``phases`` (a list of ``{name, start, end}``, epoch seconds) and they are shown too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

from ansible_collections.nmo.maintenance.plugins.module_utils.model import record

SCHEMA = "https://nmo.maintenance/report.schema.json"
SCHEMA_VERSION = 2  # docs/report.md, "Versions": what each number changed

PHASE_VAR = "node_maintenance_phase"  # what the role's includes of its phase files set (tasks/main.yml)
PDB_NAME = re.compile(r"disruption budget (\S+?)[ ,)]")
RUN_TASK = "nmo.maintenance.nmo_run"
PLAN_TASK = "nmo.maintenance.nmo_plan"
REPORT_FACT = "node_maintenance_report_settings"  # set by tasks/run.yml
LOOK, SUMMARY = "look", "summary"  # a node's results outside its phases: its look, its summary (set_stats)
MIN_WAIT = 0.5  # shorter lease or etcd waits are part of the begin, not a wait of their own


def iso(epoch: Optional[float]) -> Optional[str]:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def epoch_of(text: Any) -> Optional[float]:
    """An RFC 3339 time (the API server's, or ours) as epoch seconds; None when unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class TaskRecord:
    host: str
    task: str  # its name, as Ansible shows it: for the console's sake only, the report never reads it
    action: str
    start: float
    end: float
    status: str  # ok, failed, skipped, unreachable
    result: Dict[str, Any]
    phase: Optional[str] = None  # the role's phase the task is part of (phase_of); None: none
    once: bool = False  # run once for the play (run_once): outside a phase, the run's task, not a node's


@dataclass
class Phase:
    name: str
    start: float
    end: float
    earlier_run: bool = False
    note: str = ""

    def out(self) -> Dict[str, Any]:
        return {"name": self.name, "start": iso(self.start), "end": iso(self.end),
                "seconds": round(max(0.0, self.end - self.start), 3), "earlier_run": self.earlier_run,
                "note": self.note}


def phase_of(task: Any) -> Optional[str]:
    """The role's phase an Ansible task is part of: ``node_maintenance_phase`` as the task's own
    variables, its blocks' and the includes and imports it came through give it (``get_vars()``,
    Ansible's public method on a task; without it, the task's own ``vars``). None when none does,
    or the value is not a plain name (a template, which only a task's run could render)."""
    try:
        get_vars = getattr(task, "get_vars", None)
        found = get_vars() if callable(get_vars) else (getattr(task, "vars", None) or {})
        value = found.get(PHASE_VAR) if isinstance(found, dict) else None
    except Exception:  # a task object of another shape: no phase rather than no report
        return None
    if not isinstance(value, str) or not value.strip() or "{" in value:
        return None
    return str(value).strip()


def label(phase: str) -> str:
    """The name the report shows for a phase of the role (model/record.py's table; a phase the
    role names that the table does not know: its own name)."""
    return record.REPORTED.get(phase, phase)


def is_look(rec: TaskRecord, res: Dict[str, Any]) -> bool:
    """The role's look at its node: nmo_plan for one node (its ``plan``, or a failed call asked
    for one ``node``), not the playbook's one call for every node (``plans``)."""
    if rec.action != PLAN_TASK or "plans" in res:
        return False
    asked = (res.get("invocation") or {}).get("module_args") or {}
    return isinstance(res.get("plan"), str) or bool(asked.get("node"))


def pdb_of(reason: str) -> Optional[str]:
    found = PDB_NAME.search(reason + " ")
    return found.group(1) if found else None


@dataclass
class NodeStory:
    host: str
    node: str
    phases: List[Phase] = field(default_factory=list)
    open: Optional[Phase] = None
    # the role's phase (record.py) -> its module results; and LOOK, SUMMARY
    results: Dict[str, List[TaskRecord]] = field(default_factory=dict)
    failed_tasks: List[TaskRecord] = field(default_factory=list)
    api_requests: int = 0
    api_requests_by: Dict[str, int] = field(default_factory=dict)
    first: Optional[float] = None
    last: Optional[float] = None


class Collector:
    """Task results in, the report out."""

    def __init__(self, started: float, playbook: str = "", who: Optional[Dict[str, Any]] = None) -> None:
        self.started = started
        self.playbook = playbook
        self.who = who or {}
        self.stories: Dict[str, NodeStory] = {}
        self.run: Dict[str, Any] = {}
        self.settings: Dict[str, Any] = {}
        self.plans: Dict[str, Any] = {}
        self.run_requests = 0
        self.run_requests_by: Dict[str, int] = {}
        self.notes: List[str] = []

    # -- feeding ---------------------------------------------------------------------------
    def story(self, host: str) -> NodeStory:
        if host not in self.stories:
            self.stories[host] = NodeStory(host, host)
        return self.stories[host]

    def add(self, rec: TaskRecord) -> None:
        res = rec.result if isinstance(rec.result, dict) else {}
        if rec.action == RUN_TASK and rec.status == "ok" and res.get("run"):
            self.run = res
        facts = res.get("ansible_facts") or {}
        if isinstance(facts.get(REPORT_FACT), dict):
            self.settings = facts[REPORT_FACT]
        if rec.action == PLAN_TASK and isinstance(res.get("plans"), dict):
            self.plans = res["plans"]
        story = self.stories.get(rec.host)
        phase = rec.phase or None
        look = is_look(rec, res)
        if look and rec.status != "skipped":
            story = self.story(rec.host)
            story.node = res.get("node") or rec.host
            story.results.setdefault(LOOK, []).append(rec)
        count = res.get("api_requests")
        if isinstance(count, int):
            # a node's own calls (its look, those of its phases) are the node's; the rest the run's
            target = story if story is not None and (phase is not None or look) else None
            if target is not None:
                target.api_requests += count
                add_counts(target.api_requests_by, res.get("api_requests_by"))
            else:
                self.run_requests += count
                add_counts(self.run_requests_by, res.get("api_requests_by"))
        if story is None or rec.status == "skipped" or (rec.once and phase is None):
            return
        if ((res.get("ansible_stats") or {}).get("data") or {}).get("nmo_maintenance"):
            story.results.setdefault(SUMMARY, []).append(rec)  # summary.yml, wherever it is imported
        failed = rec.status in ("failed", "unreachable") and not res.get("skipped")
        if phase is None:
            # outside every phase: the look, the input check, the summary, the playbook's own
            # plays. The stretch that was open ends. A failure here is the node's, not time it
            # spent: the maintenance playbook's last play failing it with its last line
            # (node_maintenance_fail_at_run_end), after every other node had its turn
            story.open = None
            if failed:
                story.failed_tasks.append(rec)
            return
        name = label(phase)
        if story.open is None or story.open.name != name:
            story.open = Phase(name, rec.start, rec.end)
            story.phases.append(story.open)
        story.open.end = max(story.open.end, rec.end)
        story.first = rec.start if story.first is None else min(story.first, rec.start)
        story.last = rec.end if story.last is None else max(story.last, rec.end)
        if rec.action.startswith("nmo.maintenance."):
            story.results.setdefault(phase, []).append(rec)
        if failed:
            story.failed_tasks.append(rec)

    # -- the report ------------------------------------------------------------------------
    def build(self, ended: float, cluster: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        """The report as docs/report.schema.json describes it. ``cluster``: what the report's
        reads found afterwards (``replacements``: pod key -> node; ``events``: NodeMaintenance
        name -> its events), optional."""
        cluster = cluster or {}
        nodes = [node_report(s, self.plans.get(s.node), cluster, self.started) for s in self.stories.values()]
        seen = {n["name"] for n in nodes}
        for name in self.plans:  # nodes of the run that the run never reached (an earlier failure)
            if name not in seen:
                nodes.append(not_reached(name, self.plans[name]))
        order = list(self.plans)
        nodes.sort(key=lambda n: (n["start"] is None, n["start"] or "", order.index(n["name"])
                                  if n["name"] in order else len(order)))
        total = self.run_requests + sum(n["api_requests"] for n in nodes)
        by = dict(self.run_requests_by)
        for n in nodes:
            add_counts(by, n["api_requests_by"])
        failed = [n["name"] for n in nodes if n["outcome"] == "failed"]
        unfinished = [n["name"] for n in nodes if n["outcome"] in ("not reached", "interrupted", "not started",
                                                                   *BLOCKED_OUTCOMES.values())]
        return {
            "$schema": SCHEMA,
            "version": SCHEMA_VERSION,
            "run": {
                "id": self.run.get("run") or self.settings.get("run") or "",
                # the rollout the run is part of (its own id when alone; design §18.6)
                "rollout": self.run.get("rollout") or self.run.get("run") or self.settings.get("run") or "",
                "mode": self.run.get("mode") or "",
                "who": self.who,
                "playbook": self.playbook,
                "start": iso(self.started),
                "end": iso(ended),
                "seconds": round(ended - self.started, 3),
                "outcome": "failed" if failed else "partial" if unfinished else "succeeded",
                "kubernetes": (self.run.get("kubernetes") or {}).get("gitVersion", "")
                if isinstance(self.run.get("kubernetes"), dict) else str(self.run.get("kubernetes") or ""),
                "options": self.settings.get("options") or {},
                "resumed": [n["name"] for n in nodes if n["adopted_from"]],
            },
            "nodes": nodes,
            "api_requests": total,
            "api_requests_by": dict(sorted(by.items())),
            "notes": list(self.notes) + list(cluster.get("notes") or []),
        }


def add_counts(into: Dict[str, int], counts: Any) -> None:
    if isinstance(counts, dict):
        for kind, n in counts.items():
            if isinstance(n, int):
                into[kind] = into.get(kind, 0) + n


def last_result(story: NodeStory, phase: str) -> Dict[str, Any]:
    recs = [r for r in story.results.get(phase, []) if isinstance(r.result, dict)]
    return recs[-1].result if recs else {}


def split_begin(phases: List[Phase], begin: Dict[str, Any]) -> List[Phase]:
    """The begin phase cut into its waits (lease, etcd guard) and the rest, as the begin's
    result says how long each wait took (docs/design.md §5)."""
    out: List[Phase] = []
    lease = begin.get("lease") if isinstance(begin.get("lease"), dict) else {}
    for phase in phases:
        if phase.name != label(record.BEGIN) or not begin:
            out.append(phase)
            continue
        at = phase.start
        waited = float(lease.get("waited") or begin.get("waited") or 0)
        if waited >= MIN_WAIT:
            holders = ", ".join(str(h.get("holder", h) if isinstance(h, dict) else h) for h in lease.get("holders") or [])
            out.append(Phase("lease wait", at, min(at + waited, phase.end), note=f"held by {holders}" if holders else ""))
            at = min(at + waited, phase.end)
        etcd = lease.get("etcd")
        etcd_wait = float(etcd.get("waited") or 0) if isinstance(etcd, dict) else 0.0
        if etcd_wait >= MIN_WAIT:
            out.append(Phase("etcd guard wait", at, min(at + etcd_wait, phase.end)))
            at = min(at + etcd_wait, phase.end)
        out.append(Phase(label(record.BEGIN), at, phase.end))
    return out


def module_phases(story: NodeStory) -> List[Phase]:
    """Finer steps modules returned (``phases``; the drain's KubeVirt migrations)."""
    out: List[Phase] = []
    for recs in story.results.values():
        for rec in recs:
            res = rec.result if isinstance(rec.result, dict) else {}
            for item in res.get("phases") or []:
                if isinstance(item, dict) and item.get("name") and item.get("start") is not None:
                    out.append(Phase(str(item["name"]), float(item["start"]),
                                     float(item.get("end") or rec.end), note=str(item.get("note") or "")))
            started = [epoch_of(m.get("started")) for m in res.get("migrations") or [] if isinstance(m, dict)]
            started = [s for s in started if s is not None]
            if started:
                out.append(Phase("migrations", min(started), rec.end, note=f"{len(started)} VM(s)"))
    return out


def blocked_of(story: NodeStory, drain: Dict[str, Any], drain_phase: Optional[Phase]) -> List[Dict[str, Any]]:
    out = []
    for item in drain.get("blocked") or []:
        if not isinstance(item, dict):
            continue
        start = float(item.get("since") or 0) or (drain_phase.start if drain_phase else None)
        end = item.get("until")
        end = float(end) if end is not None else (drain_phase.end if drain_phase else start)
        reason = str(item.get("reason") or "")
        out.append({"kind": "pod", "pod": f"{item.get('namespace', '')}/{item.get('name', '')}",
                    "pdb": item.get("pdb") or pdb_of(reason), "reason": reason, "start": iso(start), "end": iso(end),
                    "seconds": round(max(0.0, (end or 0) - (start or 0)), 3), "earlier_run": False})
    return out


def lease_waits(phases: List[Phase], begin: Dict[str, Any]) -> List[Dict[str, Any]]:
    lease = begin.get("lease") if isinstance(begin.get("lease"), dict) else {}
    out = []
    for item in lease.get("acquired") or []:
        if isinstance(item, dict):
            out.append({"name": item.get("name", ""), "role": item.get("role", ""), "namespace": item.get("namespace", ""),
                        "action": item.get("action", ""), "holders": [], "waited": 0.0})
    waited = float(lease.get("waited") or 0)
    holders = [h.get("holder", "") if isinstance(h, dict) else str(h) for h in lease.get("holders") or []]
    if out:
        out[0]["waited"] = round(waited, 3)
        out[0]["holders"] = holders
    elif waited or holders:
        out.append({"name": lease.get("slot") or "", "role": "slot", "namespace": "", "action": "",
                    "holders": holders, "waited": round(waited, 3)})
    return out


def pods_moved(story: NodeStory, drain: Dict[str, Any], replacements: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = []
    for how, listed in (("evicted", "evicted"), ("deleted", "deleted"), ("left terminating", "left_terminating")):
        for pod in drain.get(listed) or []:
            if isinstance(pod, dict):
                key = f"{pod.get('namespace', '')}/{pod.get('name', '')}"
                out.append({"pod": key, "how": how, "from": story.node, "to": replacements.get(key)})
    return out


def earlier_story(nm_name: str, plan: Dict[str, Any], events: List[Dict[str, Any]],
                  before: Optional[float] = None) -> Dict[str, Any]:
    """What the earlier run did for an adopted node, from its NodeMaintenance (as the run's
    plan read it at the start) and the events on it: phases and blocked stretches, marked
    earlier_run. Only what happened ``before`` this run began is the earlier run's."""
    nm = ((plan or {}).get("report") or {}).get("maintenance") or {}
    if before is not None:
        events = [ev for ev in events if (epoch_of(ev.get("firstTimestamp") or ev.get("eventTime")) or 0) < before]
    firsts: Dict[str, float] = {}
    seen = [epoch_of(nm.get("lastUpdate"))]
    for ev in events:
        at = epoch_of(ev.get("firstTimestamp") or ev.get("eventTime"))
        if at is not None:
            reason = ev.get("reason", "")
            firsts[reason] = min(firsts.get(reason, at), at)
        seen += [at, epoch_of(ev.get("lastTimestamp"))]
    if before is not None:
        seen = [t for t in seen if t is not None and t < before]
    created = epoch_of(nm.get("created")) or firsts.get("BeginMaintenance")
    # the last sign of the earlier run: its last status write or event (a killed run says no more)
    last = max((t for t in seen if t is not None), default=None)
    phases: List[Phase] = []
    blocked: List[Dict[str, Any]] = []
    if created is not None:
        drain_at = firsts.get("Drain")
        begin_end = drain_at if drain_at is not None else (last or created)
        phases.append(Phase(label(record.BEGIN), created, max(created, begin_end), earlier_run=True))
        if drain_at is not None:
            end = max(drain_at, last or drain_at)
            phases.append(Phase(label(record.DRAIN), drain_at, end, earlier_run=True,
                                note=f"{nm.get('phase', '')} at {nm.get('drainProgress', 0)}% when that run stopped"))
            for ev in events:
                if ev.get("reason") != "DrainError":
                    continue
                at = epoch_of(ev.get("firstTimestamp"))
                message = ev.get("message", "")
                pod = re.search(r"Pod (\S+/\S+) stays pending", message)
                if at is None or not pod:
                    continue
                blocked.append({"kind": "pod", "pod": pod.group(1), "pdb": pdb_of(message), "reason": message,
                                "start": iso(at), "end": iso(end), "seconds": round(max(0.0, end - at), 3),
                                "earlier_run": True})
    return {"maintenance": nm_name, "phase": nm.get("phase", ""), "drainProgress": nm.get("drainProgress", 0),
            "pendingPods": nm.get("pendingPods") or [], "lastError": nm.get("lastError", ""),
            "phases": phases, "blocked": blocked}


def node_report(story: NodeStory, plan: Optional[Dict[str, Any]], cluster: Dict[str, Any],
                run_start: Optional[float] = None) -> Dict[str, Any]:
    begin = last_result(story, record.BEGIN)
    drain = last_result(story, record.DRAIN)
    failed = last_result(story, record.FAILED)
    look = last_result(story, LOOK)
    summary_recs = story.results.get(SUMMARY) or []
    summary: Dict[str, Any] = {}
    for rec in summary_recs:
        data = ((rec.result.get("ansible_stats") or {}).get("data") or {}).get("nmo_maintenance") or {}
        summary = data.get(story.node) or summary
    phases = split_begin(story.phases, begin)
    drain_phase = next((p for p in phases if p.name == label(record.DRAIN)), None)
    phases += module_phases(story)
    blocked = blocked_of(story, drain, drain_phase)
    for p in phases:
        if p.name == "lease wait":
            blocked.append({"kind": "lease", "pod": None, "pdb": None,
                            "reason": "waiting for a maintenance slot or the node lease" + (f" ({p.note})" if p.note else ""),
                            "start": iso(p.start), "end": iso(p.end), "seconds": round(p.end - p.start, 3),
                            "earlier_run": False})
        elif p.name == "etcd guard wait":
            blocked.append({"kind": "etcd", "pod": None, "pdb": None, "reason": "etcd quorum would not be kept",
                            "start": iso(p.start), "end": iso(p.end), "seconds": round(p.end - p.start, 3),
                            "earlier_run": False})
    adopted = begin.get("adopted_from") or None
    earlier = None
    if adopted:
        nm = (begin.get("maintenance") or {}).get("name") or ""
        earlier = earlier_story(nm, plan or {}, (cluster.get("events") or {}).get(nm) or [], run_start)
        phases = earlier.pop("phases") + phases
        blocked = earlier.pop("blocked") + blocked
    phases.sort(key=lambda p: (p.start, p.end))
    error = str(summary.get("error") or "")
    if not error and story.failed_tasks:
        error = str(story.failed_tasks[-1].result.get("msg") or "task failed")
    outcome = outcome_of(story, summary, look, error, failed)
    start = min((p.start for p in phases), default=story.first)
    end = max((p.end for p in phases), default=story.last)
    return {
        "name": story.node,
        "host": story.host,
        "outcome": outcome,
        "result": str(summary.get("result") or look.get("outcome") or ""),
        "maintenance": (begin.get("maintenance") or {}).get("name") or summary.get("maintenance") or "",
        "adopted_from": adopted,
        "start": iso(start),
        "end": iso(end),
        "seconds": round((end or 0) - (start or 0), 3) if start is not None else 0.0,
        "phases": [p.out() for p in phases],
        "blocked": blocked,
        "pods_moved": pods_moved(story, drain, cluster.get("replacements") or {}),
        "leases": lease_waits(phases, begin),
        "error": error,
        "failed_phase": str(failed.get("phase") or summary.get("failed_phase") or ""),
        "policy": str(failed.get("policy") or summary.get("policy") or ""),
        "rolled_back": failed.get("rolled_back") if failed else None,
        "rollback_steps": list(failed.get("reached") or []) if failed else [],
        "kept_out_of_service": bool(failed.get("kept") or summary.get("kept_out_of_service")),
        "state": str(failed.get("message") or ""),
        "earlier_run": earlier,
        "api_requests": story.api_requests,
        "api_requests_by": dict(sorted(story.api_requests_by.items())),
    }


# a node whose drain could not finish, by node_maintenance_on_blocked (model/blocked.py)
BLOCKED_OUTCOMES = {"skip": "skipped (blocked)", "quarantine": "quarantined"}


def outcome_of(story: NodeStory, summary: Dict[str, Any], look: Dict[str, Any], error: str,
               failed: Optional[Dict[str, Any]] = None) -> str:
    action = ((failed or {}).get("blocked") or {}).get("action")
    if action in BLOCKED_OUTCOMES:  # its drain could not finish; the rollout went on (docs/design.md §18.4)
        return BLOCKED_OUTCOMES[action]
    if str(summary.get("result") or "").startswith("not started"):
        # the rollout scheduler stopped it before it began: so even when its stop fails the run
        # (a failure in another run of its rollout, a place only a gone run's kept node holds)
        return "not started"
    if error or story.failed_tasks:
        return "failed"
    if not story.phases:
        return "skipped" if look or summary else "not reached"
    if not any(p.name == label(record.END) and not p.earlier_run for p in story.phases):
        return "interrupted"  # the play ended (another node's failure, max_fail_percentage 0) before its end
    return "succeeded"


def not_reached(name: str, plan: Any) -> Dict[str, Any]:
    return {"name": name, "host": name, "outcome": "not reached", "result": "", "maintenance": "",
            "adopted_from": None, "start": None, "end": None, "seconds": 0.0, "phases": [], "blocked": [],
            "pods_moved": [], "leases": [], "error": "", "failed_phase": "", "policy": "", "rolled_back": None,
            "rollback_steps": [], "kept_out_of_service": False, "state": "", "earlier_run": None,
            "api_requests": 0, "api_requests_by": {}}


def moved_pods(collector: Collector) -> List[tuple]:
    """(pod key, node, when it left) of every pod the run's drains moved, for the reads."""
    out = []
    for story in collector.stories.values():
        for rec in story.results.get(record.DRAIN, []):
            res = rec.result if isinstance(rec.result, dict) else {}
            for how in ("evicted", "deleted"):
                for pod in res.get(how) or []:
                    if isinstance(pod, dict):
                        out.append((f"{pod.get('namespace', '')}/{pod.get('name', '')}", story.node, rec.start))
    return out


def adopted_maintenances(collector: Collector) -> List[str]:
    out = []
    for story in collector.stories.values():
        begin = last_result(story, record.BEGIN)
        if begin.get("adopted_from"):
            out.append((begin.get("maintenance") or {}).get("name") or "")
    return [n for n in out if n]
