"""HTTP to services other than the API server: chat webhooks and Alertmanager (docs/design.md §17).

One request with a short timeout, asked again a bounded number of times after a backoff (or
the server's ``Retry-After``, when it asks for no more than ``max_retry_after``) when the
answer is no answer, a 5xx, 408 or 429. The caller gets an ``Answer`` and decides; nothing
here raises for an HTTP status. Every message names the target by scheme and host only:
the path and query of a webhook URL are its secret (Slack's and Teams' URLs carry the token
in them), and never appear in an answer, an error or a log.
"""

from __future__ import annotations

import json
import random
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

RETRIED_STATUS = (408, 429, 500, 502, 503, 504)
USER_AGENT = "nmo.maintenance"


@dataclass
class Answer:
    """What came back: ``status`` 0 when nothing did (``error`` says why)."""

    status: int = 0
    body: Any = None
    error: str = ""
    attempts: int = 0
    seconds: float = 0.0
    headers: Dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass(frozen=True)
class Policy:
    timeout: float = 5.0  # seconds for each attempt (connect and read)
    attempts: int = 3  # at most, the first included
    first_backoff: float = 0.5  # doubled each attempt
    max_retry_after: float = 10.0  # a longer Retry-After is not waited for: the answer is the last one


def safe_target(url: str) -> str:
    """``https://hooks.example.com``: what may be said about a URL whose path is a secret."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or '?'}://{host}{port}"


def retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds of a ``Retry-After`` header (its delta-seconds form); None otherwise."""
    try:
        return max(0.0, float(value)) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _pool(ca_path: Optional[str], validate_certs: bool) -> Any:
    import urllib3  # the client's own dependency (api/client.py)

    kwargs: Dict[str, Any] = {"num_pools": 2, "maxsize": 2, "retries": False}
    if not validate_certs:
        kwargs["cert_reqs"] = "CERT_NONE"
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    elif ca_path:
        kwargs["ca_certs"] = ca_path
        kwargs["cert_reqs"] = "CERT_REQUIRED"
    return urllib3.PoolManager(**kwargs)


def request(method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None,
            policy: Optional[Policy] = None, ca_path: Optional[str] = None, validate_certs: bool = True,
            raw: Optional[bytes] = None, sleep: Callable[[float], None] = time.sleep,
            clock: Callable[[], float] = time.monotonic) -> Answer:
    """Send ``body`` as JSON (or ``raw`` bytes as they are) and return the answer (JSON decoded
    when it is JSON); never raises for the network or a status."""
    import urllib3

    policy = policy or Policy()
    started = clock()
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    sent_headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if data is not None:
        sent_headers["Content-Type"] = "application/json"
    sent_headers.update(headers or {})
    answer = Answer()
    try:
        pool = _pool(ca_path, validate_certs)
    except (OSError, ssl.SSLError, ValueError) as exc:
        answer.error = f"cannot use the TLS settings for {safe_target(url)}: {type(exc).__name__}"
        return answer
    target = safe_target(url)
    for attempt in range(1, max(1, policy.attempts) + 1):
        answer.attempts = attempt
        wait: Optional[float] = None
        try:
            resp = pool.request(method, url, body=data, headers=sent_headers,
                                timeout=urllib3.Timeout(connect=policy.timeout, read=policy.timeout),
                                redirect=False, preload_content=True)
            answer.status = resp.status
            answer.headers = {k.lower(): v for k, v in resp.headers.items()}
            answer.error = "" if answer.ok else f"{target} answered {resp.status}"
            text = resp.data.decode("utf-8", "replace") if resp.data else ""
            try:
                answer.body = json.loads(text) if text else None
            except ValueError:
                answer.body = text[:500]
            if resp.status not in RETRIED_STATUS:
                break
            wait = retry_after(answer.headers.get("retry-after"))
        except (urllib3.exceptions.HTTPError, OSError, socket.timeout, ssl.SSLError) as exc:
            answer.status = 0
            answer.error = f"no answer from {target}: {_cause(exc)}"
        if attempt >= policy.attempts:
            break
        if wait is not None and wait > policy.max_retry_after:
            answer.error += f" (it asks to wait {wait:.0f} s, more than {policy.max_retry_after:.0f} s: not retried)"
            break
        backoff = policy.first_backoff * 2 ** (attempt - 1) * (0.5 + random.random() / 2)
        sleep(max(backoff, wait or 0.0))
    answer.seconds = round(clock() - started, 3)
    return answer


def _cause(exc: BaseException) -> str:
    """The reason of a failed connection, without the URL urllib3 puts in its messages."""
    reason = getattr(exc, "reason", None) or exc
    name = type(reason).__name__
    text = str(reason)
    if "timed out" in text.lower() or "timeout" in name.lower():
        return "timed out"
    if "refused" in text.lower():
        return "connection refused"
    if isinstance(reason, ssl.SSLError) or "ssl" in name.lower() or "certificate" in text.lower():
        return "TLS failed (certificate not verified?)"
    return name
