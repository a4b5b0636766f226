"""OpenAPI documents: what kubectl needs to validate server-side and to compute apply patches."""

from __future__ import annotations

import json

import pytest

from localcluster.api.types import ResourceInfo
from localcluster.schema import openapi

POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True, "PodList", subresources=("status",))
NAMESPACE = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False, "NamespaceList")
DEPLOYMENT = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True)
WIDGET_SCHEMA = {
    "type": "object",
    "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
}


def widget(resource_version: str = "1", schema: dict | None = None) -> ResourceInfo:
    crd = {"metadata": {"uid": "u-1", "resourceVersion": resource_version}}
    version = {"name": "v1", "schema": {"openAPIV3Schema": schema or WIDGET_SCHEMA}}
    return ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True, "WidgetList",
        crd=crd, crd_version=version,
    )  # fmt: skip


RESOURCES = [POD, NAMESPACE, DEPLOYMENT, widget()]


def patch_ops_for(doc: dict, kind: str) -> list[dict]:
    return [
        item["patch"]
        for item in doc["paths"].values()
        if "patch" in item and item["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind
    ]


def test_index_lists_every_group_version_with_a_hashed_url() -> None:
    index = openapi.openapi_v3_index(RESOURCES)
    assert set(index["paths"]) == {"api/v1", "apis/apps/v1", "apis/example.com/v1"}
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert url.startswith("/openapi/v3/api/v1?hash=")
    assert len(url.split("hash=")[1]) == 128


def test_hash_changes_when_a_crd_changes_and_only_its_group_version() -> None:
    before = openapi.openapi_v3_index([POD, widget("1")])["paths"]
    after = openapi.openapi_v3_index(
        [POD, widget("2", {"type": "object", "properties": {"spec": {"type": "string"}}})]
    )["paths"]
    assert before["api/v1"] == after["api/v1"]
    assert before["apis/example.com/v1"] != after["apis/example.com/v1"]


@pytest.mark.parametrize(
    ("group_version", "kind"),
    [
        pytest.param("v1", "Pod", id="core-namespaced"),
        pytest.param("v1", "Namespace", id="core-cluster-scoped"),
        pytest.param("apps/v1", "Deployment", id="group"),
        pytest.param("example.com/v1", "Widget", id="custom-resource"),
    ],
)
def test_every_patch_operation_declares_field_validation(group_version: str, kind: str) -> None:
    doc = openapi.openapi_v3_document(group_version, RESOURCES)
    assert doc is not None
    ops = patch_ops_for(doc, kind)
    assert ops, "kubectl needs a patch operation to switch to server-side validation"
    for op in ops:
        names = {p["name"] for p in op["parameters"] if p["in"] == "query"}
        assert "fieldValidation" in names


def test_built_in_schema_keeps_strategic_merge_keys_for_client_side_apply() -> None:
    doc = openapi.openapi_v3_document("v1", RESOURCES)
    assert doc is not None
    schemas = doc["components"]["schemas"]
    pod = schemas["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "kind": "Pod", "version": "v1"}]
    containers = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["items"] == {"$ref": "#/components/schemas/io.k8s.api.core.v1.Container"}
    assert schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["format"] == "int-or-string"


def test_every_reference_resolves_inside_the_document() -> None:
    doc = openapi.openapi_v3_document("apps/v1", RESOURCES)
    assert doc is not None
    text = json.dumps(doc)
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs <= set(doc["components"]["schemas"])
    assert '"null"' not in text


def test_custom_resource_schema_is_the_crd_schema_with_standard_metadata() -> None:
    doc = openapi.openapi_v3_document("apis/example.com/v1", RESOURCES)
    assert doc is not None
    schema = doc["components"]["schemas"]["com.example.v1.Widget"]
    assert schema["properties"]["spec"] == WIDGET_SCHEMA["properties"]["spec"]
    assert schema["properties"]["metadata"] == {
        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    }
    patch = patch_ops_for(doc, "Widget")[0]
    assert "application/strategic-merge-patch+json" not in patch["requestBody"]["content"]


def test_unknown_group_version_has_no_document() -> None:
    assert openapi.openapi_v3_document("nope.io/v1", RESOURCES) is None


def test_swagger_v2_document_uses_definitions_references() -> None:
    doc = openapi.openapi_v2(RESOURCES)
    assert doc["swagger"] == "2.0"
    assert "io.k8s.api.apps.v1.Deployment" in doc["definitions"]
    assert "#/components/" not in json.dumps(doc)
