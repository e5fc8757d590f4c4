"""A node's Alertmanager silence, as data: its matchers, its body, when it is due for extension
(docs/design.md §17.2). Pure: no I/O.

Matcher templates are Alertmanager's matcher syntax (``name="value"``, ``name!="value"``,
``name=~"regex"``, ``name!~"regex"``) with the placeholder ``{node}`` for the node's name.
Single braces, not Jinja's ``{{ }}``: Ansible leaves them alone, so the role passes the
templates through as they are written. In a regular-expression matcher the node name is
escaped (``node-1.example`` matches only itself).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Dict, List, Optional

from ..errors import InputError
from .times import format_time, parse_time

PLACEHOLDER = "{node}"
ID_ANNOTATION = "nmo.maintenance/silence"  # on the NodeMaintenance: the id of the node's silence
CREATED_BY = "nmo.maintenance"
DEFAULT_DURATION = 600  # seconds ahead of now each creation and extension sets endsAt
MIN_DURATION = 30
DEFAULT_MATCHERS = ('node="{node}"', 'instance=~"{node}(:[0-9]+)?"')
_MATCHER = re.compile(r'^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')


def parse(template: str) -> Dict[str, Any]:
    """One matcher template to its parts; InputError naming the template when it is not one."""
    found = _MATCHER.match(template or "")
    if not found:
        raise InputError(f"node_maintenance_alertmanager.matchers: {template!r} is not a matcher: write "
                         'name="value", name!="value", name=~"regex" or name!~"regex", with {node} '
                         "for the node's name")
    name, op, value = found.groups()
    return {"name": name, "value": value.replace('\\"', '"'), "isRegex": "~" in op, "isEqual": not op.startswith("!")}


def validate(templates: List[str]) -> List[Dict[str, Any]]:
    if not templates:
        raise InputError("node_maintenance_alertmanager.matchers is empty: a silence without matchers "
                         "would silence nothing (Alertmanager refuses it)")
    parsed = [parse(t) for t in templates]
    if not any(PLACEHOLDER in t for t in templates):
        raise InputError("node_maintenance_alertmanager.matchers: none names the node ({node}): every "
                         "node's silence would silence the same alerts")
    return parsed


def matchers(templates: List[str], node: str) -> List[Dict[str, Any]]:
    """The node's matchers: each template with ``{node}`` replaced (escaped in a regex)."""
    out = []
    for matcher in validate(templates):
        value = matcher["value"].replace(PLACEHOLDER, re.escape(node) if matcher["isRegex"] else node)
        out.append({**matcher, "value": value})
    return out


def comment(run_id: str, maintenance: str, node: str) -> str:
    return f"node {node} in maintenance: NodeMaintenance {maintenance}, run {run_id} (nmo.maintenance)"


def body(templates: List[str], node: str, run_id: str, maintenance: str, now: datetime, duration: int,
         silence_id: Optional[str] = None, starts_at: Optional[str] = None) -> Dict[str, Any]:
    """The silence to POST: from now (or its own start, to extend it in place) to now + duration."""
    sil: Dict[str, Any] = {
        "matchers": matchers(templates, node),
        "startsAt": starts_at or format_time(now),
        "endsAt": format_time(now + timedelta(seconds=duration)),
        "createdBy": CREATED_BY,
        "comment": comment(run_id, maintenance, node),
    }
    if silence_id:
        sil["id"] = silence_id
    return sil


def extension(current: Dict[str, Any], now: datetime, duration: int) -> Dict[str, Any]:
    """The same silence, ending ``duration`` seconds from now: what Alertmanager updates in place."""
    keep = {k: current[k] for k in ("id", "matchers", "startsAt", "createdBy", "comment") if k in current}
    return {**keep, "endsAt": format_time(now + timedelta(seconds=duration))}


def active(current: Optional[Dict[str, Any]]) -> bool:
    return bool(current) and ((current or {}).get("status") or {}).get("state") in ("active", "pending")


def ends_at(current: Dict[str, Any]) -> Optional[datetime]:
    return parse_time(current.get("endsAt"))


def due(ends: Optional[datetime], now: datetime, duration: int) -> bool:
    """Extend when less than half its duration is left (a beat every 10 s keeps far ahead)."""
    return ends is None or ends - now <= timedelta(seconds=duration / 2)


def duration_of(value: Any) -> int:
    seconds = int(value) if value not in (None, "") else DEFAULT_DURATION
    if seconds < MIN_DURATION:
        raise InputError(f"node_maintenance_alertmanager.duration must be at least {MIN_DURATION} s "
                         f"(the heartbeat extends the silence every 10 s once half of it is gone), got {seconds}")
    return seconds
