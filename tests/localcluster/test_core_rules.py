"""Pure rules of the core: path parsing, metadata, generation, defaults, CRD status, discovery."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.api.registry import BUILTINS, Registry, crd_infos, crd_status
from localcluster.api.types import ApiError
from localcluster.http import discovery
from localcluster.http.routing import Target, parse_path
from localcluster.write import defaults, objectmeta

PODS = next(i for i in BUILTINS if i.plural == "pods")
DEPLOYMENTS = next(i for i in BUILTINS if i.plural == "deployments")
NAMESPACES = next(i for i in BUILTINS if i.plural == "namespaces")

PATHS = {
    "core group version": ("/api/v1", Target("", "v1")),
    "cluster collection": ("/api/v1/nodes", Target("", "v1", "nodes")),
    "namespaces": ("/api/v1/namespaces", Target("", "v1", "namespaces")),
    "one namespace": ("/api/v1/namespaces/ns1", Target("", "v1", "namespaces", name="ns1")),
    "namespace finalize": (
        "/api/v1/namespaces/ns1/finalize",
        Target("", "v1", "namespaces", name="ns1", subresource="finalize"),
    ),
    "namespaced collection": (
        "/api/v1/namespaces/ns1/pods",
        Target("", "v1", "pods", namespace="ns1"),
    ),
    "namespaced object": (
        "/api/v1/namespaces/ns1/pods/p",
        Target("", "v1", "pods", namespace="ns1", name="p"),
    ),
    "subresource": (
        "/api/v1/namespaces/ns1/pods/p/log",
        Target("", "v1", "pods", namespace="ns1", name="p", subresource="log"),
    ),
    "group resource": (
        "/apis/apps/v1/namespaces/n/deployments/d",
        Target("apps", "v1", "deployments", namespace="n", name="d"),
    ),
    "legacy watch": (
        "/api/v1/watch/namespaces/n/pods",
        Target("", "v1", "pods", namespace="n", legacy_watch=True),
    ),
    "all namespaces": ("/apis/apps/v1/deployments", Target("apps", "v1", "deployments")),
}


@pytest.mark.parametrize(("path", "target"), list(PATHS.values()), ids=list(PATHS))
def test_paths_resolve_to_their_resource(path: str, target: Target) -> None:
    assert parse_path(path) == target


@pytest.mark.parametrize(
    "path", ["/healthz", "/apis/apps", "/api/v1/namespaces/n/pods/p/log/extra", "/api/v1//pods"]
)
def test_non_resource_paths_are_not_resolved(path: str) -> None:
    assert parse_path(path) is None


def _create(info: Any, obj: dict[str, Any]) -> dict[str, Any]:
    return objectmeta.prepare_create(
        info, obj, namespace="ns", now="2026-01-01T00:00:00Z", uid="u-1", suffix="abcde"
    )


def test_create_sets_server_owned_metadata_and_drops_client_values() -> None:
    obj = _create(
        PODS,
        {
            "metadata": {
                "generateName": "job-",
                "resourceVersion": "7",
                "uid": "mine",
                "deletionTimestamp": "x",
            }
        },
    )
    assert obj["metadata"] == {
        "generateName": "job-",
        "name": "job-abcde",
        "namespace": "ns",
        "uid": "u-1",
        "creationTimestamp": "2026-01-01T00:00:00Z",
    }
    assert (obj["apiVersion"], obj["kind"]) == ("v1", "Pod")


def test_generation_starts_at_one_for_kinds_that_track_it() -> None:
    assert _create(DEPLOYMENTS, {"metadata": {"name": "d"}})["metadata"]["generation"] == 1
    assert (
        "generation" not in _create(PODS, {"metadata": {"name": "p", "generation": 5}})["metadata"]
    )


@pytest.mark.parametrize(
    ("change", "generation"),
    [
        ({"spec": {"replicas": 2}}, 2),
        ({"metadata": {"labels": {"a": "b"}}}, 1),
        ({"status": {"replicas": 1}}, 1),
    ],
    ids=["spec change", "label change", "status change"],
)
def test_update_bumps_generation_only_for_spec_changes(
    change: dict[str, Any], generation: int
) -> None:
    old = {
        "metadata": {"name": "d", "uid": "u", "generation": 1, "creationTimestamp": "t"},
        "spec": {"replicas": 1},
        "status": {},
    }
    new: dict[str, Any] = {
        "metadata": {"name": "d", **change.get("metadata", {})},
        "spec": change.get("spec", old["spec"]),
        "status": change.get("status", {}),
    }
    updated = objectmeta.prepare_update(DEPLOYMENTS, old, new)
    assert updated["metadata"]["generation"] == generation
    assert (updated["metadata"]["uid"], updated["metadata"]["creationTimestamp"]) == ("u", "t")


def test_finalizers_cannot_be_added_to_an_object_being_deleted() -> None:
    old = {"metadata": {"name": "p", "deletionTimestamp": "t", "finalizers": ["a"]}}
    with pytest.raises(ApiError) as info:
        objectmeta.prepare_update(PODS, old, {"metadata": {"name": "p", "finalizers": ["a", "b"]}})
    assert info.value.code == 422


@pytest.mark.parametrize(
    ("info", "name", "valid"),
    [
        (PODS, "a.b-c", True),
        (PODS, "A", False),
        (NAMESPACES, "a.b", False),
        (NAMESPACES, "a-b", True),
        (PODS, "x" * 254, False),
    ],
    ids=["subdomain", "upper case", "dotted namespace", "label namespace", "too long"],
)
def test_names_are_checked_per_resource(info: Any, name: str, valid: bool) -> None:
    assert (objectmeta.name_causes(info, name) == []) is valid


def test_namespaces_always_carry_their_name_label() -> None:
    ns = defaults.default_object(
        NAMESPACES,
        {"metadata": {"name": "n", "labels": {"kubernetes.io/metadata.name": "other"}}},
        create=True,
    )
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "n"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]}


@pytest.mark.parametrize(
    ("resources", "qos"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "1"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
    ],
    ids=["no resources", "requests only", "limits only"],
)
def test_pods_start_pending_with_their_qos_class(resources: dict[str, Any], qos: str) -> None:
    pod = {"spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}
    assert defaults.initial_status(PODS, pod)["status"] == {"phase": "Pending", "qosClass": qos}


def test_the_status_endpoint_changes_only_status() -> None:
    old = {"metadata": {"name": "x", "labels": {"a": "1"}}, "spec": {"v": 1}, "status": {"s": 1}}
    new = {
        "metadata": {"name": "x", "labels": {"a": "2"}, "resourceVersion": "9"},
        "spec": {"v": 2},
        "status": {"s": 2},
    }
    assert defaults.status_only(old, new) == {
        "metadata": {"name": "x", "labels": {"a": "1"}, "resourceVersion": "9"},
        "spec": {"v": 1},
        "status": {"s": 2},
    }


CRD = {
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget"},
        "versions": [
            {"name": "v1beta1", "served": True, "storage": False},
            {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
            {"name": "v1alpha1", "served": False, "storage": False},
        ],
    },
}


def test_crd_status_accepts_names_and_records_the_stored_version() -> None:
    status = crd_status(CRD, "2026-01-01T00:00:00Z")
    assert status["acceptedNames"] == {
        "plural": "widgets",
        "kind": "Widget",
        "singular": "widget",
        "listKind": "WidgetList",
    }
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [
        ("NamesAccepted", "True"),
        ("Established", "True"),
    ]
    assert status["storedVersions"] == ["v1"]


def test_served_crd_versions_become_resources_in_preference_order() -> None:
    infos = crd_infos(CRD)
    assert [(i.version, i.subresources) for i in infos] == [("v1beta1", ()), ("v1", ("status",))]
    registry = Registry()
    registry.set_crds([{**CRD, "status": crd_status(CRD, "t")}])
    assert ("example.com", ["v1", "v1beta1"]) in registry.group_versions()
    assert registry.lookup("example.com", "v1", "widgets") is not None
    assert registry.lookup("example.com", "v1alpha1", "widgets") is None


def test_unestablished_crds_are_not_served() -> None:
    registry = Registry()
    registry.set_crds([CRD])
    assert registry.lookup("example.com", "v1", "widgets") is None


def test_resource_lists_follow_the_served_order_and_shape() -> None:
    body = discovery.api_resource_list("apps/v1", [DEPLOYMENTS])
    assert [r["name"] for r in body["resources"]] == [
        "deployments",
        "deployments/status",
        "deployments/scale",
    ]
    assert body["groupVersion"] == "apps/v1"
