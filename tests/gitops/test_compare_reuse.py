"""compare(previous=...) keeps the states of resources whose desired and live objects did not
change, and gives exactly what a full comparison gives (gitops/engine/compare.py, table-tested)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gitops.engine.compare import Comparison, compare, settled
from gitops.engine.entries import entries_from_text
from gitops.engine.pairing import ResourceKey
from gitops.engine.preflight import Checked, preflight

REPO, UID, NS = "ns/cms", "uid-r", "ns"
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: '{v}'\n"
NAMES = ["a", "b", "c", "d"]


def key(name: str) -> ResourceKey:
    return ResourceKey("", "ConfigMap", NS, name)


def checked(
    values: dict[str, str] | None = None, files: dict[str, str] | None = None
) -> list[Checked]:
    values, files = values or {}, files or {}
    out: list[Checked] = []
    for n in NAMES:
        file = files.get(n, f"cms/{n}.yaml")
        out += preflight(entries_from_text(file, CM.format(name=n, v=values.get(n, "1"))))
    return out


def live(
    rv: dict[str, str] | None = None, data: dict[str, str] | None = None
) -> dict[ResourceKey, dict[str, Any]]:
    rv, data = rv or {}, data or {}
    out = {}
    for n in NAMES:
        if n == "d":
            continue  # never applied: missing
        out[key(n)] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": n,
                "namespace": NS,
                "uid": f"u-{n}",
                "resourceVersion": rv.get(n, "1"),
                "labels": {
                    "gitops.trainops.dev/managed": "true",
                    "gitops.trainops.dev/repository-uid": UID,
                },
                "annotations": {
                    "gitops.trainops.dev/repository": REPO,
                    "gitops.trainops.dev/repository-uid": UID,
                },
            },
            "data": {"v": data.get(n, "1")},
        }
    return out


def run(
    c: list[Checked], lv: dict[ResourceKey, dict[str, Any]], previous: Any = None, **kw: Any
) -> Comparison:
    options: dict[str, Any] = {"repository": REPO, "destination": NS, "repository_uid": UID, **kw}
    return compare(c, lv, set(lv), previous=previous, **options)


Change = Callable[
    [list[Checked], dict[ResourceKey, dict[str, Any]]],
    tuple[list[Checked], dict[ResourceKey, dict[str, Any]], dict[str, Any]],
]

CASES: dict[str, tuple[Change, set[str]]] = {
    "nothing changed (the same entries)": (lambda c, lv: (c, lv, {}), set()),
    "entries parsed again, equal": (lambda c, lv: (checked(), lv, {}), set()),
    "one live object written since (new resourceVersion, drifted)": (
        lambda c, lv: (c, live(rv={"b": "7"}, data={"b": "9"}), {}),
        {"b"},
    ),
    "one file's content changed": (lambda c, lv: (checked(values={"c": "2"}), lv, {}), {"c"}),
    "the missing object now exists": (
        lambda c, lv: (
            c,
            {
                **lv,
                key("d"): {
                    **live()[key("a")],
                    "metadata": {**live()[key("a")]["metadata"], "name": "d", "uid": "u-d"},
                    "data": {"v": "1"},
                },
            },
            {},
        ),
        {"d"},
    ),
    "a file renamed, content the same": (
        lambda c, lv: (checked(files={"a": "moved/a.yaml"}), lv, {}),
        {"a"},
    ),
    "ignoreDifferences changed: nothing reused": (
        lambda c, lv: (
            c,
            lv,
            {"ignore_differences": [{"kind": "ConfigMap", "jsonPointers": ["/data"]}]},
        ),
        set(NAMES),
    ),
}


@pytest.mark.parametrize(("change", "recomputed"), CASES.values(), ids=list(CASES))
def test_a_comparison_reusing_the_last_equals_a_full_one_and_recomputes_only_what_changed(
    change: Change, recomputed: set[str]
) -> None:
    c0, lv0 = checked(), live()
    first = run(c0, lv0)
    assert [r.status for r in first.resources] == ["Synced", "Synced", "Synced", "OutOfSync"]
    c1, lv1, options = change(c0, lv0)
    again = run(c1, lv1, previous=first.reuse, **options)
    assert again.resources == run(c1, lv1, **options).resources
    before = {r.key: r for r in first.resources}
    changed = {r.key.name for r in again.resources if r.key and r is not before[r.key]}
    assert changed == recomputed


def test_a_live_object_without_a_resource_version_is_never_reused() -> None:
    lv = live()
    for obj in lv.values():
        del obj["metadata"]["resourceVersion"]
    first = run(checked(), lv)
    again = run(checked(), lv, previous=first.reuse)
    assert not any(a is b for a, b in zip(first.resources, again.resources, strict=True) if a.live)


def test_a_renamed_file_keeps_its_state_under_the_new_path() -> None:
    first = run(checked(), live())
    again = run(checked(files={"a": "moved/a.yaml"}), live(), previous=first.reuse)
    moved = next(r for r in again.resources if r.key == key("a"))
    assert (moved.file, moved.line, moved.status) == ("moved/a.yaml", 1, "Synced")


def test_a_missing_objects_diff_is_rendered_only_when_asked_for() -> None:
    first = run(checked(), live())
    missing = first.resources[3]
    assert (missing.status, missing.message) == ("OutOfSync", "missing")
    assert missing.diff is not None
    assert "text" not in vars(missing.diff)  # nothing rendered by the comparison itself
    text = missing.diff_text
    assert text.startswith("--- live\n+++ desired\n")
    assert "+  v: '1'" in text.splitlines()
    assert vars(missing.diff)["text"] is text  # rendered once
    assert first.resources[0].diff is None and first.resources[0].diff_text == ""


def test_a_secrets_diff_shows_neither_the_value_in_git_nor_the_live_one() -> None:
    import base64

    secret = (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  token: from-git-7\n"
    )
    c = preflight(entries_from_text("s.yaml", secret))
    old = base64.b64encode(b"live-value-3").decode()
    lv = {
        ResourceKey("", "Secret", NS, "s"): {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": NS, "uid": "u-s", "resourceVersion": "4"},
            "data": {"token": old},
        }
    }
    (state,) = run(c, lv).resources
    assert state.status == "OutOfSync"
    text = state.diff_text
    assert "token:" in text
    for leaked in ("from-git-7", base64.b64encode(b"from-git-7").decode(), old, "live-value-3"):
        assert leaked not in text


# --- the state after a sync, derived from the API server's answers (compare.settled) --------


def answer(name: str, rv: str, v: str = "1") -> dict[str, Any]:
    """The object the API server answers to an apply of ConfigMap `name` (or a live one)."""
    obj = live()[key("a")]
    meta = {**obj["metadata"], "name": name, "uid": f"u-{name}", "resourceVersion": rv}
    return {**obj, "metadata": meta, "data": {"v": v}}


Sync = Callable[
    [dict[ResourceKey, dict[str, Any]]],
    tuple[dict[ResourceKey, dict[str, Any]], dict[ResourceKey, dict[str, Any] | None]],
]
"""The live objects compared → (the live objects compared, the sync's results)."""

SYNCS: dict[str, Sync] = {
    "the missing object created": lambda lv: (lv, {key("d"): answer("d", "5")}),
    "a drifted object configured": lambda lv: (
        {**lv, key("b"): answer("b", "7", v="9")},
        {key("b"): answer("b", "8")},
    ),
    "the answer still differs from Git (a webhook's)": lambda lv: (
        {**lv, key("b"): answer("b", "7", v="9")},
        {key("b"): answer("b", "8", v="webhook")},
    ),
    "an object gone from Git pruned": lambda lv: (
        {**lv, key("e"): answer("e", "3")},
        {key("e"): None},
    ),
    "a failed apply: no answer, nothing changes": lambda lv: (
        {**lv, key("b"): answer("b", "7", v="9")},
        {},
    ),
}


@pytest.mark.parametrize("sync", SYNCS.values(), ids=list(SYNCS))
def test_the_state_after_a_sync_is_what_comparing_the_answers_would_say(sync: Sync) -> None:
    """`settled` reads nothing: it gives what a full comparison with the answers in place
    gives, and its `reuse` makes the next comparison against them recompute nothing."""
    compared, results = sync(live())
    before = run(checked(), compared)
    after_live = {k: v for k, v in {**compared, **results}.items() if v is not None}
    after = settled(before, results)
    full = run(checked(), after_live)
    assert after.resources == full.resources
    again = run(checked(), after_live, previous=after.reuse)
    assert all(a is b for a, b in zip(after.resources, again.resources, strict=True))
