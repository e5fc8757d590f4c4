"""The run report's content and its three renderings (plugins/plugin_utils/report_*.py),
from task results made up here as the role's tasks return them."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest
from report_schema import validate

from ansible_collections.nmo.maintenance.plugins.module_utils.model import tracking
from ansible_collections.nmo.maintenance.plugins.module_utils.model.pod_filters import PodPlan
from ansible_collections.nmo.maintenance.plugins.plugin_utils import report_model, report_reads, report_render
from ansible_collections.nmo.maintenance.plugins.plugin_utils.report_model import Collector, TaskRecord

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "report.schema.json").read_text())
T0 = 1_800_000_000.0
ROLE = "nmo.maintenance.node_maintenance : "
HOSTILE = '<script>alert("x")</script>&"\'><img src=x onerror=alert(1)>'
REFUSAL = ("Cannot evict pod as it would violate the pod's disruption budget. (The disruption budget hold needs "
           "1 healthy pods and has 1 currently) Pod ns/hold-1 stays pending; retried every 1 s.")


def rec(host, task, action, start, end, result=None, status="ok", phase=None):
    """A task result; ``phase`` is the role's phase the callback read from the task
    (node_maintenance_phase, as the role's include of the phase file gave it)."""
    return TaskRecord(host, task, action, T0 + start, T0 + end, status, result or {}, phase)


def a_run(failing_error="DIMM slot 3 not detected", name_b="node-b"):
    """node-a: waits 2 s for a slot, drains for 10 s (blocked 8 s by PDB hold), ends; node-b
    (beside it, concurrency 2) fails in its work hook and is rolled back; node-c never reached."""
    c = Collector(T0, "playbooks/maintenance.yml", {"user": "ops", "host": "ctl", "awx_job_id": None})
    plans = {"node-a": {"report": {}}, name_b: {"report": {}}, "node-c": {"report": {}}}
    c.add(rec("node-a", ROLE + "Run | Start this run", "nmo.maintenance.nmo_run", 0, 0.5,
              {"run": "r1", "mode": "standalone", "kubernetes": "v1.37.2", "api_requests": 3,
               "api_requests_by": {"create leases": 1, "get version": 2}}))
    c.add(rec("node-a", ROLE + "Run | Remember its id", "ansible.builtin.set_fact", 0.5, 0.6,
              {"ansible_facts": {"node_maintenance_report_settings": {"dir": "", "run": "r1",
                                                                      "options": {"concurrency": 2}}}}))
    c.add(rec("node-a", "Read the maintenance state", "nmo.maintenance.nmo_plan", 0.6, 1, {"plans": plans}))
    for host in ("node-a", name_b):
        c.add(rec(host, ROLE + "Look | Decide what to do with the node", "nmo.maintenance.nmo_plan", 1, 1.2,
                  {"node": host, "plan": "full", "outcome": "maintained", "api_requests": 1,
                   "api_requests_by": {"list leases": 1}}))
        c.add(rec(host, ROLE + "Inputs | Check the drain options", "nmo.maintenance.nmo_drain", 1.2, 1.3))
    c.add(rec("node-a", ROLE + "Begin | NodeMaintenance, leases", "nmo.maintenance.nmo_maintenance", 2, 4.5, {
        "maintenance": {"name": "maintenance-a"}, "waited": 2.0, "api_requests": 10,
        "api_requests_by": {"create leases": 2, "patch nodes": 1, "list leases": 7},
        "lease": {"waited": 2.0, "holders": [{"holder": "node-z"}], "etcd": None,
                  "acquired": [{"role": "slot", "name": "slot-0", "namespace": "medik8s-leases", "action": "created"}]}},
              phase="begin"))
    c.add(rec(name_b, ROLE + "Begin | NodeMaintenance, leases", "nmo.maintenance.nmo_maintenance", 2, 2.4,
              {"maintenance": {"name": "maintenance-b"}, "lease": {"waited": 0.0}}, phase="begin"))
    c.add(rec("node-a", ROLE + "Drain | Evict the pods", "nmo.maintenance.nmo_drain", 4.5, 14.5, {
        "evicted": [{"namespace": "ns", "name": "hold-1"}, {"namespace": "ns", "name": "web-1"}], "deleted": [],
        "blocked": [{"namespace": "ns", "name": "hold-1", "reason": REFUSAL, "since": T0 + 5, "until": T0 + 13}],
        "api_requests": 20, "api_requests_by": {"create pods/eviction": 12, "list pods": 8}}, phase="drain"))
    c.add(rec(name_b, ROLE + "Drain | Evict the pods", "nmo.maintenance.nmo_drain", 2.4, 3,
              {"evicted": [{"namespace": "ns", "name": "web-2"}], "blocked": []}, phase="drain"))
    c.add(rec(name_b, ROLE + "Hooks | Check the files of phase work", "nmo.maintenance.nmo_check_files", 3, 3.1,
              phase="work"))
    c.add(rec(name_b, ROLE + "Hooks | Run on the node the hooks of phase work", "ansible.builtin.include_tasks", 3.1, 3.2,
              phase="work"))
    c.add(rec(name_b, "Replace the memory", "ansible.builtin.fail", 3.2, 6, {"msg": failing_error}, "failed", phase="work"))
    c.add(rec(name_b, ROLE + "Failed | Keep the error", "ansible.builtin.set_fact", 6, 6.1, phase="failed"))
    c.add(rec(name_b, ROLE + "Failed | Record it on the NodeMaintenance", "nmo.maintenance.nmo_maintenance", 6.1, 7,
              {"phase": "work", "policy": "rollback", "rolled_back": True, "kept": False,
               "reached": ["uncordon", "taints", "lease", "maintenance"], "message": "node back in service"}, phase="failed"))
    c.add(rec(name_b, ROLE + "Failed | Summary for AWX (set_stats)", "ansible.builtin.set_stats", 7, 7.1, {
        "ansible_stats": {"data": {"nmo_maintenance": {name_b: {"result": "failed", "error": failing_error}}}}},
        phase="failed"))
    c.add(rec(name_b, ROLE + "Failed | Stop here", "ansible.builtin.fail", 7.1, 7.2, {"msg": "stop"}, "failed", phase="failed"))
    c.add(rec("node-a", ROLE + "Ready | Wait for the node to be Ready", "nmo.maintenance.nmo_info", 14.5, 15, phase="ready"))
    c.add(rec("node-a", ROLE + "End | Uncordon", "nmo.maintenance.nmo_maintenance", 15, 16, {"api_requests": 5}, phase="end"))
    c.add(rec("node-a", ROLE + "Summary | Per-node result", "ansible.builtin.set_stats", 16, 16.1, {
        "ansible_stats": {"data": {"nmo_maintenance": {"node-a": {"result": "maintained", "error": ""}}}}}))
    return c


def test_the_report_tells_the_run_and_validates_against_its_schema():
    report = a_run().build(T0 + 20, {"replacements": {"ns/hold-1": "node-c", "ns/web-1": None}})
    assert validate(report, SCHEMA) == []
    run = report["run"]
    assert (run["id"], run["mode"], run["outcome"], run["seconds"]) == ("r1", "standalone", "failed", 20.0)
    assert run["options"] == {"concurrency": 2}
    nodes = {n["name"]: n for n in report["nodes"]}
    assert [n["name"] for n in report["nodes"]] == ["node-a", "node-b", "node-c"]
    a, b, c = nodes["node-a"], nodes["node-b"], nodes["node-c"]
    assert [p["name"] for p in a["phases"]] == ["lease wait", "begin", "drain", "ready wait", "end"]
    assert a["phases"][0]["seconds"] == 2.0 and a["phases"][0]["note"] == "held by node-z"
    assert a["outcome"] == "succeeded" and a["seconds"] == 14.0
    pdb = [x for x in a["blocked"] if x["kind"] == "pod"]
    assert pdb[0]["pod"] == "ns/hold-1" and pdb[0]["pdb"] == "hold" and pdb[0]["seconds"] == 8.0
    assert [x["kind"] for x in a["blocked"]] == ["pod", "lease"]
    assert a["pods_moved"] == [{"pod": "ns/hold-1", "how": "evicted", "from": "node-a", "to": "node-c"},
                               {"pod": "ns/web-1", "how": "evicted", "from": "node-a", "to": None}]
    assert a["leases"][0]["holders"] == ["node-z"] and a["leases"][0]["waited"] == 2.0
    assert a["api_requests"] == 36 and a["api_requests_by"]["list leases"] == 8
    # the hook's own task belongs to the hooks phase; the failure is the node's
    assert [p["name"] for p in b["phases"]] == ["begin", "drain", "hooks work", "failed"]
    assert b["phases"][2]["seconds"] == pytest.approx(3.0)
    assert (b["outcome"], b["error"], b["failed_phase"], b["rolled_back"]) == (
        "failed", "DIMM slot 3 not detected", "work", True)
    assert b["rollback_steps"] == ["uncordon", "taints", "lease", "maintenance"]
    assert c["outcome"] == "not reached" and c["phases"] == []
    assert report["api_requests"] == 3 + 36 + 1
    for node in report["nodes"]:  # phase times ordered
        times = [(p["start"], p["end"]) for p in node["phases"]]
        assert times == sorted(times) and all(s <= e for s, e in times)


def test_junit_has_one_case_per_node_and_the_failure_says_what_was_rolled_back():
    report = a_run().build(T0 + 20)
    root = ElementTree.fromstring(report_render.to_junit(report))
    cases = root.findall("./testsuite/testcase")
    assert [c.get("name") for c in cases] == ["node-a", "node-b", "node-c"]
    assert float(cases[0].get("time")) == 14.0
    failure = cases[1].find("failure")
    assert failure.get("message") == "DIMM slot 3 not detected"
    assert "rolled back: uncordon, taints, lease, maintenance" in failure.text
    assert cases[2].find("skipped") is not None and cases[0].find("failure") is None
    assert root.find("testsuite").get("failures") == "1"


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_and_escapes_what_the_run_says():
    report = a_run(failing_error=HOSTILE, name_b=HOSTILE).build(T0 + 20)
    page = report_render.to_html(report)
    assert "<script" not in page and "<img" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    parsed = Collect()
    parsed.feed(page)
    tags = [t for t, _a in parsed.tags]
    assert "script" not in tags and "img" not in tags and "link" not in tags and "svg" in tags
    assert not [a for _t, a in parsed.tags if any(k.startswith("on") for k in a)], "an event handler attribute"
    assert not [a for _t, a in parsed.tags if any(str(v).startswith(("http:", "https:", "//")) and k in ("src", "href")
                                                  for k, v in a.items())], "something fetched"
    rows = [a for t, a in parsed.tags if t == "g" and a.get("class") == "row"]
    assert [r["data-node"] for r in rows] == ["node-a", HOSTILE, "node-c"]
    assert [r["data-outcome"] for r in rows] == ["succeeded", "failed", "not reached"]
    text = "".join(parsed.text)
    assert HOSTILE in text and "blocked: ns/hold-1 (PDB hold)" in text
    blocked = [a for t, a in parsed.tags if t == "g" and a.get("class") == "blocked"]
    assert blocked and "disruption budget hold" in blocked[0]["data-reason"]


def test_an_adopted_node_shows_what_the_earlier_run_did():
    c = a_run()
    plan = {"report": {"maintenance": {"created": "2027-01-15T07:59:00Z", "lastUpdate": "2027-01-15T07:59:30Z",
                                       "phase": "Running", "drainProgress": 50, "pendingPods": ["ns/hold-1"]}}}
    c.plans["node-a"] = plan
    c.stories["node-a"].results["begin"][-1].result["adopted_from"] = "r0"
    events = [{"reason": "BeginMaintenance", "firstTimestamp": "2027-01-15T07:59:00Z"},
              {"reason": "Drain", "firstTimestamp": "2027-01-15T07:59:05Z"},
              {"reason": "DrainError", "firstTimestamp": "2027-01-15T07:59:06Z", "message": REFUSAL}]
    report = c.build(T0 + 20, {"events": {"maintenance-a": events}})
    assert validate(report, SCHEMA) == []
    a = report["nodes"][0]
    assert a["name"] == "node-a" and a["adopted_from"] == "r0" and report["run"]["resumed"] == ["node-a"]
    earlier = [p for p in a["phases"] if p["earlier_run"]]
    assert [p["name"] for p in earlier] == ["begin", "drain"] and earlier[1]["seconds"] == 25.0
    assert [b["pod"] for b in a["blocked"] if b["earlier_run"]] == ["ns/hold-1"]
    assert a["earlier_run"]["drainProgress"] == 50
    assert "Resumed from run r0" in report_render.to_html(report)


def test_a_phase_added_to_the_role_is_reported_under_its_name():
    """A phase file the role includes with a node_maintenance_phase that model/record.py's table
    does not know is reported under that name, whatever its tasks are called."""
    c = a_run()
    c.add(rec("node-a", ROLE + "Settle | Wait for the workloads", "nmo.maintenance.nmo_settle", 16.2, 18, phase="settle"))
    c.add(rec("node-a", ROLE + "Ask the BMC", "ansible.builtin.uri", 18, 19, phase="firmware check"))
    c.add(rec("node-a", ROLE + "Firmware check | Ask the BMC again", "ansible.builtin.uri", 19, 19.5))  # no phase
    names = [p["name"] for p in c.build(T0 + 20)["nodes"][0]["phases"]]
    assert names[-2:] == ["settle", "firmware check"]


def test_the_drain_tracks_how_long_a_budget_refused_a_pod():
    plan = PodPlan(namespace="ns", name="hold-1", uid="u1", action="evict", reason="managed")
    t = tracking.Tracker.of([plan])
    t.due(0)
    t.answer("ns/hold-1", tracking.Outcome(tracking.REFUSED, "refused by budget hold"), 10.0)
    t.due(11)
    t.answer("ns/hold-1", tracking.Outcome(tracking.REFUSED, "again"), 11.0)
    assert t.blocked(12.0, 1000.0)[0]["still_refused"] is True
    t.due(13)
    t.answer("ns/hold-1", tracking.Outcome(tracking.ACCEPTED), 14.5)
    blocked = t.blocked(20.0, 1000.0)
    assert blocked == [{"namespace": "ns", "name": "hold-1", "reason": "refused by budget hold", "since": 990.0,
                        "until": 994.5, "seconds": 4.5, "still_refused": False}]


def test_replacements_follow_a_pod_moved_twice_and_keep_statefulset_names():
    pods = {"ns": [
        {"metadata": {"name": "web-5d9f-zzzzz", "generateName": "web-5d9f-", "uid": "n1",
                      "creationTimestamp": "2027-01-15T08:00:30Z"}, "spec": {"nodeName": "node-a"}},
        {"metadata": {"name": "db-0", "uid": "n2", "creationTimestamp": "2027-01-15T08:00:10Z"},
         "spec": {"nodeName": "node-c"}},
        {"metadata": {"name": "db-1", "uid": "n3", "creationTimestamp": "2027-01-15T08:00:10Z"},
         "spec": {"nodeName": "node-a"}}]}
    at = report_model.epoch_of("2027-01-15T08:00:00Z")
    moved = [("ns/web-5d9f-aaaaa", "node-a", at), ("ns/web-5d9f-bbbbb", "node-b", at + 20), ("ns/db-0", "node-a", at),
             ("ns/gone-1", "node-a", at)]
    assert report_reads.replacements(pods, moved) == {
        "ns/web-5d9f-aaaaa": "node-b", "ns/web-5d9f-bbbbb": "node-a", "ns/db-0": "node-c", "ns/gone-1": None}


def test_the_schema_checker_refuses_what_it_should():
    report = a_run().build(T0 + 20)
    report["nodes"][0]["outcome"] = "fine"
    del report["run"]["id"]
    report["nodes"][1]["phases"][0]["start"] = "yesterday"
    found = validate(report, SCHEMA)
    assert any("outcome" in e and "not one of" in e for e in found)
    assert any("id is required" in e for e in found)
    assert any("yesterday" in e for e in found)


def test_the_version_is_2_since_the_blocked_and_not_started_outcomes():
    """Version 2 (docs/report.md, Versions): the outcomes skipped (blocked), quarantined and not
    started, and how: left terminating, are values a version-1 reader does not know."""
    report = a_run().build(T0 + 20)
    assert report["version"] == 2 and SCHEMA["properties"]["version"]["enum"] == [2]
    assert {"skipped (blocked)", "quarantined", "not started"} <= set(
        SCHEMA["$defs"]["node"]["properties"]["outcome"]["enum"])
    report["version"] = 1
    assert any("version" in e and "not one of" in e for e in validate(report, SCHEMA))


class PodServer:
    """A namespace's pods and ReplicaSets served as the API server lists them (``labelSelector``
    of ``k=v`` terms, ``fieldSelector`` on the name, ``limit``/``continue``); every query kept."""

    def __init__(self, pods, replicasets):
        self.pods, self.replicasets, self.queries = pods, replicasets, []

    def get(self, path, query=None):
        query = dict(query or {})
        self.queries.append((path, query))
        objs = self.replicasets if path.endswith("/replicasets") else self.pods
        field = query.get("fieldSelector", "")
        if field.startswith("metadata.name="):
            objs = [o for o in objs if o["metadata"]["name"] == field.partition("=")[2]]
        for term in filter(None, (query.get("labelSelector") or "").split(",")):
            key, _eq, value = term.partition("=")
            objs = [o for o in objs if (o["metadata"].get("labels") or {}).get(key) == value]
        start, limit = int(query.get("continue") or 0), query.get("limit") or len(objs) or 1
        more = start + limit < len(objs)
        return {"items": objs[start:start + limit], "metadata": {"continue": str(start + limit) if more else ""}}


def test_replacements_are_found_from_the_moved_pods_owners_not_from_every_pod_of_the_namespace():
    def pod(name, node, generate="", labels=None, at="2027-01-15T08:00:30Z"):
        meta = {"name": name, "uid": f"u-{name}", "creationTimestamp": at, "labels": labels or {}}
        if generate:
            meta["generateName"] = generate
        return {"metadata": meta, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "big" * 100}]},
                "status": {"phase": "Running"}}

    web = {"app": "web", "pod-template-hash": "5d9f"}
    others = [pod(f"bare-{i}", f"node-{i}") for i in range(1200)]  # the rest of a large namespace
    pods = others + [pod("web-5d9f-zzzzz", "node-b", "web-5d9f-", web), pod("web-5d9f-yyyyy", "node-c", "web-5d9f-", web),
                     pod("db-0", "node-c"), pod("job-x-qqqqq", "node-d", "job-x-", {"job": "x"})]
    replicasets = [{"metadata": {"name": "web-5d9f"}, "spec": {"selector": {"matchLabels": web}}}]
    at = report_model.epoch_of("2027-01-15T08:00:00Z")
    moved = [("ns/web-5d9f-aaaaa", "node-a", at), ("ns/web-5d9f-bbbbb", "node-a", at), ("ns/db-0", "node-a", at),
             ("ns/bare-7", "node-a", at)]
    server = PodServer(pods, replicasets)
    found = report_reads.candidates(server, "ns", [m[0].partition("/")[2] for m in moved])
    # the same answer as from every pod of the namespace ...
    assert report_reads.replacements({"ns": found}, moved) == report_reads.replacements({"ns": pods}, moved) == {
        "ns/web-5d9f-aaaaa": "node-c", "ns/web-5d9f-bbbbb": "node-b", "ns/db-0": "node-c", "ns/bare-7": "node-7"}
    assert {p["metadata"]["name"] for p in found} == {"web-5d9f-zzzzz", "web-5d9f-yyyyy", "db-0", "bare-7"}
    assert all(set(p) == {"metadata", "spec"} and set(p["spec"]) == {"nodeName"} for p in found)  # slimmed
    # ... from the ReplicaSet's pods and two pods by name: no list of the namespace's pods
    pod_lists = [q for path, q in server.queries if path.endswith("/pods")]
    assert all(q.get("labelSelector") or q.get("fieldSelector") for q in pod_lists), pod_lists
    assert sorted(q.get("labelSelector", q.get("fieldSelector")) for q in pod_lists) == [
        "app=web,pod-template-hash=5d9f", "metadata.name=bare-7", "metadata.name=db-0"]

    # a pod of another controller (no ReplicaSet of its stem): the namespace, a page at a time, once
    server = PodServer(pods, replicasets)
    moved = [("ns/job-x-abcde", "node-a", at), ("ns/job-x-fghij", "node-a", at)]
    found = report_reads.candidates(server, "ns", [m[0].partition("/")[2] for m in moved])
    assert report_reads.replacements({"ns": found}, moved) == report_reads.replacements({"ns": pods}, moved)
    assert [p["metadata"]["name"] for p in found] == ["job-x-qqqqq"]
    pages = [q for path, q in server.queries if path.endswith("/pods")]
    assert len(pages) == 3 and all(q["limit"] == 500 for q in pages), pages


def test_pods_left_terminating_are_moved_pods_of_their_own():
    """skip_wait_for_delete_timeout's pods are named in report.json, apart from the evicted ones."""
    drain = {"evicted": [{"namespace": "ns", "name": "a"}],
             "left_terminating": [{"namespace": "ns", "name": "b", "reason": "still terminating after ..."}]}
    assert report_model.pods_moved(report_model.NodeStory("h", "node-a"), drain, {}) == [
        {"pod": "ns/a", "how": "evicted", "from": "node-a", "to": None},
        {"pod": "ns/b", "how": "left terminating", "from": "node-a", "to": None}]


@pytest.mark.parametrize("action, outcome", [("quarantine", "quarantined"), ("skip", "skipped (blocked)")])
def test_a_blocked_node_the_rollout_went_past_is_named_with_why(action, outcome):
    """node_maintenance_on_blocked (docs/design.md §18.4): its drain failed and was rescued, the failed
    call skipped or quarantined it, no host failure; the report names it, the run is partial."""
    c = a_run()
    said = f"{outcome.split(' ')[0]} (blocked: drain timed out after 5 s; pending: ns/db-0)"
    c.add(rec("node-c", ROLE + "Look | Decide what to do with the node", "nmo.maintenance.nmo_plan", 7.5, 8,
              {"node": "node-c", "plan": "full", "outcome": "maintained"}))
    c.add(rec("node-c", ROLE + "Begin | NodeMaintenance, leases", "nmo.maintenance.nmo_maintenance", 8, 8.5,
              {"maintenance": {"name": "maintenance-c"}}, phase="begin"))
    c.add(rec("node-c", ROLE + "Drain | Evict the pods", "nmo.maintenance.nmo_drain", 8.5, 13.5,
              {"msg": "drain of node node-c timed out after 5 s", "blocker": "drain timed out after 5 s"}, "failed",
              phase="drain"))
    c.add(rec("node-c", ROLE + "Failed | Record it on the NodeMaintenance", "nmo.maintenance.nmo_maintenance", 13.5, 14,
              {"phase": "drain", "policy": "auto", "kept": action == "quarantine", "rolled_back": action == "skip",
               "blocked": {"action": action, "why": "the rollout goes on", "blocker": "drain timed out after 5 s"},
               "outcome": said, "message": "node node-c could not be drained"}, phase="failed"))
    c.add(rec("node-c", ROLE + "Failed | Summary for AWX (set_stats)", "ansible.builtin.set_stats", 14, 14.1, {
        "ansible_stats": {"data": {"nmo_maintenance": {"node-c": {"result": said, "error": "drain timed out"}}}}},
        phase="failed"))
    report = c.build(T0 + 20)
    assert validate(report, SCHEMA) == []
    node = {n["name"]: n for n in report["nodes"]}["node-c"]
    assert (node["outcome"], node["result"]) == (outcome, said)
    assert report["run"]["outcome"] == "failed"  # node-b failed; without it the run would be partial
    cases = {c.get("name"): c for c in ElementTree.fromstring(report_render.to_junit(report)).findall(".//testcase")}
    assert cases["node-c"].find("skipped").get("message") == said and cases["node-c"].find("failure") is None
    assert said in report_render.to_html(report)


def test_the_failure_the_playbook_repeats_at_its_end_is_the_nodes_not_its_time():
    """playbooks/maintenance.yml ends a failed node's host and fails it in its last play, with
    its last line, when the other nodes have had their turn: the node failed, its phases end
    where its own tasks did."""
    c = a_run()
    c.add(rec("node-b", "Failed | Stop here", "ansible.builtin.fail", 19.5, 19.6,
              {"msg": "maintenance of node node-b failed (work phase): ..."}, "failed"))
    b = {n["name"]: n for n in c.build(T0 + 20)["nodes"]}["node-b"]
    alone = {n["name"]: n for n in a_run().build(T0 + 20)["nodes"]}["node-b"]
    assert b["outcome"] == "failed" and b["error"] == alone["error"]
    assert b["seconds"] == alone["seconds"] and b["phases"] == alone["phases"]


def test_a_node_whose_look_failed_is_failed_not_skipped():
    """The look is the role's nmo_plan for one node (what the module was asked and answers), and
    a failure outside every phase is the node's failure."""
    c = a_run()
    c.add(rec("node-c", "a look renamed", "nmo.maintenance.nmo_plan", 7.5, 8,
              {"msg": "Unauthorized", "invocation": {"module_args": {"node": "node-c"}}}, "failed"))
    node = {n["name"]: n for n in c.build(T0 + 20)["nodes"]}["node-c"]
    assert (node["outcome"], node["error"], node["phases"]) == ("failed", "Unauthorized", [])


def test_a_task_the_play_runs_once_outside_a_phase_is_the_runs_not_a_nodes():
    """The maintenance playbook's last plays (the waiting taints' removal) run once, on the first
    host: a failure there is not that node's."""
    c = a_run()
    c.add(TaskRecord("node-a", "No waiting taint of this run is left", "nmo.maintenance.nmo_waiting", T0 + 17, T0 + 18,
                     "failed", {"msg": "Forbidden", "api_requests": 1}, None, True))
    report = c.build(T0 + 20)
    assert report["nodes"][0]["outcome"] == "succeeded" and report["api_requests"] == 3 + 36 + 1 + 1
