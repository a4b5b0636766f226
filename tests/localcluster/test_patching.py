"""PATCH bodies: JSON patch, JSON merge patch and strategic merge patch as the server applies them."""

from __future__ import annotations

import json

import pytest

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.write import patching

DEPLOYMENT = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True)
POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True)
WIDGET = ResourceInfo(
    "example.com", "v1", "Widget", "widgets", "widget", True, crd={}, crd_version={"name": "v1"}
)

JSON = "application/json-patch+json"
MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"


def pod(**spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


BASE_POD = pod(
    containers=[
        {
            "name": "a",
            "image": "busybox",
            "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
            "ports": [{"containerPort": 80}],
            "args": ["one", "two"],
            "volumeMounts": [{"name": "v", "mountPath": "/data"}],
        },
        {"name": "b", "image": "nginx"},
    ],
    volumes=[{"name": "v", "emptyDir": {}}],
    tolerations=[{"key": "k1"}],
)


def apply(info: ResourceInfo, original: dict, patch: object, ctype: str) -> dict:
    return patching.apply_patch(info, original, json.dumps(patch).encode(), ctype)


def containers(obj: dict) -> dict[str, dict]:
    return {c["name"]: c for c in obj["spec"]["containers"]}


@pytest.mark.parametrize(
    ("patch", "check"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "a", "image": "busybox:2"}]}},
            lambda o: containers(o)["a"]["image"] == "busybox:2"
            and containers(o)["a"]["env"][1]["value"] == "2"
            and "b" in containers(o),
            id="containers-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "c", "image": "redis"}]}},
            lambda o: [c["name"] for c in o["spec"]["containers"]] == ["a", "b", "c"],
            id="new-container-appended",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}},
            lambda o: list(containers(o)) == ["a"],
            id="delete-directive-removes-item",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "3"}]}]}},
            lambda o: containers(o)["a"]["env"] == [
                {"name": "X", "value": "1"}, {"name": "Y", "value": "3"}],
            id="env-merge-by-name",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 81}]}]}},
            lambda o: [p["containerPort"] for p in containers(o)["a"]["ports"]] == [80, 81],
            id="ports-merge-by-container-port",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a", "args": ["three"]}]}},
            lambda o: containers(o)["a"]["args"] == ["three"],
            id="atomic-list-replaced",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "k2"}]}},
            lambda o: o["spec"]["tolerations"] == [{"key": "k2"}],
            id="tolerations-replaced",
        ),
        pytest.param(
            {"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "x"}]}},
            lambda o: o["spec"]["containers"] == [{"name": "z", "image": "x"}],
            id="replace-directive-on-list",
        ),
        pytest.param(
            {"spec": {"volumes": [{"name": "v", "$patch": "replace", "configMap": {"name": "c"}}]}},
            lambda o: o["spec"]["volumes"] == [{"name": "v", "configMap": {"name": "c"}}],
            id="replace-directive-on-map",
        ),
        pytest.param(
            {"spec": {"volumes": [{"name": "v", "configMap": {"name": "c"}}],
                      "$setElementOrder/volumes": [{"name": "v"}],
                      "$retainKeys": ["containers", "volumes"]}},
            lambda o: "tolerations" not in o["spec"] and o["spec"]["volumes"][0]["configMap"],
            id="retain-keys-drops-unlisted",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                      "containers": [{"name": "a", "image": "busybox:3"}]}},
            lambda o: [c["name"] for c in o["spec"]["containers"]] == ["b", "a"],
            id="set-element-order",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["b"]}},
            lambda o: o["metadata"]["finalizers"] == ["a", "b"],
            id="finalizers-union",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            lambda o: o["metadata"]["finalizers"] == [],
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {"metadata": {"labels": {"x": None, "y": "2"}}},
            lambda o: o["metadata"]["labels"] == {"y": "2"},
            id="null-deletes-map-key",
        ),
    ],
)  # fmt: skip
def test_strategic_merge_follows_the_schema(patch: dict, check) -> None:
    original = json.loads(json.dumps(BASE_POD))
    original["metadata"].update(labels={"x": "1"}, finalizers=["a"])
    result = apply(POD, original, patch, SMP)
    assert check(result), json.dumps(result, indent=1)
    assert original["metadata"]["labels"] == {"x": "1"}, "the original is never mutated"


def test_strategic_merge_without_merge_key_is_a_bad_request() -> None:
    with pytest.raises(ApiError) as err:
        apply(POD, BASE_POD, {"spec": {"containers": [{"image": "x"}]}}, SMP)
    assert err.value.code == 400
    assert "does not contain declared merge key: name" in err.value.message


def test_strategic_merge_on_a_custom_resource_is_unsupported_media_type() -> None:
    with pytest.raises(ApiError) as err:
        apply(WIDGET, {"spec": {}}, {"spec": {"a": 1}}, SMP)
    assert (err.value.code, err.value.reason) == (415, "UnsupportedMediaType")
    assert "application/merge-patch+json" in err.value.message
    assert "strategic" not in err.value.message


@pytest.mark.parametrize(
    ("original", "patch", "expected"),
    [
        pytest.param({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}, {"a": {"c": 2, "d": 3}},
                     id="nested-merge-and-delete"),
        pytest.param({"l": [1, 2]}, {"l": [3]}, {"l": [3]}, id="lists-replaced"),
        pytest.param({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}, id="scalar-becomes-map"),
    ],
)  # fmt: skip
def test_merge_patch_follows_rfc_7386(original: dict, patch: dict, expected: dict) -> None:
    assert apply(WIDGET, original, patch, MERGE) == expected


def test_json_patch_applies_operations_in_order() -> None:
    ops = [
        {"op": "add", "path": "/metadata/labels", "value": {"a": "1"}},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "test", "path": "/spec/replicas", "value": 3},
        {"op": "remove", "path": "/spec/paused"},
    ]
    original = {"metadata": {"name": "d"}, "spec": {"replicas": 1, "paused": True}}
    assert apply(DEPLOYMENT, original, ops, JSON) == {
        "metadata": {"name": "d", "labels": {"a": "1"}},
        "spec": {"replicas": 3},
    }


@pytest.mark.parametrize(
    ("body", "ctype", "code"),
    [
        pytest.param(b"{not json", MERGE, 400, id="undecodable"),
        pytest.param(b"[1]", MERGE, 400, id="merge-patch-not-an-object"),
        pytest.param(b'{"op": "add"}', JSON, 400, id="json-patch-not-a-list"),
        pytest.param(b'[{"op": "remove", "path": "/nope"}]', JSON, 422, id="missing-path"),
        pytest.param(b'[{"op": "test", "path": "/a", "value": 2}]', JSON, 422, id="failed-test"),
        pytest.param(b"{}", "application/xml", 415, id="unknown-type"),
    ],
)
def test_bad_patches_get_the_real_status_codes(body: bytes, ctype: str, code: int) -> None:
    with pytest.raises(ApiError) as err:
        patching.apply_patch(DEPLOYMENT, {"a": 1}, body, ctype)
    assert err.value.code == code


def test_set_element_order_interleaves_server_only_items_by_their_live_position() -> None:
    original = pod(containers=[{"name": n, "image": "x"} for n in ("a", "b", "c", "d")])
    patch = {"spec": {"$setElementOrder/containers": [{"name": "d"}, {"name": "b"}],
                      "containers": [{"name": "b", "image": "y"}]}}  # fmt: skip
    result = apply(POD, original, patch, SMP)
    # d and b follow the patch order; a and c (server only) go before an item they preceded live.
    assert [c["name"] for c in result["spec"]["containers"]] == ["a", "c", "d", "b"]
