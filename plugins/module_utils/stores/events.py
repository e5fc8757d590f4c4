"""core/v1 events about a NodeMaintenance (or a Node), aggregated like Kubernetes' recorder.

An event is keyed by what it is about, its type, reason and message; recording the same
one again bumps its ``count`` and ``lastTimestamp`` instead of adding a new object, so a
drain retrying every few seconds leaves one ``DrainError`` with a count, not hundreds.
Events of cluster-scoped objects live in ``default``, where Kubernetes puts them too.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional

from ..api import paths
from ..api.client import Client
from ..errors import Conflict, NmoError, NotFound
from ..model.times import now_rfc3339

COMPONENT = "nmo-maintenance"
EVENT_NAMESPACE = "default"

# The events of docs/design.md §7.1: reason -> (type, default message).
BEGIN_MAINTENANCE = "BeginMaintenance"
SUCCEED_MAINTENANCE = "SucceedMaintenance"
FAILED_MAINTENANCE = "FailedMaintenance"
UNCORDON_NODE = "UncordonNode"
REMOVED_MAINTENANCE = "RemovedMaintenance"
DRAIN_ERROR = "DrainError"
BLOCKED = "BlockedByNodeHealthCheck"
LEASE_ACQUIRED = "LeaseAcquired"
LEASE_RELEASED = "LeaseReleased"
CORDON = "Cordon"
DRAIN = "Drain"
ETCD_BLOCKED = "EtcdQuorumNotMaintained"
RESUME_MAINTENANCE = "ResumeMaintenance"
KEPT_AS_FOUND = "KeptAsFound"
LEFTOVER_ENDED = "LeftoverEnded"

REASONS: Dict[str, tuple] = {
    BEGIN_MAINTENANCE: ("Normal", "Begin a node maintenance"),
    SUCCEED_MAINTENANCE: ("Normal", "Node maintenance was succeeded"),
    FAILED_MAINTENANCE: ("Warning", "Failed a node maintenance"),
    UNCORDON_NODE: ("Normal", "Uncordon a node"),
    REMOVED_MAINTENANCE: ("Normal", "Removed a node maintenance"),
    DRAIN_ERROR: ("Warning", "Drain failed"),
    BLOCKED: ("Warning", "Waiting to acquire lease for node maintenance. "
                         "Other maintenance or node health check is in progress."),
    LEASE_ACQUIRED: ("Normal", "Lease acquired for node maintenance"),
    LEASE_RELEASED: ("Normal", "Lease released after node maintenance"),
    CORDON: ("Normal", "Cordon a node"),
    DRAIN: ("Normal", "Drain a node"),
    ETCD_BLOCKED: ("Warning", "etcd quorum is not maintained"),
    RESUME_MAINTENANCE: ("Normal", "Resumed a node maintenance left by a run that is gone"),
    KEPT_AS_FOUND: ("Normal", "Left what the node had before the maintenance began"),
    LEFTOVER_ENDED: ("Warning", "Ended the processes a killed run left on its controller"),
}


# The module option "events" (nmo_crd, nmo_maintenance): events to record, each on the
# NodeMaintenance or on the Node.
def reference(obj: Dict[str, Any]) -> Dict[str, Any]:
    """The involvedObject for an object as read from the API."""
    meta = obj.get("metadata", {})
    ref = {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
           "name": meta.get("name", ""), "uid": meta.get("uid", "")}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    if meta.get("resourceVersion"):
        ref["resourceVersion"] = meta["resourceVersion"]
    return ref


class EventRecorder:
    """Records aggregated events; remembers counts so a repeat costs one PATCH."""

    def __init__(self, client: Client) -> None:
        self.client = client  # in a dry run, events are only remembered in ``recorded``
        self._counts: Dict[str, int] = {}
        self.recorded: list = []
        self.warnings: List[str] = []  # events the API server did not take

    @staticmethod
    def event_name(ref: Dict[str, Any], etype: str, reason: str, message: str) -> str:
        key = "|".join([ref.get("kind", ""), ref.get("name", ""), ref.get("uid", ""), etype, reason, message])
        return f"{ref.get('name', 'object')[:200]}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"

    def record(self, obj: Dict[str, Any], reason: str, message: Optional[str] = None,
               etype: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """Record an event; never raises. An event is the story of a maintenance, not a step
        of it: when the API server refuses it (after the client's retries), the maintenance
        goes on and ``warnings`` says which event is missing."""
        try:
            return self._record(obj, reason, message, etype)
        except NmoError as exc:
            self.warnings.append(f"event {reason} not recorded: {exc.message}")
            return None

    def _record(self, obj: Dict[str, Any], reason: str, message: Optional[str],
                etype: Optional[str], again: bool = False) -> Optional[Dict[str, Any]]:
        default_type, default_message = REASONS.get(reason, ("Normal", reason))
        etype = etype or default_type
        message = message or default_message
        ref = reference(obj)
        ref.pop("resourceVersion", None)
        if not again:
            self.recorded.append({"reason": reason, "type": etype, "message": message})
        if self.client.dry_run:
            return None
        namespace = ref.get("namespace") or EVENT_NAMESPACE
        name = self.event_name(ref, etype, reason, message)
        base = paths.events(namespace)
        stamp = now_rfc3339()
        count = self._counts.get(name)
        if count is None:
            body = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": ref, "reason": reason, "message": message, "type": etype,
                "count": 1, "firstTimestamp": stamp, "lastTimestamp": stamp,
                "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
                "reportingInstance": COMPONENT,
            }
            try:
                created = self.client.post(base, body)
                self._counts[name] = 1
                return created
            except Conflict as exc:
                if exc.attempts > 1:  # our first create was applied, its answer lost: it is ours
                    self._counts[name] = 1
                    return None
                try:
                    count = int(self.client.get(f"{base}/{name}").get("count") or 1)
                except NotFound:
                    return None
        try:
            patched = self.client.patch(f"{base}/{name}", {"count": count + 1, "lastTimestamp": stamp})
            self._counts[name] = count + 1
            return patched
        except NotFound:  # expired or deleted meanwhile: start over, once
            self._counts.pop(name, None)
            return None if again else self._record(obj, reason, message, etype, again=True)
