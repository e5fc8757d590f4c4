"""One report for a rollout of several runs (plugins/plugin_utils/report_merge.py), from run
reports built by the report's own model (test_report.a_run), and where each goes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from report_schema import validate

from ansible_collections.nmo.maintenance.plugins.filter.report_paths import report_paths
from ansible_collections.nmo.maintenance.plugins.plugin_utils import report_merge, report_render

from .test_report import SCHEMA, a_run

ROLLOUT = "awx-wf-77"


def slice_report(run_id: str, rename: dict) -> dict:
    """A run report of slice ``run_id``: a_run()'s nodes renamed, in ROLLOUT."""
    report = copy.deepcopy(a_run().build(1_800_000_100.0))
    report["run"].update(id=run_id, rollout=ROLLOUT)
    for node in report["nodes"]:
        node["name"] = rename.get(node["name"], node["name"])
    return report


def test_every_node_once_the_runs_span_and_the_worst_outcome():
    one = slice_report("awx-101", {})
    two = slice_report("awx-102", {"node-a": "node-d", "node-b": "node-e", "node-c": "node-f"})
    two["run"]["end"] = "2027-01-15T08:10:00.000Z"
    merged = report_merge.merge([one, two], ROLLOUT)
    validate(merged, SCHEMA)
    assert merged["run"]["id"] == ROLLOUT and merged["run"]["runs"] == ["awx-101", "awx-102"]
    assert sorted(n["name"] for n in merged["nodes"]) == ["node-a", "node-b", "node-c", "node-d", "node-e", "node-f"]
    assert merged["run"]["outcome"] == "failed"  # node-b failed in both
    assert merged["run"]["end"] == "2027-01-15T08:10:00.000Z"
    assert merged["api_requests"] == one["api_requests"] + two["api_requests"]
    assert sum(merged["api_requests_by"].values()) == sum(one["api_requests_by"].values()) * 2


def test_a_node_two_runs_reported_is_taken_from_the_one_that_took_it_furthest():
    done = slice_report("awx-101", {})
    # a slice that found node-a not reached (it reported it from its plan), after the other finished it
    late = slice_report("awx-102", {})
    for node in late["nodes"]:
        node["outcome"] = "not reached"
    merged = report_merge.merge([done, late], ROLLOUT)
    outcomes = {n["name"]: n["outcome"] for n in merged["nodes"]}
    assert outcomes["node-a"] == "succeeded" and len(merged["nodes"]) == 3, outcomes


def test_the_run_reports_of_the_rollout_are_read_from_their_folders_and_the_merge_written(tmp_path: Path):
    base = tmp_path / "reports"
    for run_id, rename in (("awx-101", {}), ("awx-102", {"node-a": "node-d", "node-b": "node-e", "node-c": "node-f"})):
        report_render.write_report(base / run_id, slice_report(run_id, rename))
    other = slice_report("awx-9", {})
    other["run"]["rollout"] = "awx-wf-5"
    report_render.write_report(base / "awx-9", other)
    (base / "broken").mkdir()
    (base / "broken" / "report.json").write_text("{not json")
    merged, notes = report_merge.write_rollout_report(base, ROLLOUT)
    assert merged is not None and merged["run"]["runs"] == ["awx-101", "awx-102"], merged["run"]
    assert len(notes) == 1 and "broken/report.json: not read" in notes[0]
    written = json.loads((base / "report.json").read_text())
    assert written == json.loads(report_render.to_json(merged))
    assert (base / "report.html").exists() and (base / "report.xml").exists()
    assert report_merge.write_rollout_report(tmp_path / "empty", ROLLOUT) == (None, [])


def test_where_a_run_and_its_rollout_write():
    assert report_paths("", "r1") == {"dir": "nmo-reports/r1", "html": "nmo-reports/r1/report.html",
                                      "json": "nmo-reports/r1/report.json", "junit": "nmo-reports/r1/report.xml",
                                      "run": "r1"}
    assert report_paths("/srv/reports", "r1", "r1")["dir"] == "/srv/reports"  # a run alone: as given
    sliced = report_paths("", "awx-101", ROLLOUT)
    assert sliced["dir"] == f"nmo-reports/{ROLLOUT}/awx-101" and sliced["rollout_dir"] == f"nmo-reports/{ROLLOUT}"
    assert report_paths("/srv/reports", "awx-101", ROLLOUT)["rollout_html"] == "/srv/reports/report.html"
