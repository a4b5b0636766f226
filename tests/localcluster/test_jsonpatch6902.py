"""JSON patch as kube-apiserver v1.32 applies it (evanphx/json-patch v4 semantics) and decodes
it (strict member checks, Go's type-error wording). Each case was run against kube-apiserver
v1.32.13 (hack/reference-cluster) through `kubectl patch --type=json`; the fidelity suite's
`json-patch` workflow keeps checking them there."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.write import jsonpatch6902 as jp

DOC = {
    "data": {"color": "blue", "num": "1"},
    "metadata": {"finalizers": ["a/b", "c/d"], "labels": {"app": "web"}},
}

_GONE = object()  # a top-level member the patch leaves out

APPLIED = {
    "replace of a missing member adds it": (
        [{"op": "replace", "path": "/data/new", "value": "x"}],
        {"data": {"color": "blue", "num": "1", "new": "x"}},
    ),
    "copy from a missing member adds null": (
        [{"op": "copy", "from": "/data/nosuch", "path": "/data/x"}],
        {"data": {"color": "blue", "num": "1", "x": None}},
    ),
    "a path without its leading slash loses its first segment": (
        [{"op": "replace", "path": "data/color", "value": "x"}],
        {"color": "x"},
    ),
    "test of a missing member against null passes": (
        [{"op": "test", "path": "/data/nosuch", "value": None}],
        {},
    ),
    "dash appends": (
        [{"op": "add", "path": "/metadata/finalizers/-", "value": "e/f"}],
        {"metadata": {"finalizers": ["a/b", "c/d", "e/f"], "labels": {"app": "web"}}},
    ),
    "a negative index counts from the end (add: of the grown array)": (
        [{"op": "add", "path": "/metadata/finalizers/-1", "value": "e/f"}],
        {"metadata": {"finalizers": ["a/b", "c/d", "e/f"], "labels": {"app": "web"}}},
    ),
    "a negative index removes from the end": (
        [{"op": "remove", "path": "/metadata/finalizers/-1"}],
        {"metadata": {"finalizers": ["a/b"], "labels": {"app": "web"}}},
    ),
    "move, escaped keys": (
        [{"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/a~1b~0c"}],
        {"metadata": {"finalizers": ["a/b", "c/d"], "labels": {"a/b~c": "web"}}},
    ),
    "replace of the whole document": (
        [{"op": "replace", "path": "", "value": {"kind": "X"}}],
        {"kind": "X", "data": _GONE, "metadata": _GONE},
    ),
    "no operations": ([], {}),
}


@pytest.mark.parametrize(("ops", "changes"), APPLIED.values(), ids=APPLIED)
def test_operations_apply_as_kube_apiserver_applies_them(
    ops: list[Any], changes: dict[str, Any]
) -> None:
    """`changes`: the top-level members that differ from DOC afterwards."""
    expected = {k: v for k, v in {**DOC, **changes}.items() if v is not _GONE}
    assert jp.apply(DOC, ops) == expected
    assert DOC["data"] == {"color": "blue", "num": "1"}  # the input is not modified


FAILING = {
    "test of a different value": [{"op": "test", "path": "/data/color", "value": "red"}],
    "test compares scalars as written": [{"op": "test", "path": "/data/num", "value": 1}],
    "remove of a missing member": [{"op": "remove", "path": "/data/nosuch"}],
    "move from a missing member": [{"op": "move", "from": "/data/nosuch", "path": "/data/x"}],
    "a missing intermediate member": [{"op": "add", "path": "/nosuch/deeper", "value": 1}],
    "a scalar as intermediate": [{"op": "remove", "path": "/data/color/0"}],
    "an unknown operation": [{"op": "frobnicate", "path": "/data/color"}],
    "no path": [{"op": "add", "value": "x"}],
    "replace past the end": [{"op": "replace", "path": "/metadata/finalizers/5", "value": "x"}],
    "an index that is not a number": [{"op": "add", "path": "/metadata/finalizers/x", "value": 1}],
    "add at an empty path": [{"op": "add", "path": "", "value": {}}],
    "a null operation": [None],
}


@pytest.mark.parametrize("ops", FAILING.values(), ids=FAILING)
def test_operations_that_fail(ops: list[Any]) -> None:
    with pytest.raises(jp.PatchFailed):
        jp.apply(DOC, ops)


def test_strict_decoding_reports_unknown_and_duplicate_members_in_body_order() -> None:
    body = b'[{"op":"add","extra":1,"op":"add","path":"/a","value":1},{"zz":1,"op":"test","Op":2}]'
    ops, errors = jp.decode(body)
    assert ops[0] == {"op": "add", "extra": 1, "path": "/a", "value": 1}
    assert errors == [
        'unknown field "[0].extra"',
        'duplicate field "[0].op"',
        'unknown field "[1].zz"',
        'unknown field "[1].Op"',
    ]


DECODE_ERRORS = {
    "an object": (b'{"op":"add"}', "object into Go value of type []handlers.jsonPatchOp"),
    "a number item": (b"[5]", "number into Go value of type handlers.jsonPatchOp"),
    "op not a string": (
        b'[{"op":1,"path":"/a"}]',
        "number into Go struct field jsonPatchOp.op of type string",
    ),
    "from not a string": (
        b'[{"op":"copy","path":"/a","from":[]}]',
        "array into Go struct field jsonPatchOp.from of type string",
    ),
}


@pytest.mark.parametrize(("body", "words"), DECODE_ERRORS.values(), ids=DECODE_ERRORS)
def test_type_errors_are_worded_as_gos_decoder(body: bytes, words: str) -> None:
    with pytest.raises(jp.DecodeError) as caught:
        jp.decode(body)
    assert str(caught.value) == f"json: cannot unmarshal {words}"


def test_without_strict_decoding_only_the_patch_type_is_checked() -> None:
    with pytest.raises(jp.DecodeError, match=r"into Go value of type jsonpatch\.Patch\Z"):
        jp.decode(b'{"op":"add"}', strict=False)
    assert jp.decode(b'[{"op":1,"extra":2}]', strict=False) == ([{"op": 1, "extra": 2}], [])
    assert jp.decode(b"null") == ([], [])
    assert jp.decode(b"[]") == ([], [])
