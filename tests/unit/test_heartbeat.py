"""The heartbeat renews a lease only when it is due."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import heartbeat

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def lease(age: float, duration: int) -> leases.Lease:
    return {"metadata": {"name": "l"}, "spec": {"renewTime": leases.format_time(NOW - timedelta(seconds=age)),
                                                "leaseDurationSeconds": duration}}


def test_a_long_lease_is_renewed_once_half_of_it_is_gone() -> None:
    assert not heartbeat.due(lease(1700, 3600), NOW)
    assert heartbeat.due(lease(1800, 3600), NOW)


def test_a_short_lease_is_renewed_every_beat() -> None:
    assert heartbeat.due(lease(0, 30), NOW)  # lapses within three beats


def test_the_run_lease_is_renewed_every_second_beat() -> None:
    assert not heartbeat.run_lease_due(lease(10, 60), NOW, 60)
    assert heartbeat.run_lease_due(lease(20, 60), NOW, 60)
    assert heartbeat.run_lease_due(lease(0, 20), NOW, 20)  # the shortest run lease: every beat


def test_a_lease_without_times_is_never_due() -> None:
    assert not heartbeat.due({"metadata": {"name": "l"}, "spec": {}}, NOW)
