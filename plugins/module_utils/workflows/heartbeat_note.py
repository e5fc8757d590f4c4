"""What the run's heartbeat could not do, told to the run's modules on the same controller.

The heartbeat is a detached process with no console. When it cannot renew the run's leases
(its credentials refused, access forbidden, the API server out of reach) it writes why in a
small local file, one a run, in the controller's temp folder; it removes the file when a
beat works again and when it exits. The modules of the run read it when they look at their
run (``run.Guard``): a warning on the console while the run goes on, and the cause in the
message when the run lease lapsed because of it. Nothing secret is written: the cause is an
error message, which never holds a credential.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Optional, Tuple

from ..errors import ApiError, NmoError


def path(run_id: str) -> str:
    return os.path.join(tempfile.gettempdir(), f"nmo-maintenance-heartbeat-{run_id}.json")


def cause(error: BaseException) -> str:
    """Why a beat failed, its kind first: 401, 403, no connection, or the error as it is."""
    text = str(error)
    if isinstance(error, ApiError):
        if error.status == 401:
            return f"its credentials were refused (401): {text}"
        if error.status == 403:
            return f"it is forbidden (403): {text}"
        if error.status == 0:
            return f"the API server cannot be reached: {text}"
        return f"the API server answered {error.status}: {text}"
    if isinstance(error, NmoError):
        return text
    return f"{type(error).__name__}: {text}"


def write(run_id: str, since: float, why: str) -> None:
    """Say (atomically) that the heartbeat cannot renew since ``since`` (epoch seconds), and why."""
    target = path(run_id)
    try:
        handle, temp = tempfile.mkstemp(prefix=".nmo-heartbeat-", dir=os.path.dirname(target))
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"since": since, "cause": why}, out)
        os.replace(temp, target)
    except OSError:
        pass  # a full or read-only temp folder: the lease's own lapse still stops the run


def clear(run_id: str) -> None:
    try:
        os.unlink(path(run_id))
    except OSError:
        pass


def read(run_id: str) -> Optional[Tuple[float, str]]:
    """(since, cause) when the heartbeat of ``run_id`` says it cannot renew, else None."""
    if not run_id:
        return None
    try:
        with open(path(run_id), encoding="utf-8") as handle:
            doc = json.load(handle)
        return float(doc["since"]), str(doc["cause"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def sentence(note: Tuple[float, str], now: float) -> str:
    since, why = note
    return f"the run's heartbeat cannot renew the run's leases since {max(now - since, 0):.0f} s ago: {why}"
