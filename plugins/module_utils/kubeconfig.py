"""A kubeconfig (or a pod's service account) read without the ``kubernetes`` package.

Importing ``kubernetes`` costs 0.3-0.7 s, paid by every module task; a maintenance makes
a dozen of them a node. The common kubeconfigs (client certificates, a token, a CA, with
files or inline data) are read here; anything else (exec plugins, auth providers) is left
to the ``kubernetes`` package, which ``client.py`` falls back to.
"""

from __future__ import annotations

import atexit
import base64
import os
import tempfile
from typing import Any, Dict, List, Optional

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_SIMPLE_USER_KEYS = {"client-certificate", "client-certificate-data", "client-key", "client-key-data",
                     "token", "tokenFile"}


class Unsupported(Exception):
    """This configuration needs the ``kubernetes`` package (exec plugin, auth provider...)."""


class Configuration:
    """The connection settings ``client.Client`` reads (a subset of kubernetes' Configuration)."""

    def __init__(self) -> None:
        self.host = "http://localhost"
        self.verify_ssl = True
        self.ssl_ca_cert: Optional[str] = None
        self.cert_file: Optional[str] = None
        self.key_file: Optional[str] = None
        self.proxy: Optional[str] = None
        self.api_key: Dict[str, str] = {}
        self.api_key_prefix: Dict[str, str] = {}
        self.refresh_api_key_hook = None

    def get_api_key_with_prefix(self, identifier: str) -> Optional[str]:
        key = self.api_key.get(identifier)
        if not key:
            return None
        prefix = self.api_key_prefix.get(identifier)
        return f"{prefix} {key}" if prefix else key


_temp_files: List[str] = []


def _remove_temp_files() -> None:
    for path in _temp_files:
        try:
            os.unlink(path)
        except OSError:
            pass


atexit.register(_remove_temp_files)


def _data_file(data: str, suffix: str) -> str:
    """Inline certificate data as a private temporary file (urllib3 wants paths)."""
    handle, path = tempfile.mkstemp(prefix="nmo-", suffix=suffix)
    with os.fdopen(handle, "wb") as out:
        out.write(base64.b64decode(data))
    _temp_files.append(path)
    return path


def _path(value: Optional[str], base: str) -> Optional[str]:
    if not value:
        return None
    return value if os.path.isabs(value) else os.path.join(base, value)


def _named(items: List[Dict[str, Any]], name: str, what: str) -> Dict[str, Any]:
    for item in items or []:
        if item.get("name") == name:
            return item.get(what) or {}
    raise KeyError(f"{what} {name!r} not found in the kubeconfig")


def from_kubeconfig(path: str, context: Optional[str] = None) -> Configuration:
    """Read ``path``; raises Unsupported for what only the kubernetes package can do."""
    import yaml

    with open(path, encoding="utf-8") as handle:
        doc = yaml.safe_load(handle) or {}
    base = os.path.dirname(os.path.abspath(path))
    name = context or doc.get("current-context")
    if not name:
        raise KeyError("the kubeconfig has no current-context; give context")
    ctx = _named(doc.get("contexts", []), name, "context")
    cluster = _named(doc.get("clusters", []), ctx.get("cluster", ""), "cluster")
    user = _named(doc.get("users", []), ctx.get("user", ""), "user") if ctx.get("user") else {}
    if set(user) - _SIMPLE_USER_KEYS or cluster.get("tls-server-name"):
        raise Unsupported("needs the kubernetes package")
    cfg = Configuration()
    cfg.host = cluster.get("server") or cfg.host
    cfg.verify_ssl = not cluster.get("insecure-skip-tls-verify", False)
    cfg.proxy = cluster.get("proxy-url")
    if cluster.get("certificate-authority-data"):
        cfg.ssl_ca_cert = _data_file(cluster["certificate-authority-data"], ".crt")
    else:
        cfg.ssl_ca_cert = _path(cluster.get("certificate-authority"), base)
    if user.get("client-certificate-data"):
        cfg.cert_file = _data_file(user["client-certificate-data"], ".crt")
    else:
        cfg.cert_file = _path(user.get("client-certificate"), base)
    if user.get("client-key-data"):
        cfg.key_file = _data_file(user["client-key-data"], ".key")
    else:
        cfg.key_file = _path(user.get("client-key"), base)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(_path(user["tokenFile"], base) or "", encoding="utf-8") as handle:
            token = handle.read().strip()
    if token:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    return cfg


def in_cluster() -> Configuration:
    """The pod's service account, as a controller running in the cluster would use it."""
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    cfg = Configuration()
    cfg.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cfg.ssl_ca_cert = os.path.join(SERVICE_ACCOUNT, "ca.crt")
    with open(os.path.join(SERVICE_ACCOUNT, "token"), encoding="utf-8") as handle:
        cfg.api_key = {"authorization": handle.read().strip()}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return cfg
