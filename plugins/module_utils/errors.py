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


class NotFound(ApiError):
    """404 from the API server."""


class Conflict(ApiError):
    """409 from the API server: the object changed since it was read."""


class TooManyRequests(ApiError):
    """429 from the API server, for evictions: a PodDisruptionBudget says no."""


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


def api_error(status: int, reason: str, message: str, method: str = "", path: str = "",
              body: Optional[dict] = None) -> ApiError:
    """The ApiError subclass that matches an HTTP status."""
    cls = {404: NotFound, 409: Conflict, 422: UnprocessableEntity, 429: TooManyRequests}.get(status, ApiError)
    return cls(status, reason, message, method, path, body)
