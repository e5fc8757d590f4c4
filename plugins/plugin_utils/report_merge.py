"""One report for a rollout of several runs: AWX job slices (docs/report.md, "A rollout of
several runs"; design §18.6).

Each slice's run writes the report of its own share. The runs of a shared rollout write theirs
in ``<base>/<run id>/``, where ``<base>`` is ``node_maintenance_report_dir`` (by default
``nmo-reports/<rollout>``), and the rollout's report, merged from every run report of the
rollout found there, in ``<base>/`` itself: by each run as it ends (the last one to end writes it
whole), and again by ``playbooks/report.yml -e rollout=<id>``.

The merge is plain data: the run reports in, one report out, of the same schema. Each node once:
where two runs reported a node (a slice that found it `not reached` after another finished it,
a relaunch), the report that took it furthest wins (a node that began over one that did not),
then the later one. The run's section spans the runs: the earliest start, the latest end, the
worst outcome; ``runs`` names them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_model import epoch_of
from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_render import write_report

NOT_BEGUN = ("not reached", "not started", "skipped")
OUTCOME_RANK = {"succeeded": 0, "partial": 1, "failed": 2}
PARTS = ("report.json", "report.xml", "report.html")


def rollout_of(report: Dict[str, Any]) -> str:
    run = report.get("run") or {}
    return str(run.get("rollout") or run.get("id") or "")


def shared(run_id: str, rollout: str) -> bool:
    return bool(rollout) and rollout != run_id


def base_dir(given: str, rollout: str) -> Path:
    """Where a shared rollout's reports go: ``node_maintenance_report_dir``, else
    ``nmo-reports/<rollout>``."""
    return Path(given) if given else Path("nmo-reports") / rollout


def report_dirs(given: str, run_id: str, rollout: str = "") -> Tuple[Path, Optional[Path]]:
    """Where a run writes its report, and its rollout's (None for a run alone): the one rule
    the report callback and the role's summary (filter report_paths) both ask. ``given``:
    ``node_maintenance_report_dir`` (empty: the default)."""
    if shared(run_id, rollout):
        base = base_dir(given, rollout)
        return base / run_id, base
    return Path(given or str(Path("nmo-reports") / run_id)), None


def run_reports(base: Path, rollout: str) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The run reports of ``rollout`` in ``base``'s folders, oldest first, and a note for each
    report that could not be read."""
    found: List[Dict[str, Any]] = []
    notes: List[str] = []
    for path in sorted(base.glob("*/report.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            notes.append(f"{path}: not read ({type(exc).__name__}: {exc})")
            continue
        if isinstance(report, dict) and rollout_of(report) == rollout and (report.get("run") or {}).get("id"):
            found.append(report)
    found.sort(key=lambda r: (r["run"].get("start") or "", r["run"]["id"]))
    return found, notes


def _weight(node: Dict[str, Any]) -> Tuple[int, str]:
    return (0 if node.get("outcome") in NOT_BEGUN else 1, node.get("end") or node.get("start") or "")


def merge(reports: List[Dict[str, Any]], rollout: str, notes: Optional[List[str]] = None) -> Dict[str, Any]:
    """The rollout's report from its runs' reports (at least one)."""
    if not reports:
        raise ValueError(f"no run report of rollout {rollout}")
    nodes: Dict[str, Dict[str, Any]] = {}
    for report in reports:
        for node in report.get("nodes") or []:
            name = node.get("name", "")
            kept = nodes.get(name)
            if kept is None or _weight(node) >= _weight(kept):
                nodes[name] = node
    ordered = sorted(nodes.values(), key=lambda n: (n.get("start") is None, n.get("start") or "", n.get("name", "")))
    by: Dict[str, int] = {}
    for report in reports:
        for kind, count in (report.get("api_requests_by") or {}).items():
            by[kind] = by.get(kind, 0) + int(count)
    runs = [r["run"] for r in reports]
    first = runs[0]
    starts = [r.get("start") for r in runs if r.get("start")]
    ends = [r.get("end") for r in runs if r.get("end")]
    start, end = (min(starts) if starts else None), (max(ends) if ends else None)
    failed = any(n.get("outcome") == "failed" for n in ordered)
    worst = max((OUTCOME_RANK.get(r.get("outcome"), 1) for r in runs), default=0)
    outcome = "failed" if failed or worst == 2 else "partial" if worst == 1 else "succeeded"
    said = [f"run {r['id']}: {note}" for r in reports for note in (r.get("notes") or [])]
    return {
        "$schema": reports[0].get("$schema"),
        "version": max(int(r.get("version") or 0) for r in reports),
        "run": {
            "id": rollout,
            "rollout": rollout,
            "runs": [r["id"] for r in runs],
            "mode": first.get("mode") or "",
            "who": first.get("who") or {"user": "", "host": "", "awx_job_id": None},
            "playbook": first.get("playbook") or "",
            "start": start,
            "end": end,
            "seconds": _seconds(start, end),
            "outcome": outcome,
            "kubernetes": first.get("kubernetes") or "",
            "options": first.get("options") or {},
            "resumed": sorted({name for r in runs for name in (r.get("resumed") or [])}),
        },
        "nodes": ordered,
        "api_requests": sum(int(r.get("api_requests") or 0) for r in reports),
        "api_requests_by": dict(sorted(by.items())),
        "notes": said + list(notes or []),
    }


def _seconds(start: Optional[str], end: Optional[str]) -> float:
    began, ended = epoch_of(start), epoch_of(end)
    return round(max(ended - began, 0.0), 3) if began is not None and ended is not None else 0.0


def write_rollout_report(base: Path, rollout: str) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """The rollout's report from the run reports in ``base``, written there (None when there is
    no run report of it yet), and the notes of reports not read."""
    reports, notes = run_reports(base, rollout)
    if not reports:
        return None, notes
    report = merge(reports, rollout, notes)
    write_report(base, report)
    return report, notes
