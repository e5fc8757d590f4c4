"""The table, the ratios to the best peer (B7: to NMO), and the issue's targets (met, or missed by how much)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from scenarios import Row
from tools import K8S_DRAIN, KUBECTL, LABELS, NMO, OPERATOR

PEERS = (KUBECTL, K8S_DRAIN, OPERATOR)  # the operator is B7's only peer


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def add_ratios(rows: List[Row]) -> None:
    """Each row's wall time and requests over the best (lowest) peer's in the same case."""
    cases: Dict[tuple, List[Row]] = {}
    for row in rows:
        cases.setdefault((row.scenario, row.case), []).append(row)
    for group in cases.values():
        peers = [r for r in group if r.tool in PEERS and not r.rc and r.wall is not None]
        for key, attr in (("x_best_peer_wall", "wall"), ("x_best_peer_requests", "requests")):
            best = min((getattr(r, attr) for r in peers if getattr(r, attr)), default=None)
            for row in group:
                value = getattr(row, attr)
                row.extra[key] = round(value / best, 2) if best and value is not None and row.rc == 0 else None


def table(rows: List[Row]) -> str:
    head = ["scenario", "case", "tool", "wall s", "module s", "requests", "peak RSS MiB", "x peer wall",
            "x peer req", "note"]
    lines = [head]
    for r in rows:
        module = r.extra.get("module_elapsed") or r.extra.get("drain_elapsed")
        note = r.note
        if r.scenario == "B3" and r.extra.get("after_allowed") is not None:
            note = (note + "; " if note else "") + f"ended {r.extra['after_allowed']} s after the PDB allowed"
        if r.scenario == "B4" and r.extra.get("tasks_per_node") is not None:
            note = (note + "; " if note else "") + (f"{r.extra['tasks_per_node']:g} tasks/node "
                                                    f"(+{r.extra['skipped_tasks_per_node']:g} skipped)")
        if r.scenario == "B4" and r.extra.get("overhead_per_node") is not None:
            note = (note + "; " if note else "") + f"overhead {r.extra['overhead_per_node']} s/node"
        if r.scenario == "B7" and r.extra.get("drain_ms_per_pod") is not None:
            note = (note + "; " if note else "") + (f"{r.pods} pods: drain {r.extra['drain_ms_per_pod']:g} ms/pod, "
                                                    f"{r.extra.get('requests_per_pod')} req/pod "
                                                    f"(drain {r.extra.get('drain_requests_per_pod')})")
            if r.extra.get("preflight_requests"):
                note += f"; pre-flight {r.extra['preflight_requests']} req"
            if r.tool == OPERATOR and r.extra.get("released_after_delete") is not None:
                note += f"; node let go {r.extra['released_after_delete']:g} s after the NM's deletion"
        if r.scenario == "B6" and r.extra.get("requests_per_node") is not None:
            top = list((r.extra.get("requests_per_node_by") or {}).items())[:4]
            note = (note + "; " if note else "") + f"{r.extra['requests_per_node']} req/node (" + ", ".join(
                f"{what} {n:g}" for what, n in top) + ")"
        if r.scenario == "B5" and r.extra.get("control_plane_rss_mib"):
            note = (note + "; " if note else "") + f"world built in {r.extra.get('world_built_s')} s, " + ", ".join(
                f"{k} {v} MiB" for k, v in r.extra["control_plane_rss_mib"].items())
            note += f", node lease {r.extra.get('node_lease_s')} s"
            load = (r.extra.get("loadavg_before_after") or [[None]])[0][0]
            note += f", load {load}" if load is not None else ""
        if r.scenario in ("B4", "B6") and r.extra.get("drain_attempts"):
            note = (note + "; " if note else "") + f"{r.extra['drain_attempts']} drain attempts"
        lines.append([r.scenario, r.case, LABELS.get(r.tool, r.tool), _num(r.wall), _num(module), _num(r.requests),
                      _num(r.peak_rss_mib, 1), _num(r.extra.get("x_best_peer_wall")),
                      _num(r.extra.get("x_best_peer_requests")), note])
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(head) - 1)]
    out = []
    for n, line in enumerate(lines):
        out.append("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) + "  " + line[-1])
        if n == 0:
            out.append("  ".join("-" * w for w in widths) + "  ----")
    return "\n".join(line.rstrip() for line in out)


# -- targets ------------------------------------------------------------------------------------------
def _find(rows: List[Row], scenario: str, tool: str, case: Optional[str] = None) -> Optional[Row]:
    for r in rows:
        if r.scenario == scenario and r.tool == tool and (case is None or r.case == case):
            return r
    return None


def _check(scenario: str, what: str, measured: Optional[float], limit: float, unit: str = "x",
           strict: bool = False) -> Dict[str, Any]:
    item: Dict[str, Any] = {"scenario": scenario, "what": what, "target": f"{'<' if strict else '<='} {limit:g}{unit}",
                            "measured": None if measured is None else round(measured, 2)}
    if measured is None:
        item.update(met=None, verdict="not measured")
        return item
    met = measured < limit if strict else measured <= limit
    item["met"] = met
    if met:
        item["verdict"] = "met"
    else:
        over = measured - limit
        pct = f" ({over / limit * 100:.0f}% over)" if limit else ""
        item["verdict"] = f"missed by {over:.2f}{unit}{pct}"
    return item


def _ratio(a: Optional[Row], b: Optional[Row], attr: str = "wall") -> Optional[float]:
    if not a or not b or a.rc or b.rc is None:
        return None
    x, y = getattr(a, attr), getattr(b, attr)
    return x / y if x is not None and y else None


def targets(rows: List[Row]) -> List[Dict[str, Any]]:
    found: List[Dict[str, Any]] = []
    ours = _find(rows, "B1", NMO)
    if ours:
        found.append(_check("B1", "span / kubectl drain's", _ratio(ours, _find(rows, "B1", KUBECTL)), 0.2))
        found.append(_check("B1", "span / k8s_drain's", _ratio(ours, _find(rows, "B1", K8S_DRAIN)), 0.3))
        module = ours.extra.get("module_elapsed")
        for peer, limit in ((KUBECTL, 0.2), (K8S_DRAIN, 0.3)):
            other = _find(rows, "B1", peer)
            ratio = module / other.wall if module is not None and other and other.wall else None
            found.append(_check("B1", f"(module span alone) / {LABELS[peer]}'s", ratio, limit))
    for scenario in ("B1", "B2"):
        ours = _find(rows, scenario, NMO)
        if not ours:
            continue
        pods = ours.pods or 0
        requests = ours.requests if not ours.rc else None
        found.append(_check(scenario, f"API requests per drained node - pods ({pods})",
                            None if requests is None else requests - pods, 15, unit=""))
        peer_requests = [r.requests for r in rows if r.scenario == scenario and r.tool in PEERS and r.requests]
        if peer_requests:
            found.append(_check(scenario, "API requests / fewest of a peer",
                                None if requests is None else requests / min(peer_requests), 1.0, strict=True))
    ours = _find(rows, "B3", NMO)
    if ours:
        found.append(_check("B3", "drain ends after the PDB allows it", ours.extra.get("after_allowed"), 2.0, unit=" s"))
    ours = _find(rows, "B4", NMO)
    if ours:
        found.append(_check("B4", "orchestration overhead per node", ours.extra.get("overhead_per_node"), 2.0, unit=" s"))
        found.append(_check("B4", "total / the k8s_drain playbook's", _ratio(ours, _find(rows, "B4", K8S_DRAIN)), 0.5))
    scale = [r for r in rows if r.scenario == "B5" and r.tool == NMO and r.wall is not None and not r.rc]
    whole = [r for r in scale if "inventory" not in r.case]
    if len(whole) >= 2:
        small = whole[0]
        for big in [whole[-1]] + [r for r in scale if "inventory" in r.case]:
            found.append(_check("B5", f"per-node cost at {big.case} / at {small.case}", big.wall / small.wall, 1.2))
            found.append(_check("B5", f"peak RSS at {big.case}", big.peak_rss_mib, 100, unit=" MiB"))
    ours = _find(rows, "B6", NMO)
    if ours and ours.requests is not None and not ours.rc:
        over = ours.extra["requests_per_node"] - ours.extra["pods_per_node"]
        found.append(_check("B6", f"API requests per node - pods per node ({ours.extra['pods_per_node']:g})", over, 20,
                            unit=""))
        peer = _find(rows, "B6", K8S_DRAIN)
        found.append(_check("B6", "requests / the k8s_drain playbook's", _ratio(ours, peer, "requests"), 3.6))
    for ours in [r for r in rows if r.scenario == "B7" and r.tool == NMO]:
        peer = _find(rows, "B7", OPERATOR, ours.case)
        budget = ours.extra.get("budget")
        if not peer or peer.rc is None:
            continue
        if ours.extra.get("preflight") == "off":  # the figure that explains the requests, not a target of its own
            found.append(_check("B7", f"{ours.case}, pre-flight off: requests a pod / NMO's",
                                _extra_ratio(ours, peer, "requests_per_pod"), 1.0))
            continue
        found.append(_check("B7", f"{ours.case}: drain time / NMO's", _extra_ratio(ours, peer, "drain_elapsed"),
                            1.0 if budget else 0.5))
        found.append(_check("B7", f"{ours.case}: requests a pod / NMO's", _extra_ratio(ours, peer, "requests_per_pod"),
                            1.0))
        found.append(_check("B7", f"{ours.case}: the drain's requests a pod / NMO's until Succeeded",
                            _extra_ratio(ours, peer, "drain_requests_per_pod"), 1.0))
    return found


def _extra_ratio(a: Row, b: Row, key: str) -> Optional[float]:
    if a.rc or b.rc:
        return None
    x, y = a.extra.get(key), b.extra.get(key)
    return float(x) / float(y) if x is not None and y else None


def targets_text(items: List[Dict[str, Any]]) -> str:
    lines = []
    for t in items:
        measured = "-" if t["measured"] is None else f"{t['measured']:g}"
        lines.append(f"{t['scenario']}  {t['what']}: {measured} (target {t['target']}): {t['verdict']}")
    return "\n".join(lines)
