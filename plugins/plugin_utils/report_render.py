# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The run report's three files from its content (report_model.py; docs/report.md):
``report.json`` (the content as is), ``report.xml`` (JUnit: a test case a node) and
``report.html`` (one self-contained page: inline CSS and SVG, no script, nothing fetched).

Pure: strings in, strings out. Everything that comes from the run (node names, errors,
reasons) is escaped where it is written: XML and HTML escaping, never markup built from it.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from xml.etree import ElementTree

from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_model import epoch_of

# phase name -> bar colour; a phase not listed gets OTHER
COLOURS = {
    "lease wait": "#e3b448", "etcd guard wait": "#d4763b", "begin": "#5b8def", "hooks before_drain": "#9b6cd1",
    "drain": "#3aa17e", "migrations": "#c061cb", "hooks work": "#7e57c2", "ready wait": "#4fb3d9",
    "gate": "#f39c4a", "confirm": "#b0b0b0", "end": "#2f6fb7", "settle": "#8bc6a6", "hooks after": "#b39ddb",
    "failed": "#d64545",
}
OTHER = "#8e99a8"
BOLD, FADED, NUM = ' font-weight="700"', ' opacity="0.55"', ' class="num"'
OUTCOME_COLOURS = {"succeeded": "#2e9e5b", "failed": "#d64545", "skipped": "#8e99a8", "not reached": "#8e99a8",
                   "interrupted": "#e3b448", "not started": "#8e99a8", "skipped (blocked)": "#c9a227",
                   "quarantined": "#d9822b"}
BLOCKED = ("skipped (blocked)", "quarantined")  # docs/design.md §18.4
# JUnit's skipped: nodes the run did not maintain (another's, never reached, stopped, blocked)
SKIPPED = ("skipped", "not reached", "not started", *BLOCKED)


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def to_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


# -- JUnit -----------------------------------------------------------------------------------
def to_junit(report: Dict[str, Any]) -> str:
    """One test suite for the run, one test case a node (its duration); a failed node has a
    failure with the error and what was rolled back, a node not maintained is skipped."""
    run = report["run"]
    nodes = report["nodes"]
    failures = sum(1 for n in nodes if n["outcome"] in ("failed", "interrupted"))
    skipped = sum(1 for n in nodes if n["outcome"] in SKIPPED)
    suites = ElementTree.Element("testsuites", name="nmo.maintenance", tests=str(len(nodes)),
                                 failures=str(failures), errors="0", time=f"{run['seconds']:.3f}")
    suite = ElementTree.SubElement(suites, "testsuite", name=f"nmo.maintenance run {run['id']}", tests=str(len(nodes)),
                                   failures=str(failures), errors="0", skipped=str(skipped),
                                   time=f"{run['seconds']:.3f}", timestamp=(run["start"] or "").rstrip("Z"))
    props = ElementTree.SubElement(suite, "properties")
    for key in ("id", "mode", "outcome", "start", "end"):
        ElementTree.SubElement(props, "property", name=f"run.{key}", value=str(run.get(key) or ""))
    for node in nodes:
        case = ElementTree.SubElement(suite, "testcase", classname=f"nmo.maintenance.{run['id']}",
                                      name=node["name"], time=f"{node['seconds']:.3f}")
        if node["outcome"] in ("failed", "interrupted"):
            text = [f"error: {node['error'] or 'the run stopped before this node ended'}"]
            if node["failed_phase"]:
                text.append(f"failed phase: {node['failed_phase']} (policy {node['policy'] or '-'})")
            if node["rolled_back"] is not None:
                text.append("rolled back: " + (", ".join(node["rollback_steps"]) or "nothing")
                            if node["rolled_back"] else "kept out of service (not rolled back)")
            if node["state"]:
                text.append(node["state"])
            failure = ElementTree.SubElement(case, "failure", message=(node["error"] or node["outcome"])[:1000],
                                             type=node["failed_phase"] or node["outcome"])
            failure.text = "\n".join(text)
        elif node["outcome"] in SKIPPED:
            ElementTree.SubElement(case, "skipped", message=node["result"] or node["outcome"])
        out = ElementTree.SubElement(case, "system-out")
        out.text = "\n".join(f"{p['name']}: {p['start']} .. {p['end']} ({p['seconds']:.1f} s)"
                             + (" [earlier run]" if p["earlier_run"] else "") for p in node["phases"])
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


# -- HTML ------------------------------------------------------------------------------------
CSS = """
:root{--ink:#1f2933;--muted:#5f6b7a;--line:#e3e7ed;--bg:#f7f9fb}
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;font:14px/1.45 -apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
color:var(--ink);background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:15px;margin:20px 0 6px}
.sub{color:var(--muted);margin:0 0 16px}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;color:#fff;font-size:12px;font-weight:600;vertical-align:middle}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0 18px}
.card{background:var(--bg);border:1px solid var(--line);border-radius:8px;padding:8px 14px;min-width:110px}
.card b{display:block;font-size:20px}.card span{color:var(--muted);font-size:12px}
.legend{display:flex;gap:14px;flex-wrap:wrap;margin:6px 0 10px;color:var(--muted);font-size:12px}
.legend i{display:inline-block;width:14px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.timeline{border:1px solid var(--line);border-radius:8px;background:#fff;overflow-x:auto}
table{border-collapse:collapse;width:100%;margin:4px 0 8px;font-size:13px}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;background:var(--bg)}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.node{border:1px solid var(--line);border-radius:8px;padding:4px 16px 10px;margin:14px 0}
.node.failed{border-color:#e8a3a3;background:#fff8f8}
.error{white-space:pre-wrap;background:#fdecec;border-left:3px solid #d64545;padding:6px 10px;margin:6px 0;
font-family:monospace;font-size:12px}
.earlier{color:#8a5a00;font-style:italic}
.muted{color:var(--muted)}
"""


def nice_step(span: float, ticks: int = 8) -> float:
    """A round tick interval (1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1 h ...) near span/ticks."""
    raw = max(span / ticks, 0.001)
    for step in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600):
        if step >= raw:
            return float(step)
    return float(math.ceil(raw / 3600) * 3600)


def clock(epoch: float, with_seconds: bool = True) -> str:
    t = int(round(epoch)) % 86400
    return f"{t // 3600:02d}:{t % 3600 // 60:02d}" + (f":{t % 60:02d}" if with_seconds else "")


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def span_of(report: Dict[str, Any]) -> Tuple[float, float]:
    times = [epoch_of(report["run"]["start"]), epoch_of(report["run"]["end"])]
    for node in report["nodes"]:
        for item in node["phases"] + node["blocked"]:
            times += [epoch_of(item["start"]), epoch_of(item["end"])]
    known = [t for t in times if t is not None]
    start, end = (min(known), max(known)) if known else (0.0, 1.0)
    return start, max(end, start + 1.0)


def concurrency(report: Dict[str, Any]) -> List[Tuple[float, int]]:
    """(time, nodes in maintenance from then on), from each node's first to its last phase."""
    edges: List[Tuple[float, int]] = []
    for node in report["nodes"]:
        start, end = epoch_of(node["start"]), epoch_of(node["end"])
        if start is not None and end is not None and node["phases"]:
            edges += [(start, 1), (end, -1)]
    steps, level = [], 0
    for at, delta in sorted(edges, key=lambda e: (e[0], e[1])):
        level += delta
        steps.append((at, level))
    return steps


def timeline_svg(report: Dict[str, Any]) -> str:
    nodes = report["nodes"]
    start, end = span_of(report)
    label_w, width, row_h, top = 230, 1180, 30, 34
    plot_w = width - label_w - 20
    conc_h = 46
    height = top + row_h * len(nodes) + conc_h + 34

    def x(t: Optional[float]) -> float:
        return label_w + (((t or start) - start) / (end - start)) * plot_w

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="timeline of the run" font-family="sans-serif">',
             '<defs><pattern id="blocked" width="7" height="7" patternUnits="userSpaceOnUse" '
             'patternTransform="rotate(45)"><rect width="7" height="7" fill="#fbe3e3"/>'
             '<rect width="3" height="7" fill="#d64545"/></pattern>'
             '<pattern id="earlier" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)">'
             '<rect width="6" height="6" fill="#ffffff" fill-opacity="0"/><rect width="2" height="6" fill="#ffffff" '
             'fill-opacity="0.55"/></pattern></defs>']
    step = nice_step(end - start)
    tick = math.ceil(start / step) * step
    bottom = top + row_h * len(nodes)
    while tick <= end + 1e-6:
        tx = x(tick)
        parts.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{bottom + conc_h}" stroke="#e3e7ed"/>')
        parts.append(f'<text x="{tx:.1f}" y="{top - 12}" font-size="11" fill="#5f6b7a" text-anchor="middle">'
                     f'{esc(clock(tick, step < 60))}</text>')
        tick += step
    for i, node in enumerate(nodes):
        y = top + i * row_h
        failed = node["outcome"] == "failed"
        if i % 2:
            parts.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="#f7f9fb"/>')
        mark_colour = OUTCOME_COLOURS.get(node["outcome"], OTHER)
        mark = {"succeeded": "✓", "failed": "✗", "interrupted": "…"}.get(node["outcome"], "–")
        title = f"{node['name']}: {node['outcome']}" + (f" — {node['error']}" if node["error"] else "")
        parts.append(f'<g class="row" data-node="{esc(node["name"])}" data-outcome="{esc(node["outcome"])}">'
                     f'<title>{esc(title)}</title>'
                     f'<text x="10" y="{y + 19}" font-size="13" fill="{mark_colour}" font-weight="700">{mark}</text>'
                     f'<text x="28" y="{y + 19}" font-size="13" fill="{"#b02a2a" if failed else "#1f2933"}"'
                     f'{BOLD if failed else ""}>{esc(shorten(node["name"], 28))}</text>')
        if node["adopted_from"]:
            parts.append(f'<text x="{label_w - 8}" y="{y + 19}" font-size="10" fill="#8a5a00" text-anchor="end">'
                         'resumed</text>')
        if not node["phases"]:
            parts.append(f'<text x="{label_w + 6}" y="{y + 19}" font-size="12" fill="#8e99a8" font-style="italic">'
                         f'{esc(node["outcome"])}{(": " + esc(node["result"])) if node["result"] else ""}</text>')
        if node["phases"]:  # the whole stay in maintenance, under its phases
            ns, ne = epoch_of(node["start"]), epoch_of(node["end"])
            parts.append(f'<rect class="stay" x="{x(ns):.1f}" y="{y + row_h / 2 - 2:.1f}" '
                         f'width="{max(1.0, x(ne) - x(ns)):.1f}" height="4" rx="2" fill="#c9d3df">'
                         f'<title>{esc(node["name"])}: in maintenance {esc(duration(node["seconds"]))}</title></rect>')
        for phase in node["phases"]:
            ps, pe = epoch_of(phase["start"]), epoch_of(phase["end"])
            bx, bw = x(ps), max(2.0, x(pe) - x(ps))
            colour = COLOURS.get(phase["name"], OTHER)
            tip = (f"{node['name']} — {phase['name']}: {clock(ps or 0)} to {clock(pe or 0)} ({duration(phase['seconds'])})"
                   + (" — done by the earlier run" if phase["earlier_run"] else "")
                   + (f" — {phase['note']}" if phase["note"] else ""))
            parts.append(f'<rect class="phase" data-phase="{esc(phase["name"])}" x="{bx:.1f}" y="{y + 7}" '
                         f'width="{bw:.1f}" height="{row_h - 14}" rx="3" fill="{colour}"'
                         f'{FADED if phase["earlier_run"] else ""}><title>{esc(tip)}</title></rect>')
            if phase["earlier_run"]:
                parts.append(f'<rect x="{bx:.1f}" y="{y + 7}" width="{bw:.1f}" height="{row_h - 14}" rx="3" '
                             'fill="url(#earlier)" pointer-events="none"/>')
        for item in node["blocked"]:
            bs, be = epoch_of(item["start"]), epoch_of(item["end"])
            bx, bw = x(bs), max(3.0, x(be) - x(bs))
            what = item["pod"] or item["kind"]
            label = f"blocked: {what}" + (f" (PDB {item['pdb']})" if item["pdb"] else "")
            tip = f"{node['name']} — {label} for {duration(item['seconds'])}: {item['reason']}"
            parts.append(f'<g class="blocked" data-reason="{esc(item["reason"])}">'
                         f'<rect x="{bx:.1f}" y="{y + 3}" width="{bw:.1f}" height="{row_h - 6}" rx="3" '
                         f'fill="url(#blocked)" stroke="#b02a2a" stroke-width="1" opacity="0.9"/>'
                         f'<title>{esc(tip)}</title>')
            if bw > 60:
                parts.append(f'<text x="{bx + 4:.1f}" y="{y + row_h - 9}" font-size="10" fill="#7a1010" '
                             f'font-weight="700">{esc(shorten(label, int(bw / 6)))}</text>')
            parts.append('</g>')
        if failed:
            fx = x(epoch_of(node["end"]))
            parts.append(f'<text x="{fx + 5:.1f}" y="{y + 19}" font-size="11" fill="#b02a2a" font-weight="700">'
                         f'failed{(" in " + esc(node["failed_phase"])) if node["failed_phase"] else ""}</text>')
        parts.append('</g>')
    # concurrency: how many nodes were in maintenance at once
    steps = concurrency(report)
    peak = max([lvl for _t, lvl in steps] + [1])
    cy = bottom + 8
    parts.append(f'<text x="10" y="{cy + 22}" font-size="12" fill="#5f6b7a">nodes at once (peak {peak})</text>')
    path, level, last_x = [f"M{x(start):.1f},{cy + conc_h - 8}"], 0, x(start)
    for at, lvl in steps:
        nx = x(at)
        path.append(f"L{nx:.1f},{cy + conc_h - 8 - (conc_h - 16) * level / peak:.1f}")
        path.append(f"L{nx:.1f},{cy + conc_h - 8 - (conc_h - 16) * lvl / peak:.1f}")
        level, last_x = lvl, nx
    path.append(f"L{max(last_x, x(end)):.1f},{cy + conc_h - 8}Z")
    parts.append(f'<path d="{" ".join(path)}" fill="#5b8def" fill-opacity="0.25" stroke="#2f6fb7" stroke-width="1.2"/>')
    parts.append(f'<text x="{label_w}" y="{height - 6}" font-size="11" fill="#5f6b7a">UTC; '
                 f'{esc(report["run"]["start"])} to {esc(report["run"]["end"])}</text>')
    parts.append("</svg>")
    return "".join(parts)


def shorten(text: str, limit: int) -> str:
    limit = max(limit, 4)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def legend(report: Dict[str, Any]) -> str:
    names = []
    for node in report["nodes"]:
        for p in node["phases"]:
            if p["name"] not in names:
                names.append(p["name"])
    items = [f'<span><i style="background:{COLOURS.get(n, OTHER)}"></i>{esc(n)}</span>' for n in names]
    items.append('<span><i style="background:repeating-linear-gradient(45deg,#d64545 0 3px,#fbe3e3 3px 6px)"></i>'
                 'blocked (PDB, lease, etcd)</span>')
    if any(n["adopted_from"] for n in report["nodes"]):
        items.append('<span><i style="background:#5b8def;opacity:.5"></i>done by the earlier run (resumed)</span>')
    return '<div class="legend">' + "".join(items) + "</div>"


def table(headers: List[str], rows: List[List[str]], numeric: Tuple[int, ...] = ()) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{NUM if i in numeric else ""}>{cell}</td>'
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def at(text: Optional[str]) -> str:
    t = epoch_of(text)
    return esc(clock(t)) if t is not None else "—"


def node_section(node: Dict[str, Any]) -> str:
    colour = OUTCOME_COLOURS.get(node["outcome"], OTHER)
    out = [f'<section class="node{" failed" if node["outcome"] == "failed" else ""}" data-node="{esc(node["name"])}">',
           f'<h3>{esc(node["name"])} <span class="badge" style="background:{colour}">{esc(node["outcome"])}</span> '
           f'<span class="muted">{esc(duration(node["seconds"]))}'
           f'{(" · NodeMaintenance " + esc(node["maintenance"])) if node["maintenance"] else ""}'
           f' · {node["api_requests"]} API requests</span></h3>']
    if node["adopted_from"]:
        earlier = node["earlier_run"] or {}
        pending = ", ".join(map(str, earlier.get("pendingPods") or []))
        out.append(f'<p class="earlier">Resumed from run {esc(node["adopted_from"])}: it had left the NodeMaintenance '
                   f'{esc(earlier.get("phase", ""))} at {esc(earlier.get("drainProgress", 0))}%'
                   f'{(", pending " + esc(pending)) if pending else ""}. Its phases are marked "earlier run".</p>')
    if node["error"]:
        rolled = ("rolled back: " + ", ".join(node["rollback_steps"])) if node["rolled_back"] else (
            "kept out of service" if node["rolled_back"] is False else "")
        out.append(f'<div class="error">{esc(node["error"])}'
                   f'{("<br>" + esc(rolled)) if rolled else ""}</div>')
    out.append(table(["phase", "start", "end", "duration", ""],
                     [[esc(p["name"]), at(p["start"]), at(p["end"]), esc(duration(p["seconds"])),
                       ('<span class="earlier">earlier run</span> ' if p["earlier_run"] else "") + esc(p["note"])]
                      for p in node["phases"]], (3,)))
    out.append(table(["blocked by", "PDB", "from", "to", "for", "reason"],
                     [[esc(b["pod"] or b["kind"]), esc(b["pdb"] or ""), at(b["start"]), at(b["end"]),
                       esc(duration(b["seconds"])),
                       ('<span class="earlier">earlier run</span> ' if b["earlier_run"] else "") + esc(b["reason"])]
                      for b in node["blocked"]], (4,)))
    out.append(table(["pod moved", "how", "from", "to"],
                     [[esc(p["pod"]), esc(p["how"]), esc(p["from"]), esc(p["to"] or "unknown")]
                      for p in node["pods_moved"]]))
    out.append(table(["lease", "role", "waited", "holders"],
                     [[esc(le["name"]), esc(le["role"]), esc(duration(le["waited"])), esc(", ".join(le["holders"]))]
                      for le in node["leases"] if le["name"]], (2,)))
    if not node["phases"] or node["outcome"] in BLOCKED:  # a blocked node's result says what was done and why
        out.append(f'<p class="muted">{esc(node["result"] or node["outcome"])}</p>')
    out.append("</section>")
    return "".join(out)


def to_html(report: Dict[str, Any]) -> str:
    run = report["run"]
    nodes = report["nodes"]
    counts: Dict[str, int] = {}
    for n in nodes:
        counts[n["outcome"]] = counts.get(n["outcome"], 0) + 1
    moved = sum(len(n["pods_moved"]) for n in nodes)
    blocked = sum(b["seconds"] for n in nodes for b in n["blocked"])
    colour = OUTCOME_COLOURS.get(run["outcome"], OTHER)
    cards = [(duration(run["seconds"]), "run time"), (str(len(nodes)), "nodes")]
    cards += [(str(v), k) for k, v in sorted(counts.items())]
    cards += [(str(moved), "pods moved"), (duration(blocked), "blocked"), (str(report["api_requests"]), "API requests")]
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.get("notes") or [])
    options = ", ".join(f"{esc(k)}={esc(v)}" for k, v in sorted((run.get("options") or {}).items()))
    who = run.get("who") or {}
    return "".join([
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        f'<title>nmo.maintenance run {esc(run["id"])}</title>',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<style>{CSS}</style></head><body>',
        f'<h1>Maintenance run {esc(run["id"])} <span class="badge" id="run-outcome" style="background:{colour}">'
        f'{esc(run["outcome"])}</span></h1>',
        f'<p class="sub">{at(run["start"])} to {at(run["end"])} UTC · mode {esc(run["mode"] or "—")} · '
        f'by {esc(who.get("user", "?"))}@{esc(who.get("host", "?"))}'
        f'{(" · AWX job " + esc(who["awx_job_id"])) if who.get("awx_job_id") else ""}'
        f'{(" · Kubernetes " + esc(run["kubernetes"])) if run.get("kubernetes") else ""}</p>',
        '<div class="cards">' + "".join(f'<div class="card"><b>{esc(v)}</b><span>{esc(k)}</span></div>'
                                        for v, k in cards) + "</div>",
        f'<p class="muted">options: {options}</p>' if options else "",
        "<h2>Timeline</h2>", legend(report),
        f'<div class="timeline">{timeline_svg(report)}</div>',
        f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "",
        "<h2>Nodes</h2>", "".join(node_section(n) for n in nodes),
        '<p class="muted">Written by the nmo.maintenance report callback; report.json holds the same '
        'content (docs/report.md).</p></body></html>\n',
    ])


def write_report(directory: Path, report: Dict[str, Any]) -> Path:
    """report.json, report.xml and report.html in ``directory`` (made when missing), each
    written whole then moved in place; the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("report.json", to_json(report)), ("report.xml", to_junit(report)),
                       ("report.html", to_html(report))):
        part = directory / f".{name}.part"
        part.write_text(text, encoding="utf-8")
        part.replace(directory / name)
    return directory / "report.html"
