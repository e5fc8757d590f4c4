"""A kubeconfig's exec credential plugin (``users[].user.exec``), run and cached here.

EKS (``aws eks get-token``), GKE (``gke-gcloud-auth-plugin``) and OIDC helpers hand out
credentials this way: a command that prints an ``ExecCredential`` with a token (or a client
certificate and key) and, usually, an ``expirationTimestamp``. The ``kubernetes`` package
treats every credential that expires within five minutes as expired already, so a plugin
whose credential lives less than that ran before every request. Here a credential is kept
until its own expiry less ``EXPIRY_MARGIN`` seconds, once per process and plugin
configuration, and the plugin runs again early only when the API server refused the
credential (a 401: revoked, rotated), as client-go does.

The credential stays in memory; nothing is written to a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Optional, Tuple

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


def obtain(spec: Dict[str, Any], server: str, base: str, refused: Optional[Credential] = None,
           now: Callable[[], float] = time.time, cluster: Optional[Dict[str, Any]] = None) -> Credential:
    """The plugin's credential for this server: the cached one while it is fresh, else a new
    run. ``refused``: the credential the API server just answered 401 to; the plugin runs
    again unless another thread already replaced it. ``cluster``: what a plugin with
    ``provideClusterInfo`` is told of the cluster (server, CA data, TLS verification)."""
    key = key_of(spec, server)
    with _lock:
        cached = _cache.get(key)
        if cached is not None and cached is not refused and cached.fresh(now()):
            return cached
        credential = run_plugin(spec, base, cluster)
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
