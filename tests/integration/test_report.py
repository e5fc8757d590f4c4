"""The run report (docs/report.md) of a real rollout: six kwok workers two at a time, a drain
blocked by a PodDisruptionBudget, a kill, a resume, a failing work hook. The JSON is checked
against its schema and against the cluster's own story (the audit log's evictions, the
release of the budget), the JUnit is parsed, and the page is opened in headless chromium,
whose DOM and screenshot show every node."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime
from xml.etree import ElementTree

import pytest
from browser import Dom, chromium, screenshot
from report_schema import validate
from topology import wait_for

from .maintenance_support import ROOT, AuditLog, Run, maintenance_of, run_of, wait_run_gone, write_inventory

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SCHEMA = json.loads((ROOT / "docs" / "report.schema.json").read_text())
BEGIN = "Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label"


def evictions(audit: AuditLog, user: str, code: int, since: float = 0.0) -> list:
    """The pods ``user`` evicted (not in a dry run) since then, answered ``code``."""
    out = []
    for e in audit.requests_of(user, code):
        ref = e.get("objectRef") or {}
        at = datetime_epoch(e.get("requestReceivedTimestamp", ""))
        if (ref.get("subresource") == "eviction" and e.get("verb") == "create" and at >= since
                and "dryRun" not in e.get("requestURI", "")):  # the pre-flight's are dry runs
            out.append(f"{ref.get('namespace')}/{ref.get('name')}")
    return out


def datetime_epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0


def test_a_rollout_with_a_block_a_kill_a_resume_and_a_failure_is_reported(cluster, world, user, tmp_path):
    world.add_nodes(workers=6)
    w = world.workers
    world.deployment("web", 6)
    with world.only_schedulable(w[1]):
        world.deployment("hold", 1)
    world.pdb("hold", "hold", min_available=1)  # refuses every eviction until the test relaxes it
    hold_pod = world.pods(node=w[1], namespace=world.namespace)
    hold = next(p["metadata"]["name"] for p in hold_pod if p["metadata"]["name"].startswith("hold-"))
    hook = tmp_path / "work.yml"
    gate, at_work = tmp_path / "worker-01-may-go-on", tmp_path / "worker-01-at-work"
    # A batch of two runs each node at its own pace (strategy free): worker-01's work waits for
    # the test, so the kill finds both nodes of the first batch in flight.
    hook.write_text("- name: Replace the memory\n  ansible.builtin.fail:\n    msg: DIMM slot 3 not detected\n"
                    f"  when: inventory_hostname == '{w[5]}'\n"
                    f"- name: Say the technician is at work\n  ansible.builtin.copy:\n    dest: {at_work}\n"
                    f"    content: here\n  when: inventory_hostname == '{w[0]}'\n"
                    f"- name: Wait for the technician\n  ansible.builtin.wait_for:\n    path: {gate}\n"
                    f"    timeout: 150\n  when: inventory_hostname == '{w[0]}'\n")
    reports = tmp_path / "reports"
    inventory = write_inventory(world, tmp_path, node_maintenance_preflight="warn",
                                node_maintenance_campaign=f"report-{world.id}",
                                node_maintenance_failure_policy="rollback", node_maintenance_hooks_work=[str(hook)],
                                node_maintenance_report_dir=str(reports))
    audit = AuditLog(cluster)
    two = {"node_maintenance_concurrency": 2}  # serial is a play's: an extra variable, not a host's

    # the first run: worker-01 and worker-02 together; worker-02's drain is refused; killed
    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"], extra_vars=two)
    try:
        wait_for(lambda: len(evictions(audit, user.name, 429)) >= 3 or first.proc.poll() is not None, 120,
                 "the budget to refuse worker-02's pod three times")
        try:
            wait_for(lambda: at_work.exists() or first.proc.poll() is not None, 60, "worker-01's work hook")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {first.output[-5000:]}") from None
        assert first.proc.poll() is None, first.output[-3000:]
        killed = run_of(cluster.client, w[1])
    finally:
        first.kill()
        first.close()
    wait_run_gone(cluster.client, killed)
    assert not reports.exists(), "a killed run wrote a report"
    gate.write_text("done")  # the resumed worker-01 finds its work done

    # the second run resumes both, is refused again, the budget is released, worker-04 fails
    second_start = time.time()
    # forks as the concurrency: the nodes start in the run's order, one as another ends (with more,
    # worker-03 to worker-06 start at once and take the free places in the order their begins get
    # there, which design §18.7 does not order: only a node that arrived is given the place back)
    second = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers", "-f", "2"], extra_vars=two)
    try:
        wait_for(lambda: len(evictions(audit, user.name, 429, second_start)) >= 3 or second.proc.poll() is not None,
                 120, "the resumed drain to be refused three times")
        assert second.proc.poll() is None, second.output[-3000:]
        released = time.time()
        cluster.client.patch(f"/apis/policy/v1/namespaces/{world.namespace}/poddisruptionbudgets/hold",
                             {"spec": {"minAvailable": 0}}, "merge")
        assert second.wait(180) != 0, "worker-04's hook fails the run"
        output = second.output
        records = second.records()
    finally:
        if second.proc.poll() is None:
            second.kill()
        second.close()
    run_id = next(r["result"]["run"] for r in records if r["action"] == "nmo.maintenance.nmo_run")
    resumed = {r["host"] for r in records if r["task"].endswith(BEGIN) and r["result"].get("adopted_from")}
    assert f"nmo.maintenance run report: {reports / 'report.html'}" in output
    assert maintenance_of(cluster.client, w[5]) is not None  # failed, recorded (rolled back, NodeMaintenance kept)

    # report.json: the schema, and the cluster's story
    report = json.loads((reports / "report.json").read_text())
    assert validate(report, SCHEMA) == []
    run = report["run"]
    assert run["id"] == run_id and run["outcome"] == "failed" and run["mode"] == "standalone"
    assert run["options"]["concurrency"] == 2 and set(run["resumed"]) == resumed and w[1] in resumed
    nodes = {n["name"]: n for n in report["nodes"]}
    assert sorted(nodes) == sorted(w), "a row per node of the run"
    for node in report["nodes"]:
        times = [(p["start"], p["end"]) for p in node["phases"]]
        assert times == sorted(times) and all(s <= e for s, e in times), node["phases"]
        assert all(run["start"] <= p["start"] for p in node["phases"] if not p["earlier_run"])
    w2 = nodes[w[1]]
    assert w2["outcome"] == "succeeded" and w2["adopted_from"] == killed
    assert any(p["earlier_run"] and p["name"] == "drain" for p in w2["phases"]), w2["phases"]
    now_blocked = [b for b in w2["blocked"] if not b["earlier_run"] and b["kind"] == "pod"]
    assert [(b["pod"], b["pdb"]) for b in now_blocked] == [(f"{world.namespace}/{hold}", "hold")]
    blocked_start, blocked_end = (datetime_epoch(now_blocked[0][k]) for k in ("start", "end"))
    assert second_start < blocked_start < released < blocked_end, (now_blocked, second_start, released)
    assert any(b["earlier_run"] and b["pod"] == f"{world.namespace}/{hold}" for b in w2["blocked"])
    moved_to = {m["pod"]: m["to"] for m in w2["pods_moved"]}
    assert moved_to[f"{world.namespace}/{hold}"] not in (None, w[1])
    failed = nodes[w[5]]
    assert failed["outcome"] == "failed" and "DIMM slot 3 not detected" in failed["error"]
    assert failed["rolled_back"] is True and "uncordon" in failed["rollback_steps"]
    assert "hooks work" in [p["name"] for p in failed["phases"]]
    assert [nodes[n]["outcome"] for n in w[:4]] == ["succeeded"] * 4, [(n["name"], n["outcome"]) for n in nodes.values()]
    # worker-05, beside worker-06 in the last batch, ends or is stopped where it stood when the failure ended
    # the play (max_fail_percentage 0: in maintenance, for the next run to resume); the report says which
    w5 = nodes[w[4]]["outcome"]
    assert (w5, maintenance_of(cluster.client, w[4]) is None) in (("succeeded", True), ("interrupted", False)), w5
    assert {w[0], w[1]} <= resumed, "both nodes of the killed batch were resumed"
    at_once = [(n["start"], n["end"]) for n in (nodes[w[0]], nodes[w[1]])]
    assert max(s for s, _e in at_once) < min(e for _s, e in at_once), "the resumed batch of two overlaps"
    moved = sorted(m["pod"] for n in report["nodes"] for m in n["pods_moved"])
    assert moved == sorted(evictions(audit.settled(), user.name, 201, second_start)), "pods moved = pods evicted"
    assert report["api_requests"] >= sum(n["api_requests"] for n in report["nodes"]) > 0
    assert all(n["api_requests"] > 0 for n in report["nodes"] if n["phases"])

    # report.xml: a test case a node, the failure with what was rolled back
    suite = ElementTree.parse(reports / "report.xml").getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert sorted(cases) == sorted(w) and suite.get("failures") == ("2" if w5 == "interrupted" else "1")
    assert "rolled back: uncordon" in cases[w[5]].find("failure").text
    if w5 == "interrupted":
        assert "the run stopped before this node ended" in cases[w[4]].find("failure").text
    assert all(float(cases[n].get("time")) > 0 and cases[n].find("failure") is None for n in w[:4])

    # report.html in a real browser: the DOM it built, and a picture
    page = (reports / "report.html").as_uri()
    dumped = chromium("--dump-dom", page)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = Dom()
    dom.feed(dumped.stdout)
    rows = [a for t, a in dom.tags if t == "g" and a.get("class") == "row"]
    assert sorted(r["data-node"] for r in rows) == sorted(w)
    assert [r["data-node"] for r in rows if r["data-outcome"] == "failed"] == [w[5]]
    assert any(t == "g" and a.get("class") == "blocked" and "disruption budget hold" in a.get("data-reason", "")
               for t, a in dom.tags)
    text = "".join(dom.text)
    assert f"blocked: {world.namespace}/{hold} (PDB hold)"[:30] in text and "DIMM slot 3 not detected" in text
    shot = tmp_path / "report.png"
    screenshot(page, shot, 1280, 1500)
    if os.environ.get("NMO_REPORT_SCREENSHOT"):  # the picture docs/report.md and the README show
        shutil.copy(shot, os.environ["NMO_REPORT_SCREENSHOT"])
