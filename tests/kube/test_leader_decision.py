"""`observe` and `decide`: a Lease expires a lease duration after this process last saw it
change, on its own monotonic clock; the holder's renewTime (another machine's wall clock) plays
no part."""

from __future__ import annotations

from typing import Any

import pytest

from kube.leader import Decision, Observation, decide, observe

FAR_PAST = "1970-01-01T00:00:00.000000Z"
FAR_FUTURE = "2099-12-31T23:59:59.000000Z"
NEAR = "2026-01-01T12:00:00.000000Z"


def _lease(
    holder: str = "other",
    renewed: str = NEAR,
    duration: Any = 15,
    rv: str = "7",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"holderIdentity": holder, "renewTime": renewed}
    if duration is not None:
        spec["leaseDurationSeconds"] = duration
    return {"metadata": {"name": "ctl", "resourceVersion": rv}, "spec": spec}


def _seen_at(lease: dict[str, Any], since: float) -> Observation:
    return observe(None, lease, since)


# name: (lease, seconds since the Lease was first seen as it is, expected decision)
DECISIONS: dict[str, tuple[dict[str, Any], float, Decision]] = {
    "held by us": (_lease(holder="me"), 0.0, Decision.RENEW),
    "held by us, unchanged for an hour": (_lease(holder="me"), 3600.0, Decision.RENEW),
    "released (no holder)": (_lease(holder=""), 0.0, Decision.ACQUIRE),
    "another, seen unchanged 10 s of 15": (_lease(), 10.0, Decision.WAIT),
    "another, seen unchanged 14.9 s of 15": (_lease(), 14.9, Decision.WAIT),
    "another, seen unchanged 15 s of 15": (_lease(), 15.0, Decision.ACQUIRE),
    "another, renewTime far in the future, seen unchanged 15 s": (
        _lease(renewed=FAR_FUTURE),
        15.0,
        Decision.ACQUIRE,
    ),
    "another, renewTime far in the past, seen unchanged 1 s": (
        _lease(renewed=FAR_PAST),
        1.0,
        Decision.WAIT,
    ),
    "another, no renewTime at all, seen 1 s": (_lease(renewed=""), 1.0, Decision.WAIT),
    "another, 1 s lease seen 1 s": (_lease(duration=1), 1.0, Decision.ACQUIRE),
    "another, no duration: ours (15 s) counts, seen 10 s": (
        _lease(duration=None),
        10.0,
        Decision.WAIT,
    ),
    "another, no duration: ours (15 s) counts, seen 15 s": (
        _lease(duration=None),
        15.0,
        Decision.ACQUIRE,
    ),
    "another, duration not a number: ours counts": (_lease(duration="x"), 10.0, Decision.WAIT),
    "another, negative duration: ours counts": (_lease(duration=-5), 10.0, Decision.WAIT),
    "no spec at all": ({"metadata": {"resourceVersion": "1"}}, 0.0, Decision.ACQUIRE),
}


@pytest.mark.parametrize(("lease", "elapsed", "expected"), DECISIONS.values(), ids=list(DECISIONS))
def test_what_a_candidate_does_about_a_lease(
    lease: dict[str, Any], elapsed: float, expected: Decision
) -> None:
    observed = _seen_at(lease, since=1000.0)
    got = decide(observed, lease, identity="me", now=1000.0 + elapsed, default_duration=15.0)
    assert got is expected


# name: (first lease, second lease, whether the second counts as a change)
CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any], bool]] = {
    "the same lease read again": (_lease(), _lease(), False),
    "a new resourceVersion": (_lease(rv="7"), _lease(rv="8"), True),
    "a new holder": (_lease(holder="a"), _lease(holder="b"), True),
    "a new renewTime (even an older one)": (_lease(renewed=NEAR), _lease(renewed=FAR_PAST), True),
    "only the duration differs": (_lease(duration=15), _lease(duration=30), False),
}


@pytest.mark.parametrize(("first", "second", "changed"), CHANGES.values(), ids=list(CHANGES))
def test_an_observation_restarts_only_when_the_lease_changed(
    first: dict[str, Any], second: dict[str, Any], changed: bool
) -> None:
    before = observe(None, first, 5.0)
    after = observe(before, second, 9.0)
    assert after.since == (9.0 if changed else 5.0)
    assert (after is before) is not changed


@pytest.mark.parametrize("renewed_at", [FAR_PAST, FAR_FUTURE], ids=["in the past", "in the future"])
def test_a_holder_that_keeps_renewing_is_never_taken_over_whatever_its_clock_says(
    renewed_at: str,
) -> None:
    """A holder whose clock is hours off renews every 2 s; the candidate reads every 2 s for
    ten minutes (300 reads) and waits every time. Once the holder stops, the candidate takes
    over exactly one lease duration after the last change it saw."""
    observed: Observation | None = None
    now = 0.0
    for rv in range(300):
        lease = _lease(renewed=f"{renewed_at[:-2]}{rv % 10}Z", rv=str(rv))
        observed = observe(observed, lease, now)
        assert decide(observed, lease, identity="me", now=now, default_duration=15.0) == (
            Decision.WAIT
        ), f"read {rv}"
        now += 2.0
    last_change = now - 2.0
    decisions = []
    while now <= last_change + 20.0:
        observed = observe(observed, lease, now)
        decisions.append(
            (
                now - last_change,
                decide(observed, lease, identity="me", now=now, default_duration=15.0),
            )
        )
        now += 1.0
    assert {d for elapsed, d in decisions if elapsed < 15.0} == {Decision.WAIT}
    assert min(elapsed for elapsed, d in decisions if d is Decision.ACQUIRE) == 15.0
    assert {d for elapsed, d in decisions if elapsed >= 15.0} == {Decision.ACQUIRE}
