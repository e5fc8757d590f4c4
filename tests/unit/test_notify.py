"""Notifications and silences without a cluster: the message of each event, the body of each
kind, the HMAC signature, the matcher templates, the sender's attempts against a local
server that fails and stalls, the heartbeat's block watch and silence extender
(model/notify.py, model/silences.py, api/webhook.py, workflows/notify.py, workflows/silences.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.api import webhook
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import InputError
from ansible_collections.nmo.maintenance.plugins.module_utils.model import notify, silences
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import notify as sender
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import silences as silence_flow

NOW = datetime(2026, 12, 2, 3, 0, 0, tzinfo=timezone.utc)


# -- messages and bodies ------------------------------------------------------------------------------
@pytest.mark.parametrize("event, node, details, said", [
    ("run_started", None, {"nodes": ["a", "b"], "window_end": "2026-12-02T06:00:00Z"},
     "Maintenance run r1 started: 2 node(s) (a, b), window until 2026-12-02T06:00:00Z"),
    ("node_begun", "a", {"maintenance": "maintenance-a"}, "Node a: maintenance begun (maintenance-a, run r1)"),
    ("node_blocked", "a", {"blocked_seconds": 725, "what": "1 pod(s) not evicted yet (web-0)"},
     "Node a: blocked for 12 min 5 s (run r1): 1 pod(s) not evicted yet (web-0)"),
    ("node_failed", "a", {"error": "DIMM slot 3", "rolled_back": True},
     "Node a: maintenance failed (rolled back, run r1): DIMM slot 3"),
    ("node_failed", "a", {"error": "x", "outcome": "kept out of service"},
     "Node a: maintenance failed (kept out of service, run r1): x"),
    ("node_done", "a", {"took_seconds": 3725}, "Node a: back in service after 1 h 02 min (run r1)"),
    ("run_finished", None, {"counts": {"done": 5, "failed": 1}, "report": "nmo-reports/r1/"},
     "Maintenance run r1 finished: 5 done, 1 failed. Report: nmo-reports/r1/"),
    ("run_finished", None, {"counts": {"done": 2}}, "Maintenance run r1 finished: 2 done"),
])
def test_each_event_says_one_sentence(event, node, details, said):
    assert notify.message(event, "r1", node, details) == said


def test_an_unknown_event_is_refused():
    with pytest.raises(InputError, match="event must be one of"):
        notify.message("node_exploded", "r1", "a", {})


def test_the_three_kinds_of_body():
    details = {"took_seconds": 42, "maintenance": "maintenance-a"}
    slack = notify.slack_body("node_done", "r1", "a", details)
    assert slack["text"] == ":white_check_mark: Node a: back in service after 42 s (run r1)"
    assert slack["blocks"][0]["text"]["type"] == "mrkdwn"
    assert {"type": "mrkdwn", "text": "*Took*\n42 s"} in slack["blocks"][1]["fields"]
    teams = notify.teams_body("node_failed", "r1", "a", {"error": "boom"})
    [attachment] = teams["attachments"]
    card = attachment["content"]
    assert teams["type"] == "message" and attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["type"] == "AdaptiveCard" and card["body"][0]["color"] == "Attention"
    assert {"title": "Error", "value": "boom"} in card["body"][2]["facts"]
    body = notify.webhook_body("node_done", "r1", "a", details, NOW)
    assert body == {"version": 1, "event": "node_done", "run": "r1", "node": "a",
                    "message": "Node a: back in service after 42 s (run r1)", "time": "2026-12-02T03:00:00Z",
                    "details": details}


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body():
    raw, headers = notify.request_for({"kind": "webhook", "url": "https://h/x", "secret": "k"}, "node_begun", "r1",
                                      "a", {}, NOW)
    stamp = headers["X-NMO-Timestamp"]
    assert stamp == str(int(NOW.timestamp()))
    expected = "sha256=" + hmac.new(b"k", stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    assert headers["X-NMO-Signature"] == expected
    assert notify.verify("k", stamp, raw, expected)
    assert not notify.verify("k", stamp, raw + b" ", expected), "a body changed on the way"
    assert not notify.verify("other", stamp, raw, expected)
    assert json.loads(raw)["event"] == "node_begun"
    unsigned = notify.request_for({"kind": "webhook", "url": "https://h/x"}, "node_begun", "r1", "a", {}, NOW)[1]
    assert unsigned == {}


@pytest.mark.parametrize("target, said", [
    ({"url": "ftp://x"}, "must be an http:// or https:// URL"),
    ({"url": "https://x", "kind": "email"}, "kind must be one of slack, teams, webhook"),
    ({"url": "https://x", "kind": "slack", "secret": "s"}, "signs kind webhook only"),
])
def test_bad_targets_are_refused_without_their_url(target, said):
    with pytest.raises(InputError, match=said) as caught:
        notify.validate_targets([target])
    assert "://x" not in caught.value.message


def test_the_tally_takes_each_nodes_last_event():
    events = [{"event": "node_begun", "node": "a"}, {"event": "node_done", "node": "a"},
              {"event": "node_begun", "node": "b"}, {"event": "node_failed", "node": "b"},
              {"event": "node_begun", "node": "c"}]
    assert notify.tally(events) == {"done": 1, "failed": 1, "in maintenance": 1}
    assert notify.tally([]) == {"done": 0}


def test_the_tally_counts_skipped_and_quarantined_nodes_apart_from_failed_ones():
    events = [{"event": "node_begun", "node": "a"}, {"event": "node_failed", "node": "a",
                                                     "outcome": "skipped (blocked: pod web-0: budget web)"},
              {"event": "node_begun", "node": "b"}, {"event": "node_failed", "node": "b",
                                                     "outcome": "quarantined (blocked: drain timeout)"},
              {"event": "node_begun", "node": "c"}, {"event": "node_failed", "node": "c", "outcome": "rolled back"},
              {"event": "node_begun", "node": "d"}, {"event": "node_failed", "node": "d",
                                                     "outcome": "quarantined by hand"},
              {"event": "node_begun", "node": "e"}, {"event": "node_done", "node": "e"}]
    assert notify.tally(events) == {"done": 1, "failed": 2, "skipped": 1, "quarantined": 1}
    said = notify.message("run_finished", "r1", None, {"counts": notify.tally(events)})
    assert said == "Maintenance run r1 finished: 1 done, 2 failed, 1 skipped, 1 quarantined"


# -- matchers ---------------------------------------------------------------------------------------------
def test_matchers_name_the_node_and_escape_it_in_a_regex():
    got = silences.matchers(list(silences.DEFAULT_MATCHERS), "node-1.example")
    assert got == [{"name": "node", "value": "node-1.example", "isRegex": False, "isEqual": True},
                   {"name": "instance", "value": re.escape("node-1.example") + "(:[0-9]+)?", "isRegex": True,
                    "isEqual": True}]
    assert silences.parse('job!~"kube-.*"') == {"name": "job", "value": "kube-.*", "isRegex": True, "isEqual": False}


@pytest.mark.parametrize("templates, said", [
    (["node={node}"], "is not a matcher"),
    (['severity="critical"'], "none names the node"),
    ([], "is empty"),
])
def test_bad_matchers_are_refused(templates, said):
    with pytest.raises(InputError, match=said):
        silences.validate(templates)


def test_a_silence_body_and_its_extension():
    body = silences.body(['node="{node}"'], "a", "r1", "maintenance-a", NOW, 600)
    assert body["startsAt"] == "2026-12-02T03:00:00.000000Z" and body["endsAt"] == "2026-12-02T03:10:00.000000Z"
    assert body["createdBy"] == "nmo.maintenance" and "r1" in body["comment"] and "maintenance-a" in body["comment"]
    current = {**body, "id": "s1", "status": {"state": "active"}, "updatedAt": "x"}
    later = silences.extension(current, NOW + timedelta(minutes=6), 600)
    assert later["id"] == "s1" and later["startsAt"] == body["startsAt"] and later["endsAt"] == "2026-12-02T03:16:00.000000Z"
    assert "status" not in later and "updatedAt" not in later
    assert not silences.due(NOW + timedelta(seconds=600), NOW, 600)
    assert silences.due(NOW + timedelta(seconds=300), NOW, 600)


def test_the_shortest_duration():
    with pytest.raises(InputError, match="at least 30"):
        silences.duration_of(10)
    assert silences.duration_of(None) == 600


# -- the sender against a local server ---------------------------------------------------------------------
class Server:
    def __init__(self) -> None:
        self.hits: Dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.hits[self.path] = server.hits.get(self.path, 0) + 1
                status, extra = 200, {}
                if self.path.startswith("/fail"):
                    status = 500
                elif self.path.startswith("/busy"):
                    status, extra = 429, {"Retry-After": "0"}
                elif self.path.startswith("/later"):
                    status, extra = 429, {"Retry-After": "3600"}
                elif self.path.startswith("/slow"):
                    time.sleep(1.0)
                elif self.path.startswith("/bad"):
                    status = 400
                try:
                    self.send_response(status)
                    for k, v in extra.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                except OSError:
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()


FAST = webhook.Policy(timeout=0.3, attempts=3, first_backoff=0.01)


@pytest.mark.parametrize("path, status, attempts", [
    ("/ok/secret-token", 200, 1), ("/fail/secret-token", 500, 3), ("/busy/secret-token", 429, 3),
    ("/later/secret-token", 429, 1), ("/bad/secret-token", 400, 1), ("/slow/secret-token", 0, 3),
])
def test_attempts_are_bounded_and_the_path_is_never_said(server, path, status, attempts):
    answer = webhook.request("POST", server.base + path, {"a": 1}, policy=FAST)
    assert (answer.status, answer.attempts) == (status, attempts), answer
    assert "secret-token" not in answer.error and path not in answer.error
    if path.startswith("/later"):
        assert "more than 10 s: not retried" in answer.error
    if path.startswith("/slow"):
        assert answer.error.endswith("timed out")


def test_a_dead_target_is_a_warning_and_the_others_get_theirs_at_once(server):
    targets = [{"kind": "webhook", "url": server.base + "/ok/a"}, {"kind": "slack", "url": server.base + "/slow/b"},
               {"kind": "teams", "url": "http://127.0.0.1:9/dead"}]
    started = time.monotonic()
    done = sender.send(targets, "node_begun", "r1", "a", {}, FAST)
    took = time.monotonic() - started
    assert done["delivered"] == 1 and done["undelivered"] == 2
    assert [t["attempts"] for t in done["targets"]] == [1, 3, 3]
    assert len(done["warnings"]) == 2 and all("of node a not delivered" in w for w in done["warnings"])
    assert not any("/slow/b" in w or "/dead" in w for w in done["warnings"])
    assert took < 3 * 0.3 + 1.0, f"the targets were not asked in parallel ({took:.1f} s)"


def test_the_module_call_checks_its_bounds_and_derives_the_time_taken():
    with pytest.raises(InputError, match="attempts"):
        sender.call({"event": "node_done", "run_id": "r", "attempts": 9, "targets": []})
    done = sender.call({"event": "node_done", "run_id": "r", "node": "a", "targets": [],
                        "details": {"since": "2026-12-02T02:58:00Z"}}, dry_run=True, now=NOW)
    assert done["message"] == "Node a: back in service after 2 min 0 s (run r)"


def test_the_journal_keeps_a_failed_nodes_outcome_for_the_counts():
    run_id = f"unit-journal-{os.getpid()}"
    sender.read_journal(run_id, remove=True)
    for node, outcome in (("a", "skipped (blocked: budget web)"), ("b", "rolled back")):
        sender.call({"event": "node_failed", "run_id": run_id, "node": node, "targets": [],
                     "details": {"error": "x", "outcome": outcome}}, now=NOW)
    sender.call({"event": "node_done", "run_id": run_id, "node": "c", "targets": []}, now=NOW)
    entries = sender.read_journal(run_id, remove=True)
    assert entries == [{"event": "node_failed", "node": "a", "outcome": "skipped (blocked: budget web)"},
                       {"event": "node_failed", "node": "b", "outcome": "rolled back"},
                       {"event": "node_done", "node": "c"}]
    assert notify.tally(entries) == {"done": 1, "failed": 1, "skipped": 1}
    assert sender.read_journal(run_id) == []  # removed once read for run_finished


# -- the heartbeat's parts --------------------------------------------------------------------------------
def nm(node: str, run_id: str = "r1", silence: str = "", **status: Any) -> Dict[str, Any]:
    notes = {"nmo.maintenance/run": run_id}
    if silence:
        notes["nmo.maintenance/silence"] = silence
    return {"metadata": {"name": f"maintenance-{node}", "annotations": notes}, "spec": {"nodeName": node},
            "status": status}


def test_a_node_held_back_is_told_once_after_the_threshold():
    clock = [NOW]
    watch = sender.BlockWatch([{"kind": "webhook", "url": "http://127.0.0.1:9/x"}], 60, FAST, clock=lambda: clock[0])
    blocked = nm("a", phase="Running", drainProgress=50, pendingPods=["web-0"])
    other_run = nm("b", run_id="r2", phase="Running", pendingPods=["x"])
    assert watch.beat("r1", [blocked, other_run], lambda o: o["metadata"]["annotations"]["nmo.maintenance/run"]) == []
    clock[0] = NOW + timedelta(seconds=30)
    assert watch.beat("r1", [blocked], lambda o: "r1") == []
    clock[0] = NOW + timedelta(seconds=61)
    assert watch.beat("r1", [blocked], lambda o: "r1") == ["a"]
    clock[0] = NOW + timedelta(seconds=200)
    assert watch.beat("r1", [blocked], lambda o: "r1") == [], "told once a stretch"
    moved = nm("a", phase="Running", drainProgress=80, pendingPods=["web-0"])
    assert watch.beat("r1", [moved], lambda o: "r1") == [], "progress starts a new stretch"
    for thread in watch.threads:
        thread.join(5)
    assert sender.blocked_by(nm("a", phase="Pending", lastError="slot held by run r9")) == "last error: slot held by run r9"
    assert sender.blocked_by(nm("a", phase="Succeeded", pendingPods=["x"])) == ""


class FakeAlertmanager:
    """Alertmanager v0.27's update rule: same id, matchers and startsAt while active: in place."""

    def __init__(self) -> None:
        self.store: Dict[str, Dict[str, Any]] = {}
        self.posts: List[Dict[str, Any]] = []
        self.replace_next = False

    def get_silence(self, silence_id: str) -> Optional[Dict[str, Any]]:
        return self.store.get(silence_id)

    def post_silence(self, body: Dict[str, Any]) -> str:
        self.posts.append(body)
        new_id = body.get("id") or f"s{len(self.store) + 1}"
        if self.replace_next and body.get("id"):
            self.store[body["id"]]["status"] = {"state": "expired"}
            new_id = f"s{len(self.store) + 1}"
            self.replace_next = False
        self.store[new_id] = {**body, "id": new_id, "status": {"state": "active"}}
        return new_id


class Patches:
    def __init__(self) -> None:
        self.patched: List[Any] = []

    def patch(self, path: str, body: Any, kind: str) -> Dict[str, Any]:
        self.patched.append((path, body))
        return {}


def test_the_extender_extends_when_half_is_gone_and_follows_a_new_id():
    am = FakeAlertmanager()
    am.store["s1"] = {"id": "s1", "matchers": [], "startsAt": "x", "endsAt": "2026-12-02T03:00:30.000000Z",
                      "status": {"state": "active"}}
    clock = [NOW]
    extender = silence_flow.Extender({"url": "http://am", "duration": 60}, clock=lambda: clock[0], am=am)
    client = Patches()
    items = [nm("a", silence="s1"), nm("b", run_id="r2", silence="s9"), nm("c")]
    assert extender.beat(client, "r1", items) == 1, "30 s left of 60: due"
    assert am.posts[-1]["id"] == "s1" and am.posts[-1]["endsAt"] == "2026-12-02T03:01:00.000000Z"
    clock[0] = NOW + timedelta(seconds=10)
    assert extender.beat(client, "r1", items) == 0, "50 s left: not yet"
    assert client.patched == [], "extended in place: the annotation stays"
    clock[0] = NOW + timedelta(seconds=31)
    am.replace_next = True
    assert extender.beat(client, "r1", items) == 1
    assert client.patched == [("/apis/nodemaintenance.medik8s.io/v1beta1/nodemaintenances/maintenance-a",
                               {"metadata": {"annotations": {"nmo.maintenance/silence": "s2"}}})]
    assert len(am.posts) == 2, "only this run's, and only the due"


def test_the_extender_asks_a_down_alertmanager_once_a_beat():
    class Down(FakeAlertmanager):
        def get_silence(self, silence_id: str) -> Optional[Dict[str, Any]]:
            self.posts.append({"asked": silence_id})
            raise silence_flow.AlertmanagerError("Alertmanager at http://am: no answer")

    am = Down()
    extender = silence_flow.Extender({"url": "http://am", "duration": 60}, clock=lambda: NOW, am=am)
    items = [nm("a", silence="s1"), nm("b", silence="s2"), nm("c", silence="s3")]
    assert extender.beat(Patches(), "r1", items) == 0
    assert am.posts == [{"asked": "s1"}], "the beat goes back to the leases after the first failure"
    real = silence_flow.Extender({"url": "http://am", "duration": 60, "timeout": 10})
    assert (real.am.policy.attempts, real.am.policy.timeout) == (1, 3.0)
