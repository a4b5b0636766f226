"""Sync and refresh requests on a JobRepository, and what the leader records as handled
(`gitops.engine.triggers`, pure): pending while the annotation differs from the recorded value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from gitops.engine import triggers
from gitops.engine.triggers import Pending

T1 = "2026-11-26T10:20:31.123456Z"
T2 = "2026-11-26T10:20:35.000001Z"


def repo(annotations: dict[str, Any] | None = None, handled: Any = None) -> dict[str, Any]:
    obj: dict[str, Any] = {"metadata": {"name": "jobs", "namespace": "team"}}
    if annotations is not None:
        obj["metadata"]["annotations"] = annotations
    if handled is not None:
        obj["status"] = {"sync": {"status": "Synced"}, triggers.HANDLED: handled}
    return obj


REFRESH = triggers.REFRESH_REQUESTED_AT
SYNC = triggers.SYNC_REQUESTED_AT
REVISION = triggers.SYNC_REVISION

PENDING_CASES = {
    "no annotations: nothing": (repo(), Pending()),
    "other annotations: nothing": (repo({"team": "a"}), Pending()),
    "a refresh never handled": (
        repo({REFRESH: T1}),
        Pending(refresh=True, refresh_token=T1),
    ),
    "a refresh already handled": (repo({REFRESH: T1}, {"refreshRequestedAt": T1}), Pending()),
    "a newer refresh than the one handled": (
        repo({REFRESH: T2}, {"refreshRequestedAt": T1}),
        Pending(refresh=True, refresh_token=T2),
    ),
    "an older value than the one handled is new too (equality, not order)": (
        repo({REFRESH: T1}, {"refreshRequestedAt": T2}),
        Pending(refresh=True, refresh_token=T1),
    ),
    "a sync to the target": (repo({SYNC: T1}), Pending(sync=True, sync_token=T1)),
    "a sync to a revision": (
        repo({SYNC: T1, REVISION: " v1.2 "}),
        Pending(sync=True, revision="v1.2", sync_token=T1),
    ),
    "an empty revision is the target": (
        repo({SYNC: T1, REVISION: ""}),
        Pending(sync=True, sync_token=T1),
    ),
    "a revision without a pending sync asks for nothing": (
        repo({SYNC: T1, REVISION: "v1"}, {"syncRequestedAt": T1}),
        Pending(),
    ),
    "a handled sync and a new refresh": (
        repo({SYNC: T1, REFRESH: T2}, {"syncRequestedAt": T1}),
        Pending(refresh=True, refresh_token=T2),
    ),
    "both pending": (
        repo({SYNC: T2, REFRESH: T1}),
        Pending(refresh=True, sync=True, refresh_token=T1, sync_token=T2),
    ),
    "an empty value is no request": (repo({SYNC: "  ", REFRESH: ""}), Pending()),
    "a value that is not text is no request": (repo({SYNC: 5}), Pending()),
    "an overlong value is no request": (repo({REFRESH: "x" * 129}), Pending()),
    "a malformed record counts as none": (
        repo({REFRESH: T1}, ["not", "a", "map"]),
        Pending(),
    ),
}


@pytest.mark.parametrize(("obj", "expected"), list(PENDING_CASES.values()), ids=list(PENDING_CASES))
def test_pending_requests_are_those_whose_value_is_not_recorded(
    obj: dict[str, Any], expected: Pending
) -> None:
    assert triggers.pending(obj) == expected


def test_recording_what_was_handled_keeps_the_rest_of_status_and_the_other_request() -> None:
    status = {"sync": {"status": "Synced"}, triggers.HANDLED: {"syncRequestedAt": T1}}
    after = triggers.record_handled(status, Pending(refresh=True, refresh_token=T2))
    assert after == {
        "sync": {"status": "Synced"},
        triggers.HANDLED: {"syncRequestedAt": T1, "refreshRequestedAt": T2},
    }
    assert status[triggers.HANDLED] == {"syncRequestedAt": T1}  # not modified in place


@pytest.mark.parametrize("handled", [None, Pending()], ids=["none", "nothing pending"])
def test_nothing_to_record_leaves_status_as_it_is(handled: Pending | None) -> None:
    status = {"sync": {"status": "Synced"}}
    assert triggers.record_handled(status, handled) is status


def test_a_request_once_recorded_is_no_longer_pending_and_a_later_one_is() -> None:
    obj = repo({SYNC: T1, REVISION: "main"})
    asked = triggers.pending(obj)
    obj["status"] = triggers.record_handled({}, asked)
    assert not triggers.pending(obj).any
    later = triggers.request_patch("sync", datetime(2026, 11, 26, 11, 0, tzinfo=UTC))
    obj["metadata"]["annotations"].update(later["metadata"]["annotations"])
    again = triggers.pending(obj)
    assert (
        again.sync and again.revision is None and again.sync_token == "2026-11-26T11:00:00.000000Z"
    )


def test_request_patches_are_merge_patches_of_annotations_in_utc() -> None:
    now = datetime(2026, 11, 26, 12, 20, 31, 5, tzinfo=timezone(timedelta(hours=2)))
    assert triggers.request_patch("refresh", now) == {
        "metadata": {"annotations": {REFRESH: "2026-11-26T10:20:31.000005Z"}}
    }
    assert triggers.request_patch("sync", now, "v1") == {
        "metadata": {"annotations": {SYNC: "2026-11-26T10:20:31.000005Z", REVISION: "v1"}}
    }
    # A sync to the target removes the revision an earlier request left (null in a merge patch).
    assert triggers.request_patch("sync", now)["metadata"]["annotations"][REVISION] is None


CHANGED_CASES = {
    "a new request": (repo(), repo({SYNC: T1}), True),
    "a newer request": (repo({REFRESH: T1}), repo({REFRESH: T2}), True),
    "another revision": (repo({SYNC: T1, REVISION: "a"}), repo({SYNC: T1, REVISION: "b"}), True),
    "a status write recording it": (
        repo({SYNC: T1}),
        repo({SYNC: T1}, {"syncRequestedAt": T1}),
        False,
    ),
    "another annotation": (repo({SYNC: T1}), repo({SYNC: T1, "team": "a"}), False),
    "a request removed by hand": (repo({SYNC: T1}), repo({}), True),
}


@pytest.mark.parametrize(
    ("old", "new", "expected"), list(CHANGED_CASES.values()), ids=list(CHANGED_CASES)
)
def test_only_a_change_of_the_request_annotations_wakes_the_leader(
    old: dict[str, Any], new: dict[str, Any], expected: bool
) -> None:
    assert triggers.changed(old, new) is expected
