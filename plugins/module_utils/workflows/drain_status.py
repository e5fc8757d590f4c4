"""What a drain tells on its NodeMaintenance while it runs: the status fields (docs/design.md
§4.7.6), written when they changed and at most once a second, and the ``Drain`` and
``DrainError`` events, each said once per pod and message. Neither ever stops the drain: a
write the API server refuses is a warning, and a NodeMaintenance deleted meanwhile is no
longer written to."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from ..api.client import Client
from ..errors import ApiError, NotFound
from ..model.tracking import EventThrottle, Throttle
from ..stores import maintenance
from ..stores.events import EventRecorder

STATUS_INTERVAL = 1.0  # at most one status write a second
EVENT_MESSAGE_LIMIT = 1000
# DrainEvents.record, as the drain's collaborators call it: reason, message, key, event type
Record = Callable[..., None]


class StatusKeeper:
    """Writes the drain's status fields when they changed, at most once a second."""

    def __init__(self, client: Client, nm: Optional[Dict[str, Any]], warnings: List[str]) -> None:
        self.client = client
        self.nm = nm
        self.warnings = warnings
        self.throttle = Throttle(STATUS_INTERVAL)
        self.writes = 0

    def offer(self, wanted: Dict[str, Any], now: float, force: bool = False) -> None:
        if self.nm is None or not self.throttle.due(wanted, now, force):
            return
        try:
            self.nm, changed = maintenance.update_status(self.client, self.nm, wanted)
        except NotFound:
            self.warnings.append(f"NodeMaintenance {self.nm['metadata']['name']} was deleted during the drain; "
                                 "its status is no longer written")
            self.nm = None
            return
        except ApiError as exc:  # a status write must not stop the drain; the next offer retries
            self.warnings.append(f"cannot write the NodeMaintenance status: {exc.message}")
            return
        self.throttle.mark(wanted, now)
        self.writes += int(changed)


class DrainEvents:
    """The drain's events, on its NodeMaintenance as the status keeper last saw it (none once
    it is gone), each (pod, message) once in a while rather than at every look."""

    def __init__(self, client: Client, status: StatusKeeper) -> None:
        self.status = status
        self.recorder = EventRecorder(client)
        self.throttle = EventThrottle()

    def record(self, reason: str, message: str, key: str = "", etype: Optional[str] = None) -> None:
        nm = self.status.nm
        if nm is None or not self.throttle.due(key, message, time.monotonic()):
            return
        self.recorder.record(nm, reason, message[:EVENT_MESSAGE_LIMIT], etype)

    @property
    def warnings(self) -> List[str]:
        return self.recorder.warnings
