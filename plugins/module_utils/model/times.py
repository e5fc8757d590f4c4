"""Times as the API server writes them: one parser, and the two formats it writes.

Leases carry MicroTime (``2026-11-29T11:00:00.000000Z``: acquireTime, renewTime); events,
the NodeMaintenance status and its migrations carry Time (``2026-11-29T11:00:00Z``). One
parser reads both, so a value written in one format and read back in the other (a
MicroTime where a Time was expected, or a client that writes milliseconds) is never
refused by one caller and taken by another.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Optional

# RFC 3339 as Kubernetes writes it: a date, 'T' (or a space), a clock, optional fractional
# seconds (any number of digits: a MicroTime has 6, RFC 3339 allows more), then 'Z' or an offset.
_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?$")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def format_time(moment: datetime) -> str:
    """MicroTime as the API server writes it: 2026-11-29T11:00:00.000000Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_seconds(moment: datetime) -> str:
    """Time (whole seconds) as the API server writes it: 2026-11-29T11:00:00Z."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return format_seconds(utcnow())


def parse_time(value: Optional[str]) -> Optional[datetime]:
    """A MicroTime or Time as a datetime, fractional seconds kept to the microsecond (what a
    datetime holds: more digits are cut); None for no value or one that is not a time. A value
    without a zone is UTC, as every time the API server writes is."""
    match = _RFC3339.match(value or "")
    if not match:
        return None
    day, clock, fraction, zone = match.groups()
    micro = (fraction or "")[:6].ljust(6, "0")
    offset = "+00:00" if zone in (None, "Z", "z") else zone
    try:
        return datetime.fromisoformat(f"{day}T{clock}.{micro}{offset}")
    except ValueError:  # a well-formed string that is no time (month 13, hour 25)
        return None
