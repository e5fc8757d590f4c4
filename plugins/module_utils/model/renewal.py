"""When the run's heartbeat renews a lease, and the shortest lease it can keep.

The heartbeat (heartbeat.py) looks every ``BEAT`` seconds and renews a lease once at most
``margin(duration)`` seconds of it are left: half its duration, never less than three beats.
So the latest beat that renews a lease comes ``BEAT`` seconds after it entered its margin
(``renewal_due``), and what is left of it then, ``margin - BEAT``, is the budget for a beat
that fails: the failed request retries for ``BEAT_RETRY_BUDGET`` seconds (the heartbeat's
client is set so), the loop tries again ``RETRY_PAUSE`` later, and the times it judges by
are the API server's, read from whole-second ``Date`` headers and judged by others with
``leases.CLOCK_TOLERANCE``.

``MIN_LEASE_SECONDS`` is the shortest lease for which that budget holds: 30 s, three beats,
renewed every beat (a third of the lease) with 20 s left, where a missed beat needs
10 + 1 + 3 = 14 s (the rest, 6 s, for the requests themselves). A 5 s lease, renewed every
10 s beat, was lapsed half of the time, and another run took its slot.

Pure: no request, no clock of its own.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Dict, Optional

BEAT = 10  # seconds between two looks of the heartbeat at its leases
BEAT_RETRY_BUDGET = 10  # how long one request of the heartbeat is retried (heartbeat.py)
RETRY_PAUSE = 1  # after a failed beat, the next try
CLOCK_ALLOWANCE = 3  # whole-second Date headers (1 s) + leases.CLOCK_TOLERANCE (2 s)
MIN_LEASE_SECONDS = 3 * BEAT
# A lease whose renewal is this much overdue is reported: a beat is late by up to a second
# or two (its own requests, the one-second sleep of the loop), never by a retry.
LATE_AFTER = RETRY_PAUSE + CLOCK_ALLOWANCE + 1


def margin(duration: float) -> float:
    """Seconds left in a lease when the heartbeat renews it: half of it, at least three beats."""
    return max(duration / 2, 3 * BEAT)


def missed_beat_budget() -> int:
    """Seconds a renewal may take when its first beat fails: a retried request, a pause, the clocks."""
    return BEAT_RETRY_BUDGET + RETRY_PAUSE + CLOCK_ALLOWANCE


def keepable(duration: float) -> bool:
    """The heartbeat renews a lease of this duration with a missed beat's budget to spare."""
    return duration >= MIN_LEASE_SECONDS and min(margin(duration), duration) - BEAT >= missed_beat_budget()


def renewal_due(lease: Dict[str, Any], expires: Optional[datetime]) -> Optional[datetime]:
    """The latest moment the heartbeat renews ``lease`` (which lapses at ``expires``)."""
    duration = int(((lease or {}).get("spec") or {}).get("leaseDurationSeconds") or 0)
    if expires is None or duration <= 0:
        return None
    return expires - timedelta(seconds=min(margin(duration), duration) - BEAT)


def late_by(lease: Dict[str, Any], expires: Optional[datetime], now: datetime) -> float:
    """Seconds the lease's renewal is overdue at ``now`` (0 when it is not)."""
    due = renewal_due(lease, expires)
    return max(0.0, (now - due).total_seconds()) if due is not None else 0.0


def too_short(duration: Any, option: str) -> Optional[str]:
    """Why a lease of ``duration`` cannot be kept by the heartbeat, for an error naming ``option``."""
    if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration >= MIN_LEASE_SECONDS:
        return None
    return (f"{option}: {duration!r} is shorter than the {MIN_LEASE_SECONDS} s a lease needs: the run's heartbeat "
            f"renews it every {BEAT} s and it must outlive a renewal that fails once ({missed_beat_budget()} s: a "
            f"retried request, a pause and the clocks' allowance); give {MIN_LEASE_SECONDS} or more")
