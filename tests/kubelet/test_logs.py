"""Container log selection honours the kubelet's query options."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from localcluster.kubelet.logs import LogOptions, parse_time, select_log

LOG = (
    b"2026-01-01T00:00:01.000000001Z stdout F one\n"
    b"2026-01-01T00:00:02.500000000Z stderr F two\n"
    b"2026-01-01T00:00:03.000000000Z stdout P thr\n"
    b"2026-01-01T00:00:03.100000000Z stdout F ee\n"
    b"2026-01-01T00:00:04.000000000Z stdout F four\n"
    b"2026-01-01T00:00:05.000000000Z stdout F torn"  # no newline yet: still being written
)

CASES = {
    "everything": (LogOptions(), b"one\ntwo\nthree\nfour\n"),
    "tail two lines": (LogOptions(tail_lines=2), b"three\nfour\n"),
    "tail zero lines": (LogOptions(tail_lines=0), b""),
    "tail more than there are": (LogOptions(tail_lines=10), b"one\ntwo\nthree\nfour\n"),
    "since a time": (
        LogOptions(since=datetime(2026, 1, 1, 0, 0, 2, 500000, tzinfo=UTC)),
        b"two\nthree\nfour\n",
    ),
    "limit bytes": (LogOptions(limit_bytes=6), b"one\ntw"),
    "timestamps once per line": (
        LogOptions(timestamps=True, tail_lines=2),
        b"2026-01-01T00:00:03.000000000Z three\n2026-01-01T00:00:04.000000000Z four\n",
    ),
}


@pytest.mark.parametrize(("options", "want"), CASES.values(), ids=CASES.keys())
def test_log_selection(options: LogOptions, want: bytes) -> None:
    assert select_log(LOG, options) == want


def test_nanosecond_timestamps_parse_to_microseconds() -> None:
    assert parse_time("2026-01-01T00:00:01.123456789Z") == datetime(
        2026, 1, 1, 0, 0, 1, 123456, tzinfo=UTC
    )
