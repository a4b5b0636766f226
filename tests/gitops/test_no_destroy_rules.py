"""The pure rules behind "no sync silently destroys running work": tracking ids
(gitops/engine/ownership.py), the empty-desired-state guard (gitops/engine/guards.py) and fields held by
hand (gitops/engine/handheld.py), table-tested."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from gitops.engine import guards, handheld, ownership
from gitops.engine.compare import Comparison, ResourceState, compare
from gitops.engine.pairing import ResourceKey
from gitops.engine.preflight import preflight
from gitops.source.checkout import load_directory

REPO, UID = "ns/jobs", "uid-1"
KEY = ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "ns", "a")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def obj(repository: str | None = None, uid: str | None = None, **more: str) -> dict[str, Any]:
    annotations = dict(more)
    if repository:
        annotations["gitops.trainops.dev/repository"] = repository
    if uid:
        annotations["gitops.trainops.dev/repository-uid"] = uid
    return {"metadata": {"name": "a", "annotations": annotations}}


OURS = [
    pytest.param(obj(REPO, UID), True, id="our-name-and-uid"),
    pytest.param(obj(REPO), True, id="our-name-applied-before-uids"),
    pytest.param(obj("ns/jobs", "uid-0"), False, id="our-name-another-uid"),
    pytest.param(obj("ns/other", UID), True, id="uid-wins-over-a-stale-name"),
    pytest.param(obj("ns/other"), False, id="another-name"),
    pytest.param(obj(), False, id="untracked"),
    pytest.param(None, False, id="absent"),
]


@pytest.mark.parametrize(("live", "expected"), OURS)
def test_an_object_is_ours_by_uid_and_by_name_only_without_a_uid(
    live: dict[str, Any] | None, expected: bool
) -> None:
    assert ownership.is_ours(live, REPO, UID) is expected


REPOSITORIES = {("ns", "team-b"): "uid-b", ("ns", "jobs"): UID, ("ns", "secret"): "?"}

CLAIMS = [
    pytest.param(obj("ns/team-b", "uid-b"), {KEY: "ns/team-b"}, id="another-live-repository"),
    pytest.param(obj("ns/team-b"), {KEY: "ns/team-b"}, id="another-by-name-before-uids"),
    pytest.param(obj("ns/gone", "uid-g"), {}, id="its-repository-is-gone"),
    pytest.param(obj("ns/team-b", "uid-old"), {}, id="its-repository-was-recreated"),
    pytest.param(obj("ns/jobs", "uid-0"), {}, id="our-name-old-uid-adoptable"),
    pytest.param(obj(None, "uid-x"), {KEY: "the JobRepository with uid uid-x"}, id="uid-only"),
    pytest.param(obj(REPO, UID), {}, id="ours"),
    pytest.param(obj("ns/secret", "uid-s"), {KEY: "ns/secret"}, id="lookup-cannot-tell"),
    pytest.param(obj(), {}, id="untracked-adoptable"),
]


@pytest.mark.parametrize(("live", "expected"), CLAIMS)
def test_only_a_live_other_repository_claims_an_object(
    live: dict[str, Any], expected: dict[ResourceKey, str]
) -> None:
    async def lookup(namespace: str, name: str) -> str | None:
        return REPOSITORIES.get((namespace, name))

    got = asyncio.run(ownership.foreign_claims({KEY: live}, [KEY], REPO, UID, lookup))
    assert got == expected


def _state(key: ResourceKey | None, *, prune: bool = False) -> ResourceState:
    return ResourceState(
        key, "" if prune else "a.yaml", 0 if prune else 1, None if prune else {}, {},
        "OutOfSync", None, "", prune=prune,
    )  # fmt: skip


B = ResourceKey("", "ConfigMap", "ns", "b")
EMPTY = [
    pytest.param((), False, None, id="nothing-at-all"),
    pytest.param((_state(KEY, prune=True),), False, "defines no objects", id="only-prunes"),
    pytest.param((_state(KEY, prune=True),), True, None, id="only-prunes-allowed"),
    pytest.param((_state(B), _state(KEY, prune=True)), False, None, id="git-defines-something"),
    pytest.param((_state(None), _state(KEY, prune=True)), False, None, id="unreadable-doc"),
]


@pytest.mark.parametrize(("states", "allowed", "blocked"), EMPTY)
def test_an_empty_desired_state_blocks_prune_unless_allowed(
    states: tuple[ResourceState, ...], allowed: bool, blocked: str | None
) -> None:
    out = guards.guard_empty(Comparison(states, None), allowed=allowed, path=".")
    if blocked is None:
        assert out.prune_blocked is None
    else:
        assert out.prune_blocked is not None and blocked in out.prune_blocked


def test_the_empty_message_names_the_path_and_the_count() -> None:
    assert guards.empty_message("jobs", 1) == (
        "prune skipped: path jobs defines no objects at this revision; 1 object applied "
        "before are kept (set spec.syncPolicy.allowEmpty: true to let an empty revision "
        "prune them)"
    )


def test_the_prune_skipped_condition_follows_the_blocked_prune() -> None:
    blocked = Comparison((_state(KEY, prune=True),), guards.empty_message(".", 1))
    st = guards.with_prune_condition({"sync": {"status": "OutOfSync"}}, blocked, NOW)
    (cond,) = st["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == (
        "PruneSkipped", "True", "EmptyDesiredState",
    )  # fmt: skip
    unreadable = Comparison((_state(KEY, prune=True),), "prune skipped: x.yaml:1 could not be read")
    st2 = guards.with_prune_condition(st, unreadable, NOW)
    assert st2["conditions"][0]["reason"] == "UnreadableFile"
    assert "conditions" not in guards.with_prune_condition(st2, Comparison((), None), NOW)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"syncPolicy": {"allowEmpty": True}}, True),
        ({"syncPolicy": {"allowEmpty": "true"}}, False),
        ({"syncPolicy": {}}, False),
        ({}, False),
        (None, False),
    ],
)
def test_allow_empty_is_read_only_as_a_boolean_true(spec: Any, expected: bool) -> None:
    assert guards.allow_empty({"spec": spec}) is expected


HELD = [
    pytest.param("/spec/runMode/pause/enabled", ("/spec/runMode/pause/enabled",), id="pause"),
    pytest.param(" /spec/a , /spec/b,/spec/a", ("/spec/a", "/spec/b"), id="list-deduplicated"),
    pytest.param("/metadata/annotations/x,spec/a", (), id="tracking-and-relative-refused"),
    pytest.param("", (), id="empty"),
]


@pytest.mark.parametrize(("text", "expected"), HELD)
def test_held_pointers_are_read_from_the_annotation(text: str, expected: tuple[str, ...]) -> None:
    live = {"metadata": {"annotations": {"gitops.trainops.dev/held-fields": text}}}
    assert handheld.held_pointers(live) == expected


def test_a_held_field_is_neither_drift_nor_applied(tmp_path: Any) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  x: '1'\n  y: '2'\n"
    )
    checked = preflight(load_directory(tmp_path, "."))
    key = ResourceKey("", "ConfigMap", "ns", "a")
    live = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "labels": {
                "gitops.trainops.dev/managed": "true",
                "gitops.trainops.dev/repository-uid": UID,
            },
            "annotations": {
                "gitops.trainops.dev/repository": REPO,
                "gitops.trainops.dev/repository-uid": UID,
                "gitops.trainops.dev/held-fields": "/data/y",
            },
        },
        "data": {"x": "1", "y": "by hand"},
    }
    held = compare(checked, {key: live}, {key}, repository=REPO, destination="ns",
                   repository_uid=UID)  # fmt: skip
    (state,) = held.resources
    assert state.status == "Synced"
    assert state.desired is not None and state.desired["data"] == {"x": "1"}
    del live["metadata"]["annotations"]["gitops.trainops.dev/held-fields"]
    (back,) = compare(checked, {key: live}, {key}, repository=REPO, destination="ns",
                      repository_uid=UID).resources  # fmt: skip
    assert back.status == "OutOfSync" and back.desired is not None
    assert back.desired["data"] == {"x": "1", "y": "2"}


def test_another_repositorys_object_becomes_an_error_that_applies_nothing() -> None:
    state = _state(KEY)
    out = ownership.mark_foreign(Comparison((state,), None), {KEY: "ns/team-b"})
    (r,) = out.resources
    assert r.desired is None and r.status == "OutOfSync"
    assert (
        r.error
        == r.message
        == ("tracked by ns/team-b: not taken over, never pruned by this repository")
    )
