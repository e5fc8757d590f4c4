"""Exec credential plugins: run by us, kept until their own expiry, run again after a 401.

The plugin is a real executable written here; the API server is a small HTTP server on
127.0.0.1 that accepts only the tokens it is told to, so a 401 is a real answer."""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, List, Set

import pytest
import yaml

from ansible_collections.nmo.maintenance.plugins.module_utils.api import exec_credential
from ansible_collections.nmo.maintenance.plugins.module_utils.api.client import ConnectionOptions, connect, forget_clients
from ansible_collections.nmo.maintenance.plugins.module_utils.errors import ConnectionConfigError, CredentialsRefused


class Server:
    """Answers GET /version with 200 to an accepted bearer token, 401 to any other."""

    def __init__(self) -> None:
        self.accepted: Set[str] = set()
        self.seen: List[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                token = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                owner.seen.append(token)
                ok = token in owner.accepted
                body = json.dumps({"gitVersion": "v1.37.2"} if ok else
                                  {"kind": "Status", "reason": "Unauthorized", "message": "Unauthorized"}).encode()
                self.send_response(200 if ok else 401, "OK" if ok else "Unauthorized")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.httpd.shutdown()


@pytest.fixture(autouse=True)
def fresh_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(exec_credential.CACHE_ENV, str(tmp_path / "shared"))
    exec_credential.forget()
    forget_clients()
    yield
    exec_credential.forget()
    forget_clients()


def plugin(folder: Path, lives: float) -> Path:
    """A plugin that hands out token-<n> (n: its runs so far), valid ``lives`` seconds by its
    expirationTimestamp, and logs each run to runs.log."""
    script = folder / "get-token"
    script.write_text(f"""#!{sys.executable}
import json, os, datetime
log = {str(folder / 'runs.log')!r}
n = sum(1 for _ in open(log)) + 1 if os.path.exists(log) else 1
open(log, "a").write(os.environ["KUBERNETES_EXEC_INFO"] + "\\n")
end = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds={lives})
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": f"token-{{n}}", "expirationTimestamp": end.strftime("%Y-%m-%dT%H:%M:%SZ")}}}}))
""")
    script.chmod(0o755)
    return script


def kubeconfig(folder: Path, url: str, user: dict) -> str:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "ctx",
           "clusters": [{"name": "c", "cluster": {"server": url}}],
           "users": [{"name": "eks-admin", "user": user}],
           "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "eks-admin"}}]}
    path = folder / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def runs(folder: Path) -> int:
    log = folder / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def exec_user(script: Path) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(script),
                     "interactiveMode": "Never"}}


def test_a_credential_within_five_minutes_of_expiry_is_kept_until_its_own_expiry(tmp_path, server):
    script = plugin(tmp_path, lives=120)  # the kubernetes package took this for expired already
    server.accepted.add("token-1")
    client = connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, exec_user(script))))
    for _request in range(20):
        client.get("/version")
    assert runs(tmp_path) == 1, "the plugin ran more than once in its credential's life"
    info = json.loads((tmp_path / "runs.log").read_text().splitlines()[0])
    assert info == {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                    "spec": {"interactive": False}}


def test_a_plugin_that_asks_for_cluster_info_is_given_the_server(tmp_path, server):
    script = plugin(tmp_path, lives=900)
    server.accepted.add("token-1")
    user = exec_user(script)
    user["exec"]["provideClusterInfo"] = True
    connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, user))).get("/version")
    info = json.loads((tmp_path / "runs.log").read_text().splitlines()[0])
    assert info["spec"]["cluster"] == {"server": server.url, "insecure-skip-tls-verify": False}


def test_an_expiring_credential_is_obtained_again_a_few_seconds_before_its_expiry(tmp_path, server):
    script = plugin(tmp_path, lives=exec_credential.EXPIRY_MARGIN + 2)
    server.accepted.update({"token-1", "token-2"})
    client = connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, exec_user(script))))
    client.get("/version")
    deadline = time.monotonic() + 20
    while runs(tmp_path) < 2 and time.monotonic() < deadline:
        client.get("/version")
        time.sleep(0.2)  # pacing requests, not synchronising: the condition is the plugin's run count
    assert runs(tmp_path) == 2 and server.seen[-1] == "token-2"


def test_a_401_runs_the_plugin_again_once_and_asks_again(tmp_path, server):
    script = plugin(tmp_path, lives=900)
    server.accepted.add("token-1")
    client = connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, exec_user(script))))
    client.get("/version")
    server.accepted = {"token-2"}  # token-1 revoked
    assert client.get("/version") == {"gitVersion": "v1.37.2"}
    assert runs(tmp_path) == 2 and server.seen[-2:] == ["token-1", "token-2"]
    assert client.renewals == [f"the exec plugin {script} was run again"]


def test_a_second_401_names_the_user_whose_credentials_were_refused(tmp_path, server):
    script = plugin(tmp_path, lives=900)
    path = kubeconfig(tmp_path, server.url, exec_user(script))
    client = connect(ConnectionOptions(kubeconfig=path))
    with pytest.raises(CredentialsRefused) as raised:
        client.get("/version")
    assert runs(tmp_path) == 2, "the plugin was not run again exactly once"
    assert str(raised.value).startswith(
        f"the credentials of user 'eks-admin' (context 'ctx' of the kubeconfig {path}) were refused "
        f"(401 Unauthorized, also after the exec plugin {script} was run again) (GET /version)")


def test_a_token_file_is_read_again_after_a_401(tmp_path, server):
    token = tmp_path / "token"
    token.write_text("old\n")
    server.accepted.add("old")
    client = connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, {"tokenFile": str(token)})))
    client.get("/version")
    token.write_text("new\n")  # rotated, as a projected service account token is
    server.accepted = {"new"}
    client.get("/version")
    assert server.seen[-2:] == ["old", "new"] and client.renewals == [f"the token file {token} was read again"]


def test_a_fixed_api_key_is_refused_at_once_naming_it(tmp_path, server):
    client = connect(ConnectionOptions(host=server.url, api_key="nope"))
    with pytest.raises(CredentialsRefused, match=r"^the credentials of user given by api_key were refused "
                                                 r"\(401 Unauthorized\) \(GET /version\)"):
        client.get("/version")
    assert server.seen == ["nope"]


def test_a_plugin_that_fails_says_so_naming_the_user(tmp_path, server):
    script = tmp_path / "broken"
    script.write_text("#!/bin/sh\necho 'token expired: run aws sso login' >&2\nexit 3\n")
    script.chmod(0o755)
    with pytest.raises(ConnectionConfigError, match=r"cannot obtain the credentials of user 'eks-admin' .*"
                                                    r"exited 3: token expired: run aws sso login"):
        connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, exec_user(script))))


def test_expiration_timestamps_are_read_as_rfc3339():
    moment = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)
    assert exec_credential.parse_timestamp("2026-12-03T12:00:00Z") == moment.timestamp()
    assert exec_credential.parse_timestamp("2026-12-03T13:00:00.5+01:00") == moment.timestamp() + 0.5
    cred = exec_credential.parse(json.dumps({"kind": "ExecCredential", "status": {"token": "t"}}), "p")
    assert cred.expires is None and cred.fresh(time.time() + timedelta(days=999).total_seconds())


def test_another_process_takes_the_credential_from_the_shared_file_until_its_expiry(tmp_path, server):
    """Each module task of a run is a process of its own: the first runs the plugin, the others
    (here: the same process with its memory emptied) find the credential in the user's file."""
    script = plugin(tmp_path, lives=900)
    server.accepted.add("token-1")
    path = kubeconfig(tmp_path, server.url, exec_user(script))
    for _process in range(3):
        exec_credential.forget()
        forget_clients()
        connect(ConnectionOptions(kubeconfig=path)).get("/version")
    assert runs(tmp_path) == 1, "the plugin ran again although the shared credential was fresh"
    (stored,) = (tmp_path / "shared").glob("*.json")
    assert stored.stat().st_mode & 0o777 == 0o600 and (tmp_path / "shared").stat().st_mode & 0o777 == 0o700
    # revoked: the process that meets the 401 runs the plugin; the next process takes its new token
    server.accepted = {"token-2"}
    exec_credential.forget()
    forget_clients()
    connect(ConnectionOptions(kubeconfig=path)).get("/version")
    exec_credential.forget()
    forget_clients()
    connect(ConnectionOptions(kubeconfig=path)).get("/version")
    assert runs(tmp_path) == 2 and server.seen[-3:] == ["token-1", "token-2", "token-2"]


def test_a_process_that_meets_a_401_takes_a_newer_credential_another_process_obtained(tmp_path, server):
    script = plugin(tmp_path, lives=900)
    server.accepted.add("token-1")
    path = kubeconfig(tmp_path, server.url, exec_user(script))
    old = connect(ConnectionOptions(kubeconfig=path))
    old.get("/version")
    server.accepted = {"token-2"}  # token-1 revoked; another process meets it first
    exec_credential.forget()
    forget_clients()
    connect(ConnectionOptions(kubeconfig=path)).get("/version")
    assert runs(tmp_path) == 2
    exec_credential._cache.clear()  # the first process again: its memory still holds token-1
    stale = exec_credential.Credential("token-1", None, None, time.time() + 900)
    exec_credential._cache[next(iter(_keys(tmp_path)))] = stale
    assert old.get("/version") == {"gitVersion": "v1.37.2"}
    assert runs(tmp_path) == 2, "the plugin ran again although another process had renewed the credential"


def test_without_the_shared_file_each_process_runs_the_plugin(tmp_path, server, monkeypatch):
    monkeypatch.setenv(exec_credential.CACHE_ENV, "off")
    script = plugin(tmp_path, lives=900)
    server.accepted.update({"token-1", "token-2"})
    path = kubeconfig(tmp_path, server.url, exec_user(script))
    for _process in range(2):
        exec_credential.forget()
        forget_clients()
        connect(ConnectionOptions(kubeconfig=path)).get("/version")
    assert runs(tmp_path) == 2 and not (tmp_path / "shared").exists()


def test_a_credential_without_an_expiry_is_never_written_to_a_file(tmp_path, server):
    script = tmp_path / "forever"
    script.write_text(f"""#!{sys.executable}
import json
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": "token-1"}}}}))
""")
    script.chmod(0o755)
    server.accepted.add("token-1")
    connect(ConnectionOptions(kubeconfig=kubeconfig(tmp_path, server.url, exec_user(script)))).get("/version")
    assert not list((tmp_path / "shared").glob("*.json"))


def _keys(tmp_path: Path) -> List[str]:
    return [p.stem for p in (tmp_path / "shared").glob("*.json")]
