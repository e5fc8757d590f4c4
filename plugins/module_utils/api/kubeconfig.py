"""A kubeconfig (or a pod's service account) read without the ``kubernetes`` package.

Importing ``kubernetes`` costs 0.3-0.7 s, paid by every module task that imports it, and
the role runs several module tasks a node. The common kubeconfigs (client certificates, a token, a CA, with
files or inline data, an exec credential plugin: ``exec_credential.py``) are read here;
anything else (auth providers) is left to the ``kubernetes`` package, which ``client.py``
falls back to.

Each Configuration names its user (``user``, for the message of a refused credential) and
says how its credentials are obtained again after the API server refused them (``renew``:
the exec plugin run again; ``client.py`` reads the configuration again otherwise).

Inline certificate data stays in memory (``*_data`` as bytes): ``tls.context`` builds the
TLS context from it, so no credential is ever written to a file that could outlive the
process.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any, Callable, Dict, List, Optional

from ..errors import ConnectionConfigError
from . import exec_credential

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
_SIMPLE_USER_KEYS = {"client-certificate", "client-certificate-data", "client-key", "client-key-data",
                     "token", "tokenFile", "exec"}


class Unsupported(Exception):
    """This configuration needs the ``kubernetes`` package (an auth provider...)."""

    def __init__(self, message: str, user: str = "") -> None:
        super().__init__(message)
        self.user = user


class Configuration:
    """The connection settings ``client.Client`` reads (a subset of kubernetes' Configuration)."""

    def __init__(self) -> None:
        self.host = "http://localhost"
        self.verify_ssl = True
        self.ssl_ca_cert: Optional[str] = None  # paths, as given
        self.cert_file: Optional[str] = None
        self.key_file: Optional[str] = None
        self.ssl_ca_data: Optional[bytes] = None  # inline data, decoded, never written to disk
        self.cert_data: Optional[bytes] = None
        self.key_data: Optional[bytes] = None
        self.tls_server_name: Optional[str] = None
        # Where the CA came from, for a verification failure's message: the kubeconfig
        # file, its cluster entry and context, or the ca_cert option
        self.ca_source: Optional[str] = None
        self.proxy: Optional[str] = None
        self.warnings: List[str] = []
        self.api_key: Dict[str, str] = {}
        self.api_key_prefix: Dict[str, str] = {}
        self.refresh_api_key_hook: Optional[Callable[[Any], None]] = None
        # Who the credentials are, for messages ("'admin' (context 'c' of the kubeconfig /p)")
        self.user = "given by the connection options"
        # Obtains the credentials again after a 401 and says how ("the exec plugin X was run
        # again"); None: the client reads the whole configuration again (``renewed``: how)
        self.renew: Optional[Callable[[], str]] = None
        self.renewed = "the configuration was read again"
        # Bumped when the client certificate or key changed (an exec plugin's new certificate):
        # the client then makes a new TLS context
        self.tls_version = 0

    def get_api_key_with_prefix(self, identifier: str) -> Optional[str]:
        key = self.api_key.get(identifier)
        if not key:
            return None
        prefix = self.api_key_prefix.get(identifier)
        return f"{prefix} {key}" if prefix else key


def _decode(data: str, what: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ValueError(f"{what} in the kubeconfig is not valid base64") from None


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
    who = f"{ctx.get('user', '')!r} (context {name!r} of the kubeconfig {os.path.abspath(path)})"
    if set(user) - _SIMPLE_USER_KEYS:
        raise Unsupported("needs the kubernetes package", who)
    cfg = Configuration()
    cfg.user = who
    cfg.renewed = f"the kubeconfig {os.path.abspath(path)} was read again"
    cfg.host = cluster.get("server") or cfg.host
    cfg.verify_ssl = not cluster.get("insecure-skip-tls-verify", False)
    cfg.proxy = cluster.get("proxy-url")
    cfg.tls_server_name = cluster.get("tls-server-name")
    entry = f"the kubeconfig {os.path.abspath(path)}, cluster {ctx.get('cluster', '')!r} of context {name!r}"
    if cluster.get("certificate-authority-data"):
        cfg.ssl_ca_data = _decode(cluster["certificate-authority-data"], "certificate-authority-data")
        cfg.ca_source = f"{entry} (its certificate-authority-data)"
    else:
        cfg.ssl_ca_cert = _path(cluster.get("certificate-authority"), base)
        cfg.ca_source = (f"{entry} (certificate-authority {cfg.ssl_ca_cert})" if cfg.ssl_ca_cert
                         else f"the system's trust store ({entry} gives no certificate-authority)")
    if user.get("client-certificate-data"):
        cfg.cert_data = _decode(user["client-certificate-data"], "client-certificate-data")
    else:
        cfg.cert_file = _path(user.get("client-certificate"), base)
    if user.get("client-key-data"):
        cfg.key_data = _decode(user["client-key-data"], "client-key-data")
    else:
        cfg.key_file = _path(user.get("client-key"), base)
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token_file = _path(user["tokenFile"], base) or ""
        with open(token_file, encoding="utf-8") as handle:
            token = handle.read().strip()
        cfg.renewed = f"the token file {token_file} was read again"
    if token:
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
    if isinstance(user.get("exec"), dict):
        use_exec_plugin(cfg, user["exec"], base)
    return cfg


def use_exec_plugin(cfg: Configuration, spec: Dict[str, Any], base: str) -> None:
    """Credentials from an exec plugin: obtained now, kept while fresh (checked before each
    request), obtained again at once by ``renew`` after a 401."""
    held: Dict[str, Optional[exec_credential.Credential]] = {"credential": None}
    command, how = exec_credential.described(spec)
    cluster: Dict[str, Any] = {"server": cfg.host, "insecure-skip-tls-verify": not cfg.verify_ssl}
    if cfg.ssl_ca_data is not None:
        cluster["certificate-authority-data"] = base64.b64encode(cfg.ssl_ca_data).decode()
    if cfg.tls_server_name:
        cluster["tls-server-name"] = cfg.tls_server_name

    def apply(refused: bool = False) -> None:
        try:
            credential = exec_credential.obtain(spec, cfg.host, base,
                                                refused=held["credential"] if refused else None, cluster=cluster)
        except exec_credential.ExecError as exc:
            raise ConnectionConfigError(f"cannot obtain the credentials of user {cfg.user}: {exc}") from None
        if credential is held["credential"]:
            return
        held["credential"] = credential
        if credential.token:
            cfg.api_key = {"authorization": credential.token}
            cfg.api_key_prefix = {"authorization": "Bearer"}
        if credential.cert and credential.key:
            cfg.cert_data, cfg.key_data, cfg.cert_file, cfg.key_file = credential.cert, credential.key, None, None
            cfg.tls_version += 1

    def renew() -> str:
        apply(refused=True)
        return how

    apply()
    cfg.refresh_api_key_hook = lambda _cfg: apply()
    cfg.renew = renew
    cfg.renewed = how


def in_cluster() -> Configuration:
    """The pod's service account, as a controller running in the cluster would use it."""
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    cfg = Configuration()
    cfg.host = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    cfg.ssl_ca_cert = os.path.join(SERVICE_ACCOUNT, "ca.crt")
    cfg.ca_source = f"the pod's service account ({cfg.ssl_ca_cert})"
    cfg.user = f"the pod's service account (token {os.path.join(SERVICE_ACCOUNT, 'token')})"
    cfg.renewed = f"the token {os.path.join(SERVICE_ACCOUNT, 'token')} was read again"
    with open(os.path.join(SERVICE_ACCOUNT, "token"), encoding="utf-8") as handle:
        cfg.api_key = {"authorization": handle.read().strip()}
    cfg.api_key_prefix = {"authorization": "Bearer"}
    return cfg


# -- what the kubernetes package loaded (auth providers) ----------------------------------------
def take_kubernetes_temp_files() -> Dict[str, bytes]:
    """Read into memory, and delete, every file the kubernetes package wrote for inline data.

    That package writes ``*-data`` (and an exec plugin's client certificate and key) to temp
    files that it removes only ``atexit``, which Ansible's workers never run. Returns
    {path: content} of the files taken.
    """
    try:
        from kubernetes.config import kube_config
    except ImportError:  # pragma: no cover - nothing can have been written then
        return {}
    written = getattr(kube_config, "_temp_files", None)
    taken: Dict[str, bytes] = {}
    for key, path in list((written or {}).items()):
        try:
            with open(path, "rb") as handle:
                taken[path] = handle.read()
        except OSError:
            pass
        try:
            os.unlink(path)
        except OSError:
            pass
        del written[key]
    return taken


def _copy_token(source: Any, cfg: Configuration) -> None:
    keys = getattr(source, "api_key", None) or {}
    token = keys.get("BearerToken") or keys.get("authorization")
    if token:
        prefix = (getattr(source, "api_key_prefix", None) or {}).get("authorization")
        cfg.api_key = {"authorization": f"{prefix} {token}" if prefix and "authorization" in keys else token}
        cfg.api_key_prefix = {}


def from_kubernetes(source: Any) -> Configuration:
    """Our Configuration from a kubernetes.client.Configuration the kubernetes package loaded.

    Certificates that package wrote to temp files are read into memory and the files deleted;
    a refresh (an exec plugin's token expired) takes whatever files it writes again.
    """
    taken = take_kubernetes_temp_files()
    cfg = Configuration()
    cfg.host = source.host
    cfg.verify_ssl = bool(source.verify_ssl)
    cfg.proxy = getattr(source, "proxy", None)
    cfg.tls_server_name = getattr(source, "tls_server_name", None)
    for path_attr, data_attr in (("ssl_ca_cert", "ssl_ca_data"), ("cert_file", "cert_data"), ("key_file", "key_data")):
        path = getattr(source, path_attr, None)
        if path and path in taken:
            setattr(cfg, data_attr, taken[path])
        else:
            setattr(cfg, path_attr, path)
    _copy_token(source, cfg)
    hook = getattr(source, "refresh_api_key_hook", None)
    if hook is not None:
        def refresh(_cfg: Any) -> None:
            try:
                hook(source)
            finally:
                take_kubernetes_temp_files()
            _copy_token(source, cfg)

        cfg.refresh_api_key_hook = refresh
    return cfg
