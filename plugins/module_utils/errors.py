"""Errors of the collection, written for the operator who reads them.

Every error carries a message that says what happened and, where it can, what to do.
Modules turn them into ``fail_json`` results; the role shows them as they are.
"""

from __future__ import annotations

from typing import Any, Optional


class NmoError(Exception):
    """Base of every error this collection raises on purpose."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return self.message


class InputError(NmoError):
    """Bad input: nothing was written. The message says what to change."""


class ConnectionConfigError(NmoError):
    """The connection options do not lead to a usable cluster configuration."""


class ApiError(NmoError):
    """The API server refused a request; carries its status, reason and message."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = "",
                 body: Optional[dict] = None) -> None:
        text = message or reason or "no message"
        where = f" ({method} {path})" if method else ""
        super().__init__(f"API server answered {status} {reason}{where}: {text}",
                         status=status, reason=reason, server_message=message)
        self.status = status
        self.reason = reason
        self.server_message = message
        self.body = body or {}
        self.retry_after: Optional[float] = None  # the server's Retry-After header, seconds
        self.attempts = 1  # how many times the request was sent (retry.call sets it)
        self.method = method
        self.path = path


class Unreachable(ApiError):
    """No answer at all: the connection was refused, reset or timed out (status 0).
    Transient: an API server that restarts refuses connections for a few seconds."""

    def __init__(self, url: str, cause: str, method: str = "", path: str = "") -> None:
        super().__init__(0, "ConnectionError", f"could not connect to {url}: {cause}", method, path)
        where = f" ({method} {path})" if method else ""
        self.message = f"could not connect to {url}: {cause}{where}"
        self.cause = cause


class TlsVerifyError(ApiError):
    """The server's certificate did not verify against the CA we were given (status 0).

    Final: asking again meets the same certificate. The message names the verifier's
    reason, where the CA came from, and what to check."""

    def __init__(self, url: str, reason: str, ca_source: str, hint: str = "", method: str = "",
                 path: str = "") -> None:
        super().__init__(0, "CertificateVerifyFailed", reason, method, path)
        text = f"TLS verification of {url} failed: certificate verify failed: {reason}; CA from {ca_source}"
        self.message = text + (f". {hint}" if hint else "")
        self.verify_reason = reason
        self.ca_source = ca_source


class CredentialsRefused(ApiError):
    """401 from the API server after the client obtained its credentials again (or could
    not): the message names the user whose credentials were refused and how they were
    obtained again. Final: asking again sends the same credentials."""

    def __init__(self, refused: ApiError, user: str, renewed: str) -> None:
        super().__init__(refused.status, refused.reason, refused.server_message, body=refused.body)
        again = f", also after {renewed}" if renewed else ""
        where = f" ({refused.method} {refused.path})" if refused.method else ""
        self.message = (f"the credentials of user {user} were refused (401 {refused.reason or 'Unauthorized'}"
                        f"{again}){where}: give credentials the API server accepts (a valid token, "
                        "client certificate or exec plugin in the kubeconfig)")
        self.user = user


class NotFound(ApiError):
    """404 from the API server."""


class Conflict(ApiError):
    """409 from the API server: the object changed since it was read."""


class TooManyRequests(ApiError):
    """429 from the API server: throttling (API Priority and Fairness, max in-flight), or
    storage still initialising after a start. Transient: asked again after a while."""


class DisruptionBudgetRefusal(TooManyRequests):
    """429 to an eviction because a PodDisruptionBudget says no: the pod stays, for now."""


class EvacuationStarted(TooManyRequests):
    """429 to an eviction whose owner moves the pod itself: KubeVirt's eviction webhook for a VM
    with ``evictionStrategy: LiveMigrate`` (it starts a live migration), or an owner that speaks
    the descheduler's ``descheduler.alpha.kubernetes.io/request-evict-only`` protocol. The pod is
    being evacuated, not kept by a budget: it goes when its owner is done."""


class UnprocessableEntity(ApiError):
    """422 from the API server: for JSON Patch, a failed ``test`` operation."""


class RefusedError(NmoError):
    """A maintenance was refused before anything was written (missing node, duplicate...)."""


class ConcurrentUpdateError(NmoError):
    """Someone kept changing an object between our read and our write; we gave up."""


class BlockedError(NmoError):
    """Maintenance of a node may not proceed now (lease held, etcd quorum, slot taken)."""

    def __init__(self, message: str, holders: Optional[list] = None, **details: Any) -> None:
        super().__init__(message, holders=holders or [], **details)
        self.holders = holders or []


class WaitTimeout(NmoError):
    """A wait ran out of time; the message names what was still awaited."""


PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget"


# The text both KubeVirt's eviction webhook (``Eviction triggered evacuation of VMI "ns/vm"``,
# ``Evacuation in progress: ...`` when asked again) and the descheduler's request-evict-only
# protocol use to say the eviction started an evacuation by the pod's owner.
EVACUATION_TEXT = "Eviction triggered evacuation"


def evacuation_started(status: int, message: str) -> bool:
    """Whether an eviction's 429 says its owner evacuates the pod itself (EvacuationStarted)."""
    return status == 429 and EVACUATION_TEXT in (message or "")


def refused_by_budget(status: int, message: str, body: Optional[dict]) -> bool:
    """Whether an answer is a PodDisruptionBudget refusing an eviction, told from the API
    server's own throttling (also a 429): the eviction API names the budget in a cause of
    reason ``DisruptionBudget``; servers that give no causes say it in the message."""
    if status != 429:
        return False
    causes = ((body or {}).get("details") or {}).get("causes") or []
    return (any(isinstance(c, dict) and c.get("reason") == "DisruptionBudget" for c in causes)
            or PDB_REFUSAL in (message or ""))


def api_error(status: int, reason: str, message: str, method: str = "", path: str = "",
              body: Optional[dict] = None) -> ApiError:
    """The ApiError subclass that matches an HTTP status (and, for a 429, who refused)."""
    if evacuation_started(status, message):
        return EvacuationStarted(status, reason, message, method, path, body)
    if refused_by_budget(status, message, body):
        return DisruptionBudgetRefusal(status, reason, message, method, path, body)
    cls = {404: NotFound, 409: Conflict, 422: UnprocessableEntity, 429: TooManyRequests}.get(status, ApiError)
    return cls(status, reason, message, method, path, body)
