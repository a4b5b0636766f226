"""Restart decisions and crash-loop back-off follow the kubelet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from localcluster.kubelet.model import BackOffPolicy
from localcluster.kubelet.restart import (
    backoff_after_restart,
    go_duration,
    restart_delay,
    should_restart,
    should_restart_init,
)

POLICIES = {
    "Always restarts a success": ("Always", 0, True),
    "Always restarts a failure": ("Always", 1, True),
    "OnFailure keeps a success": ("OnFailure", 0, False),
    "OnFailure restarts a failure": ("OnFailure", 137, True),
    "Never keeps a failure": ("Never", 1, False),
}


@pytest.mark.parametrize(("policy", "code", "want"), POLICIES.values(), ids=POLICIES.keys())
def test_restart_policy_decides(policy: str, code: int, want: bool) -> None:
    assert should_restart(policy, code) is want


def test_init_containers_rerun_only_after_failure_and_never_under_never() -> None:
    assert should_restart_init("Always", 1) and should_restart_init("OnFailure", 2)
    assert not should_restart_init("Always", 0)
    assert not should_restart_init("Never", 1)


T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = BackOffPolicy()


def test_back_off_is_immediate_then_doubles_to_five_minutes() -> None:
    entry = None
    delays = []
    at = T0
    for _ in range(8):
        delays.append(restart_delay(entry, at, POLICY))
        entry = backoff_after_restart(entry, at, POLICY)
        at += timedelta(seconds=entry.period + 1)
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]


def test_back_off_resets_after_ten_quiet_minutes() -> None:
    entry = backoff_after_restart(None, T0, POLICY)
    entry = backoff_after_restart(entry, T0 + timedelta(seconds=11), POLICY)
    assert entry.period == 20
    later = T0 + timedelta(minutes=11)
    assert restart_delay(entry, later, POLICY) == 0
    assert backoff_after_restart(entry, later, POLICY).period == 10


DURATIONS = {
    "ten seconds": (10, "10s"),
    "eighty seconds": (80, "1m20s"),
    "five minutes": (300, "5m0s"),
    "sub-second": (0.2, "200ms"),
    "fractional": (1.5, "1.5s"),
}


@pytest.mark.parametrize(("seconds", "want"), DURATIONS.values(), ids=DURATIONS.keys())
def test_durations_print_like_go(seconds: float, want: str) -> None:
    assert go_duration(seconds) == want
