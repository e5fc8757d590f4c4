"""Connection options -> one configured API client.

kubeconfig.py reads the common connections (kubeconfig with certificates, a token or an
exec plugin, a pod's service account); the ``kubernetes`` package resolves the rest (auth
providers), and importing it costs more than most module tasks spend on requests.
A 401 makes the client obtain its credentials again once and ask again, as client-go
does (a revoked or rotated token); a second 401 says whose credentials were refused.
Requests go straight through one urllib3 pool as JSON dicts: skipping the generated
model classes keeps a 110-pod list cheap to read, lets the drain evict in parallel on
one pool, and gives every caller the same error mapping and a request counter.
"""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar
from urllib.parse import urlencode

from ..errors import ApiError, ConnectionConfigError, CredentialsRefused, NotFound, TlsVerifyError, Unreachable, api_error
from . import kubeconfig, retry, tls

# The options every module takes, with the environment variables kubernetes.core reads.
CONNECTION_ENV = {
    "kubeconfig": "K8S_AUTH_KUBECONFIG",
    "context": "K8S_AUTH_CONTEXT",
    "host": "K8S_AUTH_HOST",
    "api_key": "K8S_AUTH_API_KEY",
    "validate_certs": "K8S_AUTH_VERIFY_SSL",
    "ca_cert": "K8S_AUTH_SSL_CA_CERT",
    "client_cert": "K8S_AUTH_CERT_FILE",
    "client_key": "K8S_AUTH_KEY_FILE",
    "proxy": "K8S_AUTH_PROXY",
}

USER_AGENT = "nmo.maintenance"
T = TypeVar("T")


@dataclass(frozen=True)
class ConnectionOptions:
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    host: Optional[str] = None
    api_key: Optional[str] = None
    validate_certs: Optional[bool] = None
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = None
    proxy: Optional[str] = None

    @classmethod
    def from_params(cls, params: Dict[str, Any]) -> ConnectionOptions:
        return cls(**{f.name: params.get(f.name) for f in fields(cls)})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()


def _with_kubernetes_package(path: Optional[str], context: Optional[str], in_cluster: bool = False,
                             user: str = "") -> Any:
    """What only the kubernetes package can load, as our Configuration, with no temp file left."""
    try:
        from kubernetes import config as kube_config
        from kubernetes.client import Configuration
    except ImportError as exc:  # pragma: no cover - depends on the controller's Python
        raise ConnectionConfigError(
            "this kubeconfig needs the Python package 'kubernetes' on the controller: "
            "pip install -r requirements.txt (" + str(exc) + ")", missing_library="kubernetes") from exc
    cfg = Configuration()
    try:
        if in_cluster:
            kube_config.load_incluster_config(client_configuration=cfg)
        else:
            kube_config.load_kube_config(config_file=path, context=context, client_configuration=cfg,
                                         persist_config=False)
        loaded = kubeconfig.from_kubernetes(cfg)
        loaded.user = user or loaded.user
        loaded.renewed = f"the kubeconfig {path} was loaded again (its auth provider refreshed)"
        if not in_cluster:
            loaded.ca_source = f"the kubeconfig {path}" + (f", context {context!r}" if context else "")
        return loaded
    finally:
        kubeconfig.take_kubernetes_temp_files()  # also when loading failed half-way


def _load_configuration(options: ConnectionOptions) -> Any:
    explicit_host = options.host and not options.kubeconfig and not options.context
    cfg: Any = None
    try:
        if not explicit_host:
            default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
            path = os.path.expanduser(options.kubeconfig) if options.kubeconfig else default
            if options.kubeconfig or options.context or os.path.exists(default):
                try:
                    cfg = kubeconfig.from_kubeconfig(path, options.context)
                except kubeconfig.Unsupported as unsupported:  # auth providers: the kubernetes package
                    cfg = _with_kubernetes_package(path, options.context, user=unsupported.user)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                cfg = kubeconfig.in_cluster()
            elif not options.host:
                raise ConnectionConfigError(
                    "no cluster configuration: give kubeconfig (or K8S_AUTH_KUBECONFIG / KUBECONFIG), "
                    "or host with credentials, or run inside a pod")
    except ConnectionConfigError:
        raise
    except Exception as exc:  # a missing file, bad YAML, an unknown context...
        raise ConnectionConfigError(f"cannot load the cluster configuration: {exc}") from exc
    if cfg is None:
        cfg = kubeconfig.Configuration()

    if options.host:
        cfg.host = options.host
    if options.api_key:
        cfg.api_key = {"authorization": options.api_key}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        cfg.refresh_api_key_hook, cfg.renew = None, None
        cfg.user, cfg.renewed = "given by api_key", ""  # a fixed token: nothing to obtain again
    if options.ca_cert:
        cfg.ssl_ca_cert, cfg.ssl_ca_data = options.ca_cert, None
        cfg.ca_source = f"ca_cert {options.ca_cert}"
    if options.client_cert:
        cfg.cert_file, cfg.cert_data = options.client_cert, None
    if options.client_key:
        cfg.key_file, cfg.key_data = options.client_key, None
    if options.api_key and (cfg.cert_file or cfg.cert_data):
        # kubernetes.core sends both too; the API server then authenticates the certificate
        # and never looks at the token, so the operator must hear which identity is used.
        source = "client_cert" if options.client_cert else "the kubeconfig's client certificate"
        cfg.warnings.append(
            f"api_key is sent together with {source}: the API server authenticates the client certificate "
            "first, so requests are made as the certificate's user and the token is not used. To act as the "
            "token's user, give host and api_key without a kubeconfig, or a kubeconfig without a client "
            "certificate")
    if options.validate_certs is not None:
        cfg.verify_ssl = bool(options.validate_certs)
    if options.proxy:
        cfg.proxy = options.proxy
    for path in (cfg.ssl_ca_cert, cfg.cert_file, cfg.key_file):
        if path and not os.path.exists(path):
            raise ConnectionConfigError(f"file not found: {path} (check ca_cert, client_cert and client_key)")
    return cfg


class Client:
    """A configured connection to one API server; thread-safe, counts its requests."""

    def __init__(self, configuration: Any, pool_size: int = 16, reload: Optional[Callable[[], Any]] = None) -> None:
        self.configuration = configuration
        self.host = configuration.host.rstrip("/")
        self.requests = 0
        # Ansible's check mode, set by the adapter on each call: the stores and workflows read it here
        # instead of taking a flag through every call. Nothing is sent differently because of it:
        # each writer decides what a dry run skips (most skip the write and return the plan).
        self.dry_run = False
        self.requests_by: Dict[str, int] = {}  # request_kind -> count: where the requests went
        self.warnings: List[str] = list(getattr(configuration, "warnings", None) or [])
        self._lock = threading.Lock()
        self.retry = retry.RetryPolicy()
        self.outages = retry.Outages()  # when the server was last unreachable (see retry.transient)
        self._deadline: Optional[float] = None  # monotonic; set by time_budget
        # (the API server's Date, our monotonic clock when it arrived): lease times are the
        # cluster's, never this controller's, which may be seconds off
        self._server_clock: Optional[Tuple[datetime, float]] = None
        # After a 401 the credentials are obtained again once (``renew_credentials``): by the
        # configuration's own ``renew`` (an exec plugin run again) or by ``reload`` (the
        # kubeconfig, a token file, the service account token read again)
        self._reload = reload
        self._renew_lock = threading.Lock()
        self.credentials_version = 0
        self.renewals: List[str] = []  # how the credentials were obtained again, each time
        self._pool_size = pool_size
        self._tls_version = getattr(configuration, "tls_version", 0)
        self.pool = self._make_pool()

    def _make_pool(self) -> Any:
        import urllib3

        configuration = self.configuration
        kwargs: Dict[str, Any] = {"maxsize": self._pool_size, "num_pools": 4}
        if self.host.startswith("https"):
            # The TLS context is built in memory (tls.py): inline certificates and keys are
            # never written to a file that could outlive this process.
            verify = configuration.verify_ssl
            try:
                kwargs["ssl_context"] = tls.context(configuration)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise ConnectionConfigError(
                    "cannot use the TLS settings (ca_cert, client_cert, client_key or the kubeconfig's "
                    f"certificate data): {exc}") from None
            kwargs["cert_reqs"] = "CERT_REQUIRED" if verify else "CERT_NONE"
            if getattr(configuration, "tls_server_name", None):
                kwargs["server_hostname"] = configuration.tls_server_name
            if not verify:
                urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        if configuration.proxy:
            return urllib3.ProxyManager(configuration.proxy, **kwargs)
        return urllib3.PoolManager(**kwargs)

    # -- credentials ----------------------------------------------------------------------
    def renew_credentials(self, seen: int) -> Optional[str]:
        """Obtain the credentials again after a 401 to a request sent with version ``seen`` of
        them; how they were obtained, or None when they cannot be (a fixed api_key). Threads
        that met the same 401 renew once: the later ones find a newer version and ask again."""
        with self._renew_lock:
            if self.credentials_version != seen:
                return "they were obtained again"
            cfg = self.configuration
            if getattr(cfg, "renew", None) is not None:
                how = cfg.renew()
            elif self._reload is not None and getattr(cfg, "renewed", ""):
                fresh = self._reload()
                tls = ("cert_file", "cert_data", "key_file", "key_data")
                if any(getattr(cfg, attr, None) != getattr(fresh, attr, None) for attr in tls):
                    cfg.tls_version = getattr(cfg, "tls_version", 0) + 1  # a rotated client certificate
                for attr in ("api_key", "api_key_prefix", "refresh_api_key_hook", "renew", *tls):
                    setattr(cfg, attr, getattr(fresh, attr, None))
                how = cfg.renewed
            else:
                return None
            self.credentials_version += 1
            self.renewals.append(how)
        self._check_tls()
        return how

    def _check_tls(self) -> None:
        """A new client certificate (an exec plugin's): a new TLS context and pool."""
        version = getattr(self.configuration, "tls_version", 0)
        if version != self._tls_version:
            with self._renew_lock:
                if version != self._tls_version:
                    self.pool = self._make_pool()
                    self._tls_version = version

    def _authenticated(self, send: Callable[[], T]) -> T:
        """``send()``; after a 401 the credentials are obtained again once and it is sent
        again; a second 401 (or none to obtain) is CredentialsRefused, naming the user."""
        seen = self.credentials_version
        try:
            return send()
        except ApiError as error:
            if error.status != 401 or isinstance(error, CredentialsRefused):
                raise
            how = self.renew_credentials(seen)
            if how is None:
                raise CredentialsRefused(error, getattr(self.configuration, "user", "?"), "") from None
        try:
            return send()
        except ApiError as error:
            if error.status == 401 and not isinstance(error, CredentialsRefused):
                raise CredentialsRefused(error, getattr(self.configuration, "user", "?"), how) from None
            raise

    # -- plumbing -------------------------------------------------------------------------
    def _headers(self, content_type: Optional[str]) -> Dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type:
            headers["Content-Type"] = content_type
        cfg = self.configuration
        if getattr(cfg, "refresh_api_key_hook", None):
            cfg.refresh_api_key_hook(cfg)
            self._check_tls()
        token = cfg.get_api_key_with_prefix("authorization")
        if token:
            headers["Authorization"] = token
        return headers

    def url(self, path: str, query: Optional[Dict[str, Any]] = None) -> str:
        q = {k: v for k, v in (query or {}).items() if v is not None}
        return self.host + path + ("?" + urlencode(q) if q else "")

    def _count(self, method: str = "GET", path: str = "", query: Optional[Dict[str, Any]] = None) -> None:
        kind = request_kind(method, path, query)
        with self._lock:
            self.requests += 1
            self.requests_by[kind] = self.requests_by.get(kind, 0) + 1

    def requests_since(self, mark: Dict[str, int]) -> Dict[str, int]:
        """``requests_by`` less a copy of it taken earlier: what one task asked."""
        with self._lock:
            now = dict(self.requests_by)
        return {k: v - mark.get(k, 0) for k, v in sorted(now.items()) if v - mark.get(k, 0)}

    def _note_date(self, resp: Any) -> None:
        date = resp.headers.get("Date") if getattr(resp, "headers", None) is not None else None
        if not date:
            return
        try:
            moment = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            return
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        self._server_clock = (moment, time.monotonic())

    def server_now(self) -> datetime:
        """The API server's time now, from the Date of its last answer (whole seconds, so it
        errs up to a second early), moved on by our monotonic clock; reads /version first
        when nothing was asked yet."""
        if self._server_clock is None:
            try:
                self.get("/version")
            except ApiError:
                pass
        if self._server_clock is None:  # a server (or proxy) that sends no Date
            return datetime.now(timezone.utc)
        moment, at = self._server_clock
        return moment + timedelta(seconds=time.monotonic() - at)

    def request(self, method: str, path: str, query: Optional[Dict[str, Any]] = None,
                body: Any = None, content_type: Optional[str] = None,
                timeout: float = 30.0, budget: Optional[float] = None) -> Dict[str, Any]:
        """One request, asked again while it fails transiently (see retry.py) for at most
        ``budget`` seconds (default ``self.retry.budget``) and never past ``time_budget``;
        returns the decoded JSON body, raises ApiError on a final non-2xx status."""
        policy = self.retry if budget is None else replace(self.retry, budget=budget)
        return self._authenticated(lambda: retry.call(
            lambda: self._send(method, path, query, body, content_type, timeout), policy, self._deadline,
            outages=self.outages))

    @contextmanager
    def time_budget(self, seconds: float) -> Iterator[None]:
        """Inside, no request retries past ``seconds`` from now: a task's own timeout
        bounds the retries of every request it makes, in every thread."""
        previous = self._deadline
        end = time.monotonic() + seconds
        self._deadline = end if previous is None else min(previous, end)
        try:
            yield
        finally:
            self._deadline = previous

    def _send(self, method: str, path: str, query: Optional[Dict[str, Any]], body: Any,
              content_type: Optional[str], timeout: float) -> Dict[str, Any]:
        """One attempt of a request."""
        import urllib3

        data = None
        if body is not None:
            data = json.dumps(body).encode()
            content_type = content_type or "application/json"
        self._count(method, path, query)
        try:
            resp = self.pool.request(method, self.url(path, query), body=data,
                                     headers=self._headers(content_type),
                                     timeout=urllib3.Timeout(connect=10, read=timeout), retries=False)
        except urllib3.exceptions.HTTPError as exc:
            raise connection_error(exc, self.host, self.configuration, method, path) from exc
        self._note_date(resp)
        payload = resp.data
        try:
            decoded = json.loads(payload) if payload else {}
        except ValueError:
            decoded = {"message": payload.decode(errors="replace")[:500]}
        if resp.status >= 300:
            error = api_error(resp.status, decoded.get("reason") or resp.reason or "",
                              decoded.get("message", ""), method, path, decoded)
            error.retry_after = retry_after(resp.headers.get("Retry-After"))
            raise error
        return decoded

    def get(self, path: str, query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("GET", path, query)

    def get_or_none(self, path: str, query: Optional[Dict[str, Any]] = None) -> Optional[Dict[str, Any]]:
        try:
            return self.get(path, query)
        except NotFound:
            return None

    def post(self, path: str, body: Any, query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("POST", path, query, body)

    def put(self, path: str, body: Any, query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("PUT", path, query, body)

    def patch(self, path: str, body: Any, patch_type: str = "merge",
              query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        content_type = {
            "json": "application/json-patch+json",
            "merge": "application/merge-patch+json",
            "strategic": "application/strategic-merge-patch+json",
        }[patch_type]
        return self.request("PATCH", path, query, body, content_type)

    def delete(self, path: str, body: Any = None, query: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        return self.request("DELETE", path, query, body)

    def stream(self, path: str, query: Dict[str, Any], read_timeout: float) -> Any:
        """Open a streaming GET (a watch); the caller reads lines and closes it."""
        return self._authenticated(lambda: self._open_stream(path, query, read_timeout))

    def _open_stream(self, path: str, query: Dict[str, Any], read_timeout: float) -> Any:
        import urllib3

        self._count("GET", path, query)
        try:
            resp = self.pool.request("GET", self.url(path, query), headers=self._headers(None),
                                     preload_content=False, retries=False,
                                     timeout=urllib3.Timeout(connect=10, read=read_timeout))
        except urllib3.exceptions.HTTPError as exc:
            raise connection_error(exc, self.host, self.configuration, "GET", path) from exc
        if resp.status >= 300:
            payload = resp.read()
            resp.release_conn()
            try:
                decoded = json.loads(payload)
            except ValueError:
                decoded = {}
            error = api_error(resp.status, decoded.get("reason", ""), decoded.get("message", ""), "GET", path, decoded)
            error.retry_after = retry_after(resp.headers.get("Retry-After"))
            raise error
        return resp


def ca_source(configuration: Any) -> str:
    """Where the CA the server is verified against came from, for a message."""
    source = getattr(configuration, "ca_source", None)
    if source:
        return source
    if getattr(configuration, "ssl_ca_cert", None):
        return f"the file {configuration.ssl_ca_cert}"
    if getattr(configuration, "ssl_ca_data", None) is not None:
        return "inline certificate-authority-data"
    return "the system's trust store (no CA was given)"


def _unreachable_cause(error: BaseException) -> str:
    """"connection refused", "timed out"... for a failure that got no answer at all."""
    import urllib3

    found = list(tls.causes(error))
    for exc in found:
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, ConnectionResetError):
            return "connection reset by the server"
    for exc in found:
        if isinstance(exc, (urllib3.exceptions.ConnectTimeoutError, TimeoutError)) \
                and not isinstance(exc, urllib3.exceptions.NewConnectionError):
            return "timed out while connecting"
        if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
            return "no answer in time (read timed out)"
        if isinstance(exc, getattr(urllib3.exceptions, "NameResolutionError", ())):  # urllib3 2 and later
            return "the host name does not resolve"
        if isinstance(exc, urllib3.exceptions.ProtocolError):
            return f"the connection broke ({exc})"
    return str(error)


def connection_error(error: BaseException, url: str, configuration: Any, method: str = "",
                     path: str = "") -> ApiError:
    """The ApiError for a request that got no HTTP answer: a certificate verification
    failure (final, TlsVerifyError: the reason, the CA's source, a hint) or no connection
    (Unreachable, asked again by retry.py)."""
    reason = tls.verify_reason(error)
    if reason is not None:
        return TlsVerifyError(url, reason, ca_source(configuration), tls.verify_hint(reason), method, path)
    return Unreachable(url, _unreachable_cause(error), method, path)


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_kind(method: str, path: str, query: Optional[Dict[str, Any]] = None) -> str:
    """``verb resource[/subresource]`` as the API server's audit log names a request:
    ``list pods``, ``get leases``, ``create pods/eviction``, ``patch nodemaintenances/status``."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    else:
        return f"{_VERBS.get(method, method.lower())} {path or '?'}" if method != "GET" else f"get {path or '?'}"
    if len(parts) > 2 and parts[0] == "namespaces":
        parts = parts[2:]
    if not parts:
        return f"{'get' if method == 'GET' else _VERBS.get(method, method.lower())} discovery"
    resource = parts[0] + (f"/{parts[2]}" if len(parts) > 2 else "")
    if method == "GET":
        verb = "watch" if (query or {}).get("watch") else "get" if len(parts) > 1 else "list"
    else:
        verb = _VERBS.get(method, method.lower())
    return f"{verb} {resource}"


def retry_after(value: Optional[str]) -> Optional[float]:
    """Retry-After in seconds (the API server sends whole seconds; an HTTP date is ignored)."""
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def iter_lines(resp: Any) -> Iterator[bytes]:
    """Lines of a streaming response (a watch sends one JSON event a line)."""
    buffer = b""
    for chunk in resp.stream(65536, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


_clients: Dict[Tuple[str, int], Client] = {}


def connect(options: ConnectionOptions, pool_size: int = 16) -> Client:
    """The client for these options (one per process and configuration)."""
    key = (options.digest(), pool_size)
    if key not in _clients:
        _clients[key] = Client(_load_configuration(options), pool_size=pool_size,
                               reload=lambda: _load_configuration(options))
    return _clients[key]


def forget_clients() -> None:
    """Drop every pooled client: a forked process must never share its parent's connections."""
    _clients.clear()
