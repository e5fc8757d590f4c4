"""The heartbeat renews a lease only when it is due."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from ansible_collections.nmo.maintenance.plugins.module_utils.errors import Unreachable, api_error
from ansible_collections.nmo.maintenance.plugins.module_utils.model import leases
from ansible_collections.nmo.maintenance.plugins.module_utils.workflows import heartbeat, heartbeat_note

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


def test_the_heartbeats_note_says_why_it_cannot_renew(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(heartbeat_note.tempfile, "gettempdir", lambda: str(tmp_path))
    forbidden = api_error(403, "Forbidden", 'leases is forbidden: User "u" cannot list', "GET", "/leases")
    assert heartbeat_note.cause(forbidden).startswith("it is forbidden (403): API server answered 403 Forbidden")
    assert heartbeat_note.cause(Unreachable("https://k", "connection refused")).startswith(
        "the API server cannot be reached: could not connect to https://k: connection refused")
    assert heartbeat_note.cause(api_error(401, "Unauthorized", "Unauthorized")).startswith(
        "its credentials were refused (401)")
    assert heartbeat_note.read("r1") is None
    heartbeat_note.write("r1", 100.0, "it is forbidden (403): x")
    note = heartbeat_note.read("r1")
    assert note == (100.0, "it is forbidden (403): x")
    assert heartbeat_note.sentence(note, 142.0) == (
        "the run's heartbeat cannot renew the run's leases since 42 s ago: it is forbidden (403): x")
    heartbeat_note.clear("r1")
    assert heartbeat_note.read("r1") is None and not list(tmp_path.iterdir())
