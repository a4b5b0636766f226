"""CustomResourceDefinitions and the custom resources they define."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.localcluster._http import Http, status_of
from tests.support.cluster import eventually
from tests.support.manifests import crd_files, documents

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
REPO = Path(__file__).resolve().parents[2]


def _crd(
    group: str, scope: str, *, status: bool = True, versions: tuple[str, ...] = ("v1",)
) -> dict[str, Any]:
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "listKind": "WidgetList",
            },
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": schema,
                    **({"subresources": {"status": {}}} if status else {}),
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                }
                for i, v in enumerate(versions)
            ],
        },
    }


@pytest.fixture
def widgets(http: Http) -> Iterator[str]:
    """A namespaced Widget CRD with a status subresource in a fresh group; yields the group."""
    group = f"w{uuid.uuid4().hex[:8]}.example.com"
    reply = http.post(CRDS, _crd(group, "Namespaced", versions=("v1", "v1beta1")))
    assert reply.status == 201, reply.data
    yield group
    http.delete(f"{CRDS}/widgets.{group}")


def test_custom_resources_support_crud(http: Http, namespace: str, widgets: str) -> None:
    path = f"/apis/{widgets}/v1/namespaces/{namespace}/widgets"
    created = http.post(
        path,
        {
            "apiVersion": f"{widgets}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        },
    )
    assert created.status == 201, created.data
    assert created.json()["metadata"]["generation"] == 1
    assert http.get(f"{path}/w").json()["spec"] == {"size": 1}
    assert [i["metadata"]["name"] for i in http.get(path).json()["items"]] == ["w"]
    assert http.get(path).json()["kind"] == "WidgetList"
    assert http.delete(f"{path}/w").status == 200
    assert http.get(f"{path}/w").status == 404


def test_the_main_endpoint_ignores_status_and_the_status_endpoint_ignores_the_rest(
    http: Http, namespace: str, widgets: str
) -> None:
    path = f"/apis/{widgets}/v1/namespaces/{namespace}/widgets"
    created = http.post(
        path, {"metadata": {"name": "s"}, "spec": {"size": 1}, "status": {"ready": True}}
    ).json()
    assert "status" not in created
    status = http.patch(f"{path}/s/status", {"spec": {"size": 9}, "status": {"ready": True}}).json()
    assert status["spec"] == {"size": 1} and status["status"] == {"ready": True}
    assert status["metadata"]["generation"] == 1
    main = http.patch(f"{path}/s", {"spec": {"size": 2}, "status": {"ready": False}}).json()
    assert main["spec"] == {"size": 2} and main["status"] == {"ready": True}
    assert main["metadata"]["generation"] == 2


def test_server_side_apply_to_the_status_endpoint_owns_the_status(
    http: Http, namespace: str, widgets: str
) -> None:
    path = f"/apis/{widgets}/v1/namespaces/{namespace}/widgets"
    http.post(f"{path}?fieldManager=maker", {"metadata": {"name": "ssa"}, "spec": {"size": 1}})
    applied = {
        "apiVersion": f"{widgets}/v1",
        "kind": "Widget",
        "metadata": {"name": "ssa"},
        "status": {"ready": True},
    }
    reply = http.patch(
        f"{path}/ssa/status?fieldManager=ctrl",
        applied,
        content_type="application/apply-patch+yaml",
    )
    assert reply.status == 200, reply.data
    obj = reply.json()
    assert obj["status"] == {"ready": True} and obj["spec"] == {"size": 1}
    [entry] = [e for e in obj["metadata"]["managedFields"] if e["manager"] == "ctrl"]
    assert (entry["operation"], entry.get("subresource")) == ("Apply", "status")
    assert entry["fieldsV1"] == {"f:status": {"f:ready": {}}}


def test_mutating_webhooks_see_the_schema_defaults(http: Http, namespace: str) -> None:
    group = f"d{uuid.uuid4().hex[:8]}.example.com"
    crd = _crd(group, "Namespaced")
    crd["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {"mode": {"type": "string", "default": "fast"}},
                }
            },
        }
    }
    assert http.post(CRDS, crd).status == 201
    hooks = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
    # The webhook is called only when it sees the default; nothing listens on its URL.
    config = {
        "metadata": {"name": f"sees-defaults-{group}"},
        "webhooks": [
            {
                "name": "sees.defaults.example.com",
                "clientConfig": {"url": "https://127.0.0.1:1/mutate"},
                "rules": [
                    {
                        "apiGroups": [group],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": ["widgets"],
                    }
                ],
                "matchConditions": [
                    {
                        "name": "defaulted",
                        "expression": 'has(object.spec.mode) && object.spec.mode == "fast"',
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }
    assert http.post(hooks, config).status == 201
    try:
        path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
        explicit = http.post(path, {"metadata": {"name": "slow"}, "spec": {"mode": "slow"}})
        assert explicit.status == 201, explicit.data
        defaulted = http.post(path, {"metadata": {"name": "plain"}, "spec": {}})
        assert defaulted.status == 500, defaulted.data
        assert (
            'failed calling webhook "sees.defaults.example.com"' in status_of(defaulted)["message"]
        )
    finally:
        http.delete(f"{hooks}/sees-defaults-{group}")
        http.delete(f"{CRDS}/widgets.{group}")


def test_a_put_of_a_custom_resource_needs_a_resource_version(
    http: Http, namespace: str, widgets: str
) -> None:
    path = f"/apis/{widgets}/v1/namespaces/{namespace}/widgets"
    http.post(path, {"metadata": {"name": "r"}, "spec": {}})
    reply = http.put(
        f"{path}/r",
        {
            "apiVersion": f"{widgets}/v1",
            "kind": "Widget",
            "metadata": {"name": "r"},
            "spec": {"size": 3},
        },
    )
    body = status_of(reply)
    assert reply.status == 422
    assert (
        body["message"]
        == "Widget."
        + widgets
        + ' "r" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'
    )


def test_every_served_version_shows_the_same_object(
    http: Http, namespace: str, widgets: str
) -> None:
    http.post(
        f"/apis/{widgets}/v1/namespaces/{namespace}/widgets",
        {"metadata": {"name": "v"}, "spec": {"size": 5}},
    )
    beta = http.get(f"/apis/{widgets}/v1beta1/namespaces/{namespace}/widgets/v").json()
    assert beta["apiVersion"] == f"{widgets}/v1beta1" and beta["spec"] == {"size": 5}


def test_cluster_scoped_custom_resources_have_no_namespace(http: Http) -> None:
    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    assert http.post(CRDS, _crd(group, "Cluster", status=False)).status == 201
    path = f"/apis/{group}/v1/widgets"
    created = http.post(path, {"metadata": {"name": "global"}, "spec": {"size": 1}}).json()
    assert "namespace" not in created["metadata"]
    assert http.get(f"/apis/{group}/v1/namespaces/default/widgets/global").status == 404
    changed = http.patch(f"{path}/global", {"status": {"x": 1}}).json()
    assert changed["status"] == {"x": 1} and changed["metadata"]["generation"] == 2
    http.delete(f"{CRDS}/widgets.{group}")


def test_deleting_a_crd_deletes_its_custom_resources_first(http: Http, namespace: str) -> None:
    group = f"d{uuid.uuid4().hex[:8]}.example.com"
    crd = http.post(CRDS, _crd(group, "Namespaced")).json()
    assert "customresourcecleanup.apiextensions.k8s.io" in crd["metadata"]["finalizers"]
    http.post(f"/apis/{group}/v1/namespaces/{namespace}/widgets", {"metadata": {"name": "doomed"}})
    http.delete(f"{CRDS}/widgets.{group}")
    eventually(lambda: http.get(f"{CRDS}/widgets.{group}").status == 404)
    assert http.get(f"/apis/{group}/v1/namespaces/{namespace}/widgets/doomed").status == 404


@pytest.mark.parametrize("crd_file", crd_files(), ids=lambda p: p.name)
def test_the_shipped_crds_are_established_and_serve_their_kind(
    http: Http, namespace: str, crd_file: Path
) -> None:
    [crd] = documents(crd_file)
    name = crd["metadata"]["name"]
    if http.get(f"{CRDS}/{name}").status == 404:
        reply = http.post(CRDS, crd)
        assert reply.status == 201, reply.data
    spec = crd["spec"]
    version = next(v["name"] for v in spec["versions"] if v["storage"])
    eventually(lambda: http.get(f"/apis/{spec['group']}/{version}").status == 200)
    listed = http.get(
        f"/apis/{spec['group']}/{version}/namespaces/{namespace}/{spec['names']['plural']}"
    )
    assert listed.json()["kind"] == spec["names"]["kind"] + "List"


def test_deleting_a_crd_ends_the_watches_on_its_resources(http: Http, namespace: str) -> None:
    group = f"x{uuid.uuid4().hex[:8]}.example.com"
    assert http.post(CRDS, _crd(group, "Namespaced")).status == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    http.post(path, {"metadata": {"name": "seen"}})
    stream = http.pool.request(
        "GET",
        f"{http.cluster.url}{path}?watch=1&timeoutSeconds=60",
        headers={"Authorization": f"Bearer {http.cluster.token}"},
        preload_content=False,
        timeout=urllib3.Timeout(connect=5, read=20),
    )
    chunks = stream.stream(None)
    buffer = b""
    while b"\n" not in buffer:
        buffer += next(chunks)
    first = json.loads(buffer.split(b"\n", 1)[0])
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "seen")
    http.delete(f"{CRDS}/widgets.{group}")
    buffer = buffer.split(b"\n", 1)[1] + b"".join(chunks)  # ends when the server closes
    stream.release_conn()
    rest = [json.loads(line) for line in buffer.splitlines() if line.strip()]
    assert [e["type"] for e in rest] in (["DELETED"], [])


def test_selectable_fields_of_a_crd_work_in_field_selectors(http: Http, namespace: str) -> None:
    group = f"s{uuid.uuid4().hex[:8]}.example.com"
    crd = _crd(group, "Namespaced")
    crd["spec"]["versions"][0]["selectableFields"] = [{"jsonPath": ".spec.color"}]
    assert http.post(CRDS, crd).status == 201
    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    for name, color in (("r", "red"), ("b", "blue")):
        http.post(path, {"metadata": {"name": name}, "spec": {"color": color}})
    items = http.get(f"{path}?fieldSelector=spec.color%3Dblue").json()["items"]
    assert [i["metadata"]["name"] for i in items] == ["b"]
    unknown = http.get(f"{path}?fieldSelector=spec.size%3D1")
    assert unknown.status == 400
    assert status_of(unknown)["message"].startswith(
        '"spec.size" is not a known field selector: only "metadata.name", "metadata.namespace", "spec.color"'
    )
    http.delete(f"{CRDS}/widgets.{group}")
