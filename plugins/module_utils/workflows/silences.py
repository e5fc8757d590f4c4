"""A node's Alertmanager silence for as long as it is in maintenance (docs/design.md §17.2).

Created (or, when the NodeMaintenance already names one that is still active, extended: a
resumed run) at the node's begin with ``endsAt`` ``duration`` seconds ahead, its id recorded
on the NodeMaintenance (annotation ``nmo.maintenance/silence``); extended by the run's
heartbeat once half of it is gone (``Extender``); expired at the node's end. A run that dies
stops extending it, and the silence lapses by itself within ``duration``.

Alertmanager is never a reason to fail a maintenance: whatever it answers, or when it does
not answer, the result carries a warning and the node goes on.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Dict, List, Optional

from ..api import webhook
from ..api.alertmanager import Alertmanager, AlertmanagerError
from ..api.client import Client
from ..errors import InputError, NmoError
from ..model import silences
from ..model.times import format_time, utcnow
from ..stores import maintenance
from . import run


def check(am: Dict[str, Any]) -> None:
    """Bad input refused before anything is written."""
    if not am or not am.get("url"):
        raise InputError("node_maintenance_alertmanager.url is required (http://alertmanager.example:9093)")
    if not str(am["url"]).startswith(("http://", "https://")):
        raise InputError("node_maintenance_alertmanager.url must be an http:// or https:// URL")
    silences.validate(list(am.get("matchers") or silences.DEFAULT_MATCHERS))
    silences.duration_of(am.get("duration"))


def recorded_id(nm: Optional[Dict[str, Any]]) -> str:
    return (((nm or {}).get("metadata") or {}).get("annotations") or {}).get(silences.ID_ANNOTATION) or ""


def record(client: Client, nm: Dict[str, Any], silence_id: str) -> None:
    """The id on the NodeMaintenance, so a resumed run (and the heartbeat) find it."""
    body = {"metadata": {"annotations": {silences.ID_ANNOTATION: silence_id}}}
    client.patch(maintenance.path(nm["metadata"]["name"]), body, "merge")


def ensure(client: Client, am_params: Dict[str, Any], node: str, run_id: str,
           now: Optional[datetime] = None, am: Optional[Alertmanager] = None) -> Dict[str, Any]:
    check(am_params)
    am = am or Alertmanager.from_params(am_params)
    templates = list(am_params.get("matchers") or silences.DEFAULT_MATCHERS)
    duration = silences.duration_of(am_params.get("duration"))
    nm = maintenance.locate(client, node)
    if nm is None and client.dry_run:  # a dry run's begin made none: this one would be made with it
        return {"changed": True, "silence_id": "", "previous": "", "action": "created", "maintenance": "",
                "matchers": silences.matchers(templates, node), "warnings": []}
    if nm is None:
        raise InputError(f"node {node} has no NodeMaintenance: a silence is made at the node's begin, after it")
    name = nm["metadata"]["name"]
    known = recorded_id(nm)
    moment = now or utcnow()
    result: Dict[str, Any] = {"changed": False, "silence_id": known, "previous": known, "maintenance": name,
                              "matchers": silences.matchers(templates, node), "warnings": []}
    try:
        current = am.get_silence(known) if known else None
        if silences.active(current):
            body = silences.extension(current or {}, moment, duration)
            result["action"] = "extended"
        else:
            body = silences.body(templates, node, run_id, name, moment, duration)
            result["action"] = "created"
            result["changed"] = True
        result["ends_at"] = body["endsAt"]
        if client.dry_run:
            return result
        new_id = am.post_silence(body)
    except AlertmanagerError as exc:
        result.update(action="none", changed=False)
        result["warnings"].append(f"{exc.message}; node {node} goes on without a silence")
        return result
    result["silence_id"] = new_id
    if new_id != known:
        record(client, nm, new_id)
        result["changed"] = True
    return result


def expire(client: Client, am_params: Dict[str, Any], silence_id: str, node: str = "",
           am: Optional[Alertmanager] = None) -> Dict[str, Any]:
    check(am_params)
    am = am or Alertmanager.from_params(am_params)
    if not silence_id and node:  # the NodeMaintenance is still there (a failure kept it, say)
        silence_id = recorded_id(maintenance.locate(client, node))
    result: Dict[str, Any] = {"changed": False, "silence_id": silence_id, "action": "none", "warnings": []}
    if not silence_id:
        return result
    try:
        current = am.get_silence(silence_id)
        if not silences.active(current):
            return result
        result.update(changed=True, action="expired")
        if not client.dry_run:
            am.expire_silence(silence_id)
    except AlertmanagerError as exc:
        result.update(changed=False, action="none")
        result["warnings"].append(f"{exc.message}; it lapses by itself at its endsAt")
    return result


class Extender:
    """The heartbeat's part: every beat, the run's NodeMaintenances that name a silence get it
    extended once half of it is gone. The end of each silence is kept here after one read, so
    a quiet beat costs the NodeMaintenance list and nothing of Alertmanager."""

    def __init__(self, am_params: Dict[str, Any], clock: Callable[[], datetime] = utcnow,
                 am: Optional[Alertmanager] = None) -> None:
        # one short attempt a request: the beat must go back to the leases soon (heartbeat.py)
        self.am = am or Alertmanager.from_params(am_params, webhook.Policy(
            timeout=min(float(am_params.get("timeout") or 5.0), 3.0), attempts=1))
        self.duration = silences.duration_of(am_params.get("duration"))
        self.clock = clock
        self.ends: Dict[str, Optional[datetime]] = {}  # silence id -> its endsAt as last seen
        self.extended: List[str] = []  # ids extended, for the tests

    def beat(self, client: Client, run_id: str, items: List[Dict[str, Any]]) -> int:
        done = 0
        for nm in items:
            if run.run_of(nm) != run_id or maintenance.terminating(nm):
                continue
            silence_id = recorded_id(nm)
            if not silence_id:
                continue
            try:
                done += self._one(client, nm, silence_id)
            except AlertmanagerError:
                break  # Alertmanager away: the others would wait for it too; the next beat tries again
            except NmoError:
                continue  # the API server away (the annotation): the next beat tries again
        return done

    def _one(self, client: Client, nm: Dict[str, Any], silence_id: str) -> int:
        now = self.clock()
        if silence_id not in self.ends:
            current = self.am.get_silence(silence_id)
            if not silences.active(current):
                self.ends[silence_id] = None  # expired or unknown: the node's end (or a person) did it
                return 0
            self.ends[silence_id] = silences.ends_at(current or {})
        ends = self.ends[silence_id]
        if ends is None or not silences.due(ends, now, self.duration):
            return 0
        current = self.am.get_silence(silence_id)
        if not silences.active(current):
            self.ends[silence_id] = None
            return 0
        body = silences.extension(current or {}, now, self.duration)
        new_id = self.am.post_silence(body)
        self.ends[new_id] = silences.ends_at(body)
        if new_id != silence_id:  # Alertmanager replaced it: the NodeMaintenance names the new one
            record(client, nm, new_id)
            self.ends.pop(silence_id, None)
        self.extended.append(f"{new_id}@{format_time(now)}")
        return 1
