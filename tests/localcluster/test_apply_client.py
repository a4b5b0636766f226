"""The official Python clients (kubernetes, kubernetes_asyncio) unchanged against the server:
every patch type they send, server-side apply with field managers, and conflict Statuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import Cluster, eventually

GROUP = "clients.fidelity.example.com"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                "type": "object", "properties": {
                    "size": {"type": "integer"},
                    "mode": {"type": "string", "default": "auto"},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                              "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"}, "port": {"type": "integer"}}}},
                }}}}},
        }],
    },
}  # fmt: skip
APPLY = "application/apply-patch+yaml"


@pytest.fixture
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    api_client = cluster.api_client()
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture(scope="module")
def gadgets(cluster: Cluster) -> None:
    api_client = cluster.api_client()
    ext = client.ApiextensionsV1Api(api_client)
    try:
        ext.create_custom_resource_definition(CRD)
    except client.ApiException as e:
        if e.status != 409:
            raise

    def established() -> bool:
        crd = ext.read_custom_resource_definition(f"gadgets.{GROUP}")
        conditions = (crd.status.conditions or []) if crd.status else []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    eventually(established)
    api_client.close()


def gadget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": name},
            "spec": spec}  # fmt: skip


def deployment(replicas: int, *containers: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": c, "image": "nginx"} for c in containers]},
            },
        },
    }


def test_dict_patches_of_built_ins_are_strategic_and_lists_are_json_patches(
    api: client.ApiClient, namespace: str
) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(namespace, deployment(1, "main"))
    sidecar = {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "x"}]}}}}
    got = apps.patch_namespaced_deployment("web", namespace, sidecar)
    assert [c.name for c in got.spec.template.spec.containers] == ["main", "side"]
    got = apps.patch_namespaced_deployment(
        "web", namespace, [{"op": "replace", "path": "/spec/replicas", "value": 3}]
    )
    assert got.spec.replicas == 3


def test_server_side_apply_through_the_client_tracks_managers_and_reports_conflicts(
    api: client.ApiClient, namespace: str
) -> None:
    apps = client.AppsV1Api(api)
    apps.patch_namespaced_deployment(
        "web", namespace, deployment(2, "main"), field_manager="deployer", _content_type=APPLY
    )
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"replicas": 4}},
                                     field_manager="autoscaler")  # fmt: skip
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment(
            "web", namespace, deployment(2, "main"), field_manager="deployer", _content_type=APPLY
        )
    status = json.loads(err.value.body)
    assert (err.value.status, status["reason"]) == (409, "Conflict")
    assert status["details"]["causes"] == [{
        "reason": "FieldManagerConflict",
        "message": 'conflict with "autoscaler" using apps/v1',
        "field": ".spec.replicas",
    }]  # fmt: skip
    got = apps.patch_namespaced_deployment(
        "web", namespace, deployment(2, "main"), field_manager="deployer", force=True,
        _content_type=APPLY,
    )  # fmt: skip
    assert got.spec.replicas == 2
    owned = {(m.manager, m.operation): m.fields_v1 for m in got.metadata.managed_fields}
    assert "f:replicas" in owned[("deployer", "Apply")]["f:spec"]
    autoscaler = owned.get(("autoscaler", "Update")) or {}
    assert "f:replicas" not in autoscaler.get("f:spec", {})


def test_custom_objects_merge_patch_and_apply_by_list_map_keys(
    api: client.ApiClient, namespace: str, gadgets: None
) -> None:
    custom = client.CustomObjectsApi(api)
    args = (GROUP, "v1", namespace, "gadgets")
    custom.patch_namespaced_custom_object(
        *args, "g", gadget("g", size=1, ports=[{"name": "http", "port": 80}]),
        field_manager="one", _content_type=APPLY,
    )  # fmt: skip
    custom.patch_namespaced_custom_object(
        *args, "g", gadget("g", ports=[{"name": "grpc", "port": 90}]),
        field_manager="two", _content_type=APPLY,
    )  # fmt: skip
    got = custom.patch_namespaced_custom_object(*args, "g", {"spec": {"size": 5}})
    assert got["spec"] == {
        "size": 5,
        "mode": "auto",
        "ports": [{"name": "http", "port": 80}, {"name": "grpc", "port": 90}],
    }
    managers = {(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]}
    assert {("one", "Apply"), ("two", "Apply")} <= managers


async def test_the_async_client_applies_custom_objects(
    cluster: Cluster, namespace: str, gadgets: None
) -> None:
    from kubernetes_asyncio import client as aclient

    api_client = await cluster.async_api_client()
    try:
        custom = aclient.CustomObjectsApi(api_client)
        args = (GROUP, "v1", namespace, "gadgets", "a")
        for size in (1, 2):  # create (201), then update (200)
            await custom.patch_namespaced_custom_object(
                *args, gadget("a", size=size), field_manager="trainops", force=True,
                _content_type=APPLY,
            )  # fmt: skip
        got = await custom.get_namespaced_custom_object(*args)
        assert got["spec"] == {"size": 2, "mode": "auto"}
        assert [(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]] == [
            ("trainops", "Apply")
        ]
    finally:
        await api_client.close()
