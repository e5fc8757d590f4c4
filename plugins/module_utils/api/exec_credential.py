"""A kubeconfig's exec credential plugin (``users[].user.exec``), run and cached here.

EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``) and OIDC helpers hand out
credentials this way: a command that prints an ``ExecCredential`` with a token (or a client
certificate and key) and, usually, an ``expirationTimestamp``. The ``kubernetes`` package
treats every credential that expires within five minutes as expired already, so a plugin
whose credential lives less than that ran before every request. Here a credential is kept
until its own expiry less ``EXPIRY_MARGIN`` seconds, and the plugin runs again early only
when the API server refused the credential (a 401: revoked, rotated), as client-go does.

A run is many processes (a worker for each module task, the heartbeat, the callbacks), and an
EKS token costs a second of ``aws eks get-token`` each: a credential that expires is also kept
in a file of the user's cache, readable by the user alone (``aws`` and OIDC login helpers keep
theirs the same way), so one run of the plugin serves every process of every run until the
credential's expiry. ``NMO_EXEC_CREDENTIAL_CACHE`` names another folder, or ``off`` keeps
credentials in each process's memory only. A credential without an expiry never goes to a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

try:
    import fcntl
except ImportError:  # not POSIX: each process keeps its own credential in memory
    fcntl = None  # type: ignore[assignment]

EXPIRY_MARGIN = 5.0  # seconds before its expirationTimestamp a credential is obtained anew
RUN_TIMEOUT = 120.0  # seconds a plugin may take (an SSO login that waits would otherwise hang the run)
API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class ExecError(Exception):
    """The plugin could not be run, or what it printed is not a usable credential."""


class Credential:
    """What one run of the plugin gave: a token and/or a client certificate and key (PEM)."""

    def __init__(self, token: Optional[str], cert: Optional[bytes], key: Optional[bytes],
                 expires: Optional[float]) -> None:
        self.token = token
        self.cert = cert
        self.key = key
        self.expires = expires  # wall-clock seconds (time.time()), None: never

    def fresh(self, now: float, margin: float = EXPIRY_MARGIN) -> bool:
        return self.expires is None or now < self.expires - margin

    def same(self, other: Optional[Credential]) -> bool:
        return other is not None and (self.token, self.cert, self.key) == (other.token, other.cert, other.key)

    def stored(self) -> Dict[str, Any]:
        return {"token": self.token, "cert": self.cert.decode() if self.cert else None,
                "key": self.key.decode() if self.key else None, "expires": self.expires}

    @classmethod
    def from_stored(cls, doc: Dict[str, Any]) -> Credential:
        cert, key, expires = doc.get("cert"), doc.get("key"), doc.get("expires")
        return cls(doc.get("token") or None, cert.encode() if cert else None, key.encode() if key else None,
                   float(expires) if expires is not None else None)


def parse_timestamp(value: str) -> float:
    """An RFC 3339 time (``2026-12-03T12:00:00Z``, fractions and offsets allowed) as epoch seconds."""
    text = value.strip().replace("Z", "+00:00").replace("z", "+00:00")
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def parse(output: str, command: str) -> Credential:
    """The credential in a plugin's standard output (an ExecCredential in JSON)."""
    try:
        doc = json.loads(output)
    except ValueError:
        raise ExecError(f"the exec plugin {command} printed no JSON ExecCredential: {output.strip()[:200]!r}") from None
    status = (doc or {}).get("status") if isinstance(doc, dict) else None
    if doc.get("kind") != "ExecCredential" or not isinstance(status, dict):
        raise ExecError(f"the exec plugin {command} printed no ExecCredential with a status")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
    if not token and not (cert and key):
        raise ExecError(f"the exec plugin {command} gave neither a token nor a client certificate and key")
    expires = None
    if status.get("expirationTimestamp"):
        try:
            expires = parse_timestamp(str(status["expirationTimestamp"]))
        except ValueError:
            raise ExecError(f"the exec plugin {command} gave an expirationTimestamp that is not RFC 3339: "
                            f"{status['expirationTimestamp']!r}") from None
    return Credential(token, cert.encode() if cert else None, key.encode() if key else None, expires)


def _env(spec: Dict[str, Any], cluster: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    for entry in spec.get("env") or []:
        if isinstance(entry, dict) and entry.get("name"):
            env[str(entry["name"])] = str(entry.get("value", ""))
    info: Dict[str, Any] = {"apiVersion": spec.get("apiVersion") or API_VERSIONS[0], "kind": "ExecCredential",
                            "spec": {"interactive": False}}
    if spec.get("provideClusterInfo") and cluster is not None:
        info["spec"]["cluster"] = cluster
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    return env


def run_plugin(spec: Dict[str, Any], base: str, cluster: Optional[Dict[str, Any]] = None) -> Credential:
    """Run the plugin once (never interactively: Ansible's workers have no terminal)."""
    command = spec.get("command")
    if not command:
        raise ExecError("the kubeconfig's exec entry has no command")
    if spec.get("apiVersion") and spec["apiVersion"] not in API_VERSIONS:
        raise ExecError(f"the exec plugin's apiVersion {spec['apiVersion']!r} is not supported: "
                        f"use {' or '.join(API_VERSIONS)}")
    # a relative command with a slash is relative to the kubeconfig's folder, as kubectl takes it
    if os.sep in command and not os.path.isabs(command):
        command = os.path.join(base, command)
    argv = [command, *[str(a) for a in spec.get("args") or []]]
    try:
        done = subprocess.run(argv, env=_env(spec, cluster), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT, check=False)
    except FileNotFoundError:
        hint = spec.get("installHint")
        raise ExecError(f"the exec plugin {command} was not found" + (f": {hint.strip()}" if hint else "")) from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ExecError(f"the exec plugin {command} could not be run: {exc}") from None
    if done.returncode != 0:
        raise ExecError(f"the exec plugin {command} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return parse(done.stdout, command)


_cache: Dict[str, Credential] = {}
_lock = threading.Lock()


def key_of(spec: Dict[str, Any], server: str) -> str:
    return hashlib.sha256(json.dumps([spec, server], sort_keys=True, default=str).encode()).hexdigest()


CACHE_ENV = "NMO_EXEC_CREDENTIAL_CACHE"


def cache_folder() -> Optional[str]:
    """Where credentials are shared between processes, or None (``NMO_EXEC_CREDENTIAL_CACHE=off``)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "no", "false", "0") else chosen
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "nmo-maintenance", "exec-credentials")


class _Shared:
    """One credential's file, used under an exclusive lock of its own so that processes that
    find it stale at the same moment run the plugin once between them. Any error of the file
    system makes it a no-op: the credential is then kept in memory only."""

    def __init__(self, folder: Optional[str], key: str) -> None:
        self.path = os.path.join(folder, key + ".json") if folder and fcntl is not None else None

    def read(self) -> Optional[Credential]:
        if self.path is None:
            return None
        try:
            with open(self.path, encoding="utf-8") as handle:
                return Credential.from_stored(json.load(handle))
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    def write(self, credential: Credential) -> None:
        if self.path is None or credential.expires is None:
            return
        folder = os.path.dirname(self.path)
        try:
            handle, temporary = tempfile.mkstemp(dir=folder, prefix=".credential-")  # mode 0600
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(credential.stored(), out)
            os.replace(temporary, self.path)
        except OSError:
            return


@contextlib.contextmanager
def _shared(key: str) -> Iterator[_Shared]:
    shared = _Shared(cache_folder(), key)
    if shared.path is None:
        yield shared
        return
    try:
        os.makedirs(os.path.dirname(shared.path), mode=0o700, exist_ok=True)
        lock = open(shared.path[:-len(".json")] + ".lock", "a", encoding="utf-8")  # noqa: SIM115 - held below
    except OSError:
        yield _Shared(None, key)
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield shared


def obtain(spec: Dict[str, Any], server: str, base: str, refused: Optional[Credential] = None,
           now: Callable[[], float] = time.time, cluster: Optional[Dict[str, Any]] = None) -> Credential:
    """The plugin's credential for this server: the one this process keeps, or the one another
    process of the user put in the shared file, while it is fresh; else a new run of the
    plugin. ``refused``: the credential the API server just answered 401 to; the plugin runs
    again unless another thread or process already replaced it. ``cluster``: what a plugin
    with ``provideClusterInfo`` is told of the cluster (server, CA data, TLS verification)."""
    key = key_of(spec, server)
    with _lock:
        cached = _cache.get(key)
        if cached is not None and not cached.same(refused) and cached.fresh(now()):
            return cached
        with _shared(key) as shared:
            stored = shared.read()
            if stored is not None and not stored.same(refused) and stored.fresh(now()):
                _cache[key] = stored
                return stored
            credential = run_plugin(spec, base, cluster)
            shared.write(credential)
            _cache[key] = credential
            return credential


def forget() -> None:
    """Drop every cached credential (tests)."""
    with _lock:
        _cache.clear()


def described(spec: Dict[str, Any]) -> Tuple[str, str]:
    """(the command as named in messages, how it is obtained again)."""
    command = str(spec.get("command") or "?")
    return command, f"the exec plugin {command} was run again"
