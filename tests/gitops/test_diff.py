"""Diff: `<name>-desired.yaml` / `<name>-live.yaml` pairs, server-side apply semantics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gitops.engine.diff import diff, normalize_live, pointers_for, remove_pointers
from gitops.engine.pairing import ResourceKey

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "gitops"


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return data


CASES = {
    "server defaults and other managers' fields are not drift": ("server-defaults", (), False),
    "a changed image is drift": ("image-changed", (), True),
    "an extra container is drift (lists compare whole)": ("extra-container", (), True),
    "replicas changed live is drift": ("ignored-replicas", (), True),
    "replicas changed live is ignored with a pointer": (
        "ignored-replicas",
        ("/spec/replicas",),
        False,
    ),
}


@pytest.mark.parametrize(("name", "pointers", "modified"), CASES.values(), ids=CASES.keys())
def test_diff_cases(name: str, pointers: tuple[str, ...], modified: bool) -> None:
    result = diff(load(f"{name}-desired.yaml"), load(f"{name}-live.yaml"), pointers)
    assert result.modified is modified
    assert (result.text != "") is modified


def test_the_diff_text_goes_from_live_to_desired_as_kubectl_diff() -> None:
    result = diff(load("image-changed-desired.yaml"), load("image-changed-live.yaml"))
    assert result.text.startswith("--- live\n+++ desired\n")
    removed = [line for line in result.text.splitlines() if line.startswith("-  ")]
    added = [line for line in result.text.splitlines() if line.startswith("+  ")]
    assert removed and added and removed != added


SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}


def test_a_secret_written_with_string_data_is_in_sync_with_what_the_server_stored() -> None:
    desired = {**SECRET, "stringData": {"token": "abc"}}
    live = {**SECRET, "data": {"token": "YWJj"}, "type": "Opaque"}
    assert not diff(desired, live).modified
    assert diff({**SECRET, "stringData": {"token": "xyz"}}, live).modified


def test_secret_values_never_appear_in_a_diff_but_changed_keys_do() -> None:
    desired = {**SECRET, "data": {"token": "bmV3", "user": "YWRt"}}
    live = {**SECRET, "data": {"token": "b2xk", "user": "YWRt"}}
    result = diff(desired, live)
    assert result.modified
    assert "bmV3" not in result.text and "b2xk" not in result.text and "YWRt" not in result.text
    assert "-  token: +++++++++" in result.text and "+  token: ++++++++" in result.text
    assert "user" not in [
        line[1:].split(":")[0].strip()
        for line in result.text.splitlines()
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]


def test_an_absent_live_object_is_modified() -> None:
    result = diff(load("server-defaults-desired.yaml"), None)
    assert result.modified and result.live_norm is None


def test_normalize_live_drops_server_fields_but_keeps_our_tracking() -> None:
    live = normalize_live(load("server-defaults-live.yaml"))
    meta = live["metadata"]
    assert "status" not in live
    assert not {"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} & set(
        meta
    )
    assert meta["annotations"] == {"gitops.trainops.dev/repository": "ns/repo"}
    assert meta["labels"] == {
        "app": "web",
        "gitops.trainops.dev/managed": "true",
        "extra": "by-someone-else",
    }


def test_a_live_object_without_our_tracking_label_differs_and_the_diff_shows_it() -> None:
    desired = {
        "kind": "X",
        "metadata": {
            "name": "a",
            "labels": {"gitops.trainops.dev/managed": "true"},
            "annotations": {"gitops.trainops.dev/repository": "ns/repo"},
        },
        "spec": {"x": 1},
    }
    unlabelled = {"kind": "X", "metadata": {"name": "a", "uid": "u"}, "spec": {"x": 1}}
    result = diff(desired, unlabelled)
    assert result.modified
    assert "+    gitops.trainops.dev/managed: 'true'" in result.text
    assert "+    gitops.trainops.dev/repository: ns/repo" in result.text
    other = {
        **unlabelled,
        "metadata": {
            **desired["metadata"],
            "annotations": {"gitops.trainops.dev/repository": "ns/b"},
        },
    }
    assert diff(desired, other).modified
    assert not diff(desired, {**unlabelled, "metadata": desired["metadata"]}).modified


def test_a_number_in_git_equals_its_string_live() -> None:
    want = {"kind": "X", "spec": {"cpu": 1}}
    assert not diff(want, {"kind": "X", "spec": {"cpu": "1"}}).modified
    assert diff(want, {"kind": "X", "spec": {"cpu": "2"}}).modified


def test_booleans_are_not_numbers() -> None:
    assert diff({"a": True}, {"a": 1}).modified


def test_ignore_differences_rules_match_by_group_kind_name_and_namespace() -> None:
    rules = [
        {"group": "apps", "kind": "Deployment", "jsonPointers": ["/spec/replicas"]},
        {"group": "apps", "kind": "Deployment", "name": "other", "jsonPointers": ["/x"]},
        {"kind": "ConfigMap", "jsonPointers": ["/data"]},
    ]
    key = ResourceKey("apps", "Deployment", "ns", "web")
    assert pointers_for(key, rules) == ["/spec/replicas"]
    assert pointers_for(ResourceKey("", "ConfigMap", "ns", "c"), rules) == ["/data"]


def test_remove_pointers_unescapes_and_ignores_absent_fields() -> None:
    obj = {"metadata": {"annotations": {"a/b": "1", "c": "2"}}, "l": [1, 2]}
    assert remove_pointers(obj, ["/metadata/annotations/a~1b", "/nope/x", "/l/0"]) == {
        "metadata": {"annotations": {"c": "2"}},
        "l": [2],
    }
