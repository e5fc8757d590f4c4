"""One parser for the API server's times (model/times.py): MicroTime and Time alike."""

from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.nmo.maintenance.plugins.module_utils.model import failure, leases, times
from ansible_collections.nmo.maintenance.plugins.module_utils.stores import maintenance

NOW = datetime(2026, 11, 29, 11, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("text, want", [
    ("2026-11-29T11:00:00Z", NOW),  # Time: events, NodeMaintenance status
    ("2026-11-29T11:00:00.000042Z", NOW + timedelta(microseconds=42)),  # MicroTime: leases
    ("2026-11-29T11:00:00.5Z", NOW + timedelta(milliseconds=500)),  # fewer digits
    ("2026-11-29T11:00:00.123456789Z", NOW + timedelta(microseconds=123456)),  # nanoseconds: cut
    ("2026-11-29T12:00:00+01:00", NOW),
    ("2026-11-29T11:00:00", NOW),  # no zone: UTC, as the API server's times are
])
def test_one_parser_reads_every_time_the_api_server_writes(text: str, want: datetime) -> None:
    assert times.parse_time(text) == want


@pytest.mark.parametrize("text", [None, "", "garbage", "2026-13-01T00:00:00Z", "2026-11-29T11:00Z", "11:00:00"])
def test_what_is_no_time_is_none(text) -> None:
    assert times.parse_time(text) is None


def test_the_two_formats_read_back_as_written() -> None:
    moment = NOW + timedelta(microseconds=42)
    assert times.parse_time(times.format_time(moment)) == moment
    assert times.parse_time(times.format_seconds(moment)) == NOW
    assert times.format_seconds(NOW) == "2026-11-29T11:00:00Z"


def test_the_old_call_sites_share_it() -> None:
    # leases took microseconds, the NodeMaintenance's migrations whole seconds: both now read both
    assert leases.parse_time is times.parse_time
    lines = maintenance.migration_lines([{"vmi": "ns/vm", "state": "migrating", "started": "2026-11-29T10:59:20.5Z"}],
                                        now=NOW)
    assert lines == ["ns/vm: migrating, 40 s"]
    lines = maintenance.migration_lines([{"vmi": "ns/vm", "state": "migrating", "started": "2026-11-29T10:59:20Z"}],
                                        now=NOW)
    assert lines == ["ns/vm: migrating, 40 s"]


def test_the_failure_message_counts_whole_seconds_as_before() -> None:
    # the fraction of renewTime is dropped, as the message always did
    assert failure.held_for("2026-11-29T10:59:00.900000Z", 120, NOW + timedelta(seconds=0.5)) == \
        " (expires in 59 s unless renewed)"  # 120 - 60.5, whole seconds down
    assert failure.held_for("not a time", 120, NOW) == ""
