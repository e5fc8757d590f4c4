"""Notifications and Alertmanager silences (docs/notifications.md), end to end.

Real parts: the local control plane, a real Alertmanager v0.27.0 (hack/alertmanager, its API
v2 read by the test), and a local HTTP receiver standing in for Slack, Teams and a webhook
endpoint: it records every request and, on the paths that say so, answers 500 or stalls
past the client's timeout. The playbooks run at -vvv, and their output is searched for the
secrets (URL tokens, the HMAC key, Alertmanager's token).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional

import pytest
import urllib3
import yaml
from topology import wait_for

from ansible_collections.nmo.maintenance.plugins.module_utils.model import notify as notify_model

from .maintenance_support import (
    NM_API,
    ROOT,
    Run,
    maintenance_of,
    nm_name,
    run,
    run_of,
    start_maintenance,
    wait_clean,
    wait_run_gone,
    write_inventory,
)

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

SECRET = "hmac-key-Zq81xVw"  # the HMAC key; never in any output
TOKENS = {"slack": "T000-slack-token-9f3a", "teams": "teams-sig-77c1d0", "hook": "hook-token-41be",
          "fail": "fail-token-0c5e", "slow": "slow-token-d29a"}
AM_TOKEN = "am-bearer-5b6e2f"
HOOK_TIMEOUT = 0.5  # node_maintenance_notify_timeout in the scenario: the slow target stalls past it


# -- a real Alertmanager ------------------------------------------------------------------------------
class Alertmanager:
    def __init__(self, url: str) -> None:
        self.url = url
        self.http = urllib3.PoolManager()

    def silences(self) -> List[Dict[str, Any]]:
        resp = self.http.request("GET", self.url + "/api/v2/silences", timeout=5)
        assert resp.status == 200, resp.data
        return json.loads(resp.data)

    def of(self, node: str) -> List[Dict[str, Any]]:
        return [s for s in self.silences() if any(m["name"] == "node" and m["value"] == node for m in s["matchers"])]

    def get(self, silence_id: str) -> Dict[str, Any]:
        resp = self.http.request("GET", f"{self.url}/api/v2/silence/{silence_id}", timeout=5)
        assert resp.status == 200, resp.data
        return json.loads(resp.data)


@pytest.fixture(scope="session")
def alertmanager() -> Iterator[Alertmanager]:
    """hack/alertmanager up (builds it first when the cache lacks it), stopped at the end."""
    script = str(ROOT / "hack" / "alertmanager")
    subprocess.run([script, "up"], check=True, timeout=600)
    env = dict(line.removeprefix("export ").split("=", 1)
               for line in subprocess.run([script, "env"], check=True, capture_output=True, text=True).stdout.splitlines())
    try:
        yield Alertmanager(env["NMO_ALERTMANAGER_URL"])
    finally:
        subprocess.run([script, "down"], check=False, timeout=60)


# -- the stand-in receiver -------------------------------------------------------------------------------
class Receiver:
    """POST /<kind>/<token>: recorded; /fail/... answers 500, /slow/... answers after ``stall`` s."""

    def __init__(self, stall: float = 10.0) -> None:
        self.requests: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                kind = self.path.strip("/").split("/")[0]
                with receiver.lock:
                    receiver.requests.append({"kind": kind, "path": self.path, "headers": dict(self.headers),
                                              "raw": raw, "at": time.monotonic()})
                if kind == "slow":
                    time.sleep(stall)
                status = 500 if kind == "fail" else 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the client gave up on the slow answer
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, kind: str) -> str:
        return f"http://127.0.0.1:{self.port}/{kind}/{TOKENS[kind]}"

    def bodies(self, kind: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [json.loads(r["raw"]) for r in self.requests if r["kind"] == kind]

    def of(self, kind: str) -> List[Dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["kind"] == kind]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def targets(receiver: Receiver) -> List[Dict[str, Any]]:
    return [{"kind": "slack", "url": receiver.url("slack")},
            {"kind": "teams", "url": receiver.url("teams")},
            {"kind": "webhook", "url": receiver.url("hook"), "secret": SECRET},
            {"kind": "webhook", "url": receiver.url("fail")},
            {"kind": "webhook", "url": receiver.url("slow")}]


def assert_no_secret(output: str) -> None:
    for secret in [SECRET, AM_TOKEN, *TOKENS.values()]:
        assert secret not in output, f"a secret ({secret[:6]}...) is in the output"


# -- sampling: nodes in maintenance and silences, side by side ---------------------------------------------
class Sampler(threading.Thread):
    """Every 0.3 s: which of ``nodes`` are cordoned, and each node's active silence (id, endsAt)."""

    def __init__(self, cluster: Any, am: Alertmanager, nodes: List[str]) -> None:
        super().__init__(daemon=True)
        self.cluster, self.am, self.nodes = cluster, am, nodes
        self.samples: List[Dict[str, Any]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            cordoned = {n for n in self.nodes
                        if self.cluster.client.get(f"/api/v1/nodes/{n}").get("spec", {}).get("unschedulable")}
            active = {}
            for s in self.am.silences():
                node = next((m["value"] for m in s["matchers"] if m["name"] == "node"), None)
                if node in self.nodes and s["status"]["state"] == "active":
                    active[node] = (s["id"], s["endsAt"])
            self.samples.append({"at": time.monotonic(), "cordoned": cordoned, "silenced": active})
            self.done.wait(0.3)

    def stop(self) -> None:
        self.done.set()
        self.join()

    def span(self, node: str, key: str) -> Optional[List[float]]:
        at = [s["at"] for s in self.samples if node in s[key]]
        return [at[0], at[-1]] if at else None

    def ends(self, node: str) -> List[str]:
        return [s["silenced"][node][1] for s in self.samples if node in s["silenced"]]


def parse(moment: str) -> datetime:
    return datetime.fromisoformat(moment.replace("Z", "+00:00"))


# -- the scenario ---------------------------------------------------------------------------------------------
def test_a_run_notifies_in_order_and_silences_each_node_exactly_while_it_is_in_maintenance(
        cluster, world, user, tmp_path, receiver, alertmanager):
    """Three workers, one at a time; worker-02's work hook waits until the test has seen its
    silence extended by the heartbeat. Five targets: slack, teams, a signed webhook, one that
    answers 500, one that stalls past the timeout."""
    world.add_nodes(workers=3)
    w1, w2, w3 = world.workers
    release = tmp_path / "release"
    hook = tmp_path / "work.yml"
    hook.write_text(f"- name: Wait for the test's release\n  ansible.builtin.wait_for:\n    path: {release}\n"
                    f"    timeout: 150\n  when: inventory_hostname == '{w2}'\n")
    inventory = write_inventory(world, tmp_path)
    settings = {"node_maintenance_notify": targets(receiver), "node_maintenance_notify_timeout": HOOK_TIMEOUT,
                "node_maintenance_hooks_work": [str(hook)],
                "node_maintenance_alertmanager": {"url": alertmanager.url, "duration": 30, "token": AM_TOKEN}}

    sampler = Sampler(cluster, alertmanager, [w1, w2, w3])
    sampler.start()
    started = time.monotonic()
    playbook = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers", "-vvv"], extra_vars=settings)
    try:
        # worker-02 waits in its hook until its silence's endsAt has moved: the heartbeat's extension
        wait_for(lambda: len(set(sampler.ends(w2))) >= 2, 90, "worker-02's silence extended by the heartbeat")
        release.write_text("go")
        assert playbook.wait(120) == 0, playbook.output[-5000:]
    finally:
        if playbook.proc.poll() is None:
            playbook.kill()
        sampler.stop()
    took = time.monotonic() - started
    output = playbook.output
    run_id = playbook.task("Run | Start this run (id, run lease, heartbeat on the controller)")[0]["result"]["run"]
    wait_run_gone(cluster.client, run_id)
    wait_for(lambda: any(b["event"] == "run_finished" for b in receiver.bodies("hook")), 30,
             "run_finished from the heartbeat after the playbook ended")

    # -- notifications: in order, each kind its own body, the signature verifies
    events = [b["event"] for b in receiver.bodies("hook")]
    assert events == ["run_started", "node_begun", "node_done", "node_begun", "node_done", "node_begun",
                      "node_done", "run_finished"], events
    hooks = receiver.bodies("hook")
    assert [b["node"] for b in hooks] == [None, w1, w1, w2, w2, w3, w3, None]
    assert {b["run"] for b in hooks} == {run_id} and all(b["version"] == 1 for b in hooks)
    assert sorted(hooks[0]["details"]["nodes"]) == sorted([w1, w2, w3])
    assert hooks[-1]["details"]["counts"] == {"done": 3}, hooks[-1]
    assert hooks[4]["details"]["took_seconds"] >= 10, "worker-02 waited in its hook for the extension"
    assert hooks[2]["message"].startswith(f"Node {w1}: back in service after ")
    # the begun's name from the begin (begin.yml), the done's from the end that deleted it
    begun = {r["host"]: r["result"]["maintenance"]["name"] for r in playbook.task(
        "Begin | NodeMaintenance, leases and etcd guard, taints, cordon and label") if r["status"] == "ok"}
    assert [b["details"]["maintenance"] for b in hooks[1:7]] == [begun[n] for n in (w1, w1, w2, w2, w3, w3)], hooks
    for request in receiver.of("hook"):
        headers = {k.lower(): v for k, v in request["headers"].items()}
        assert notify_model.verify(SECRET, headers["x-nmo-timestamp"], request["raw"], headers["x-nmo-signature"])
        assert not notify_model.verify("another key", headers["x-nmo-timestamp"], request["raw"],
                                       headers["x-nmo-signature"])
    slack = receiver.bodies("slack")
    assert len(slack) == 8 and all(set(b) == {"text", "blocks"} for b in slack)
    assert f"Node {w2}: back in service" in slack[4]["text"]
    teams = receiver.bodies("teams")
    assert len(teams) == 8 and all(b["type"] == "message" for b in teams)
    card = teams[1]["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["type"] == "AdaptiveCard" and f"Node {w1}: maintenance begun" in card["content"]["body"][1]["text"]

    # -- the failing and the slow target: three attempts each, a warning each, the run went on
    # (the heartbeat's run_finished may still be trying them)
    wait_for(lambda: len(receiver.of("fail")) >= 24 and len(receiver.of("slow")) >= 24, 30, "the last attempts")
    assert len(receiver.of("fail")) == 3 * 8, len(receiver.of("fail"))
    assert len(receiver.of("slow")) == 3 * 8, len(receiver.of("slow"))
    sends = [r["result"] for r in playbook.task("Notify | Tell node_maintenance_notify") if r["status"] == "ok"]
    assert len(sends) == 7  # the playbook's own events; run_finished is the heartbeat's
    for sent in sends:
        assert sent["delivered"] == 3 and sent["undelivered"] == 2, sent
        assert [t["attempts"] for t in sent["targets"]] == [1, 1, 1, 3, 3], sent["targets"]
        assert sent["targets"][3]["status"] == 500 and "timed out" in sent["targets"][4]["error"]
    assert output.count("not delivered to webhook target #3 (http://127.0.0.1") == 7, "one warning an event"
    assert output.count("not delivered to webhook target #4 (http://127.0.0.1") == 7

    # -- silences: made after the begin, on without a gap through the long hook, expired after the end
    for node in (w1, w2, w3):
        cordoned, silenced = sampler.span(node, "cordoned"), sampler.span(node, "silenced")
        assert cordoned and silenced, (node, cordoned, silenced)
        assert cordoned[0] <= silenced[0] < cordoned[0] + 5, (node, cordoned, silenced)
        assert cordoned[1] - 0.5 <= silenced[1] < cordoned[1] + 5, (node, cordoned, silenced)
        gaps = [s["at"] for s in sampler.samples if silenced[0] <= s["at"] <= cordoned[1] and node not in s["silenced"]]
        assert not gaps, f"{node}: a gap in its silence while in maintenance"
        [silence] = alertmanager.of(node)  # one silence a node: extended in place, never a second one
        assert silence["status"]["state"] == "expired", silence
        assert silence["createdBy"] == "nmo.maintenance"
        assert run_id in silence["comment"] and nm_name(node) in silence["comment"]
        assert {(m["name"], m["value"], m["isRegex"]) for m in silence["matchers"]} == {
            ("node", node, False), ("instance", re.escape(node) + "(:[0-9]+)?", True)}
    assert all(len(s["silenced"]) <= 1 for s in sampler.samples), "two nodes' silences at once (concurrency 1)"
    ids = {s["silenced"][w2][0] for s in sampler.samples if w2 in s["silenced"]}
    assert len(ids) == 1, f"worker-02's silence changed id: {ids}"
    assert parse(sampler.ends(w2)[-1]) > parse(sampler.ends(w2)[0])
    assert_no_secret(output)
    slowest = max(t["seconds"] for sent in sends for t in sent["targets"])
    print(f"scenario: {took:.1f} s; the slow target's longest send {slowest:.1f} s (its stall: 10 s)")


def test_a_killed_runs_silence_lapses_and_the_rerun_silences_the_node_again(cluster, world, user, tmp_path, alertmanager):
    """SIGKILL during a long hook: the heartbeat is gone with the run, so the silence's endsAt
    never moves again and it lapses by itself; the rerun resumes the node, finds the recorded
    silence expired, makes a new one (the annotation names it) and expires it at the end."""
    world.add_nodes(workers=1)
    [w1] = world.workers
    hook = tmp_path / "work.yml"
    hook.write_text(f"- name: Wait forever\n  ansible.builtin.wait_for:\n    path: {tmp_path / 'never'}\n"
                    "    timeout: 120\n")
    inventory = write_inventory(world, tmp_path)
    am = {"url": alertmanager.url, "duration": 30, "token": AM_TOKEN}
    first = Run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                extra_vars={"node_maintenance_alertmanager": am, "node_maintenance_hooks_work": [str(hook)]})
    try:
        wait_for(lambda: "Wait forever" in first.output, 60, "the long hook")
        silence_id = maintenance_of(cluster.client, w1)["metadata"]["annotations"]["nmo.maintenance/silence"]
        killed_run = run_of(cluster.client, w1)
    finally:
        first.kill()
        first.close()
    wait_run_gone(cluster.client, killed_run)
    at_kill = alertmanager.get(silence_id)
    assert at_kill["status"]["state"] == "active"
    wait_for(lambda: alertmanager.get(silence_id)["status"]["state"] == "expired", 45, "the silence to lapse")
    assert alertmanager.get(silence_id)["endsAt"] == at_kill["endsAt"], "extended after the kill"

    again = run("maintenance.yml", inventory, user.kubeconfig, args=["-l", "workers"],
                extra_vars={"node_maintenance_alertmanager": am})
    assert again.proc.returncode == 0, again.output[-4000:]
    made = again.last("Silence | The node's alerts in Alertmanager (node_maintenance_alertmanager)")["result"]
    assert made["action"] == "created" and made["silence_id"] != silence_id, made
    states = {s["id"]: s["status"]["state"] for s in alertmanager.of(w1)}
    assert states == {silence_id: "expired", made["silence_id"]: "expired"}
    wait_clean(cluster.client, [w1])


def test_the_modules_alone_alertmanager_down_is_a_warning_and_no_secret_shows(cluster, world, user, tmp_path, receiver,
                                                                              alertmanager):
    """One playbook of module calls at -vvv: a run started with notifications (its heartbeat
    tells of a node held back, then of the run's end); nmo_silence against a closed port (a
    warning), then against Alertmanager (made, extended in place as a resumed run does, check
    mode, expired, idempotent); nmo_notify with one good and one failing target."""
    world.add_nodes(workers=1)
    [w1] = world.workers
    run_id = f"t-{world.id}"
    nm = start_maintenance(cluster, world, w1)
    # a drain held back by a budget, as the drain writes it, on a NodeMaintenance of this run
    cluster.client.patch(f"{NM_API}/{nm['metadata']['name']}", {"metadata": {"annotations": {
        "nmo.maintenance/run": run_id}}}, "merge")
    cluster.client.patch(f"{NM_API}/{nm['metadata']['name']}/status", {"status": {
        "pendingPods": ["web-0"], "drainProgress": 50,
        "lastError": "Cannot evict pod as it would violate the pod's disruption budget."}}, "merge")
    release = tmp_path / "release"
    down = {"url": "http://127.0.0.1:9", "token": AM_TOKEN, "duration": 60}
    up = {"url": alertmanager.url, "token": AM_TOKEN, "duration": 60}
    silence = "nmo.maintenance.nmo_silence"

    def task(name: str, module: str, args: Dict[str, Any], **extra: Any) -> Dict[str, Any]:
        return {"name": name, module: args, "ignore_errors": True, **extra}

    hook = [{"kind": "webhook", "url": receiver.url("hook"), "secret": SECRET}]
    tasks = [
        task("run", "nmo.maintenance.nmo_run",
             {"run_id": run_id, "mode": "standalone", "notify": {"targets": hook, "blocked_after": 1, "timeout": 1}}),
        task("down", silence, {"node": w1, "run_id": "t", "alertmanager": down}),
        task("down end", silence, {"node": w1, "state": "absent", "silence_id": "x", "alertmanager": down}),
        task("made", silence, {"node": w1, "run_id": "t", "alertmanager": up}, diff=True),
        task("again", silence, {"node": w1, "run_id": "t2", "alertmanager": up}),
        task("checked", silence, {"node": w1, "state": "absent", "alertmanager": up}, check_mode=True),
        task("expired", silence, {"node": w1, "state": "absent", "alertmanager": up}),
        task("idempotent", silence, {"node": w1, "state": "absent", "alertmanager": up}),
        task("sent", "nmo.maintenance.nmo_notify", {
            "targets": [{"kind": "webhook", "url": receiver.url("hook"), "secret": SECRET},
                        {"kind": "slack", "url": receiver.url("fail")}],
            "event": "node_failed", "run_id": run_id, "node": w1, "attempts": 2,
            "details": {"error": "DIMM slot 3", "rolled_back": True}}),
        task("held", "ansible.builtin.wait_for", {"path": str(release), "timeout": 60}),
    ]
    path = tmp_path / "modules.yml"
    path.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    played = Run(str(path), "localhost,", user.kubeconfig, args=["-c", "local", "-vvv"])
    try:
        wait_for(lambda: any(b["event"] == "node_blocked" for b in receiver.bodies("hook")), 40,
                 "node_blocked from the heartbeat")
        release.write_text("go")
        assert played.wait(60) == 0, played.output[-3000:]
    finally:
        if played.proc.poll() is None:
            played.kill()
    wait_for(lambda: any(b["event"] == "run_finished" for b in receiver.bodies("hook")), 30, "run_finished")
    results = {r["task"]: r["result"] for r in played.records()}
    [blocked] = [b for b in receiver.bodies("hook") if b["event"] == "node_blocked"]
    assert blocked["node"] == w1 and blocked["run"] == run_id, blocked
    assert blocked["details"]["pending_pods"] == ["web-0"] and blocked["details"]["blocked_seconds"] >= 1
    assert blocked["details"]["what"] == ("1 pod(s) not evicted yet (web-0); last error: Cannot evict pod as it "
                                          "would violate the pod's disruption budget.")
    [finished] = [b for b in receiver.bodies("hook") if b["event"] == "run_finished"]
    assert finished["details"]["counts"] == {"done": 0, "failed": 1}, finished

    made = results["down"]
    assert not made.get("failed") and made["action"] == "none" and made["changed"] is False, made
    assert any("connection refused" in w and "goes on without a silence" in w for w in made["warnings"]), made
    assert not results["down end"].get("failed") and results["down end"]["warnings"]
    made = results["made"]
    assert made["action"] == "created" and made["changed"] and made["diff"]["after"]["silence"] == made["silence_id"]
    again = results["again"]
    assert again["action"] == "extended" and again["silence_id"] == made["silence_id"] and not again["changed"], again
    assert again["ends_at"] > made["ends_at"]
    assert results["checked"]["changed"] and results["checked"]["silence_id"] == made["silence_id"]
    assert results["expired"]["changed"] and results["expired"]["action"] == "expired"
    assert not results["idempotent"]["changed"] and results["idempotent"]["action"] == "none"
    [only] = alertmanager.of(w1)
    assert only["id"] == made["silence_id"] and only["status"]["state"] == "expired"
    assert maintenance_of(cluster.client, w1)["metadata"]["annotations"]["nmo.maintenance/silence"] == only["id"]

    sent = results["sent"]
    assert sent["delivered"] == 1 and sent["undelivered"] == 1, sent
    assert [t["attempts"] for t in sent["targets"]] == [1, 2]
    [failed] = [b for b in receiver.bodies("hook") if b["event"] == "node_failed"]
    assert "rolled back" in failed["message"]
    assert_no_secret(played.output + json.dumps(played.records()))
    played.close()
