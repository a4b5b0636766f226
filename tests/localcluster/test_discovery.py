"""Discovery: /version, /api, /apis, resource lists, and CRD groups appearing when established."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.localcluster._http import Http
from tests.support.cluster import Cluster, eventually

kubectl = shutil.which("kubectl")


def test_version_reports_a_1_32_server(http: Http) -> None:
    version = http.get("/version").json()
    assert (version["major"], version["minor"]) == ("1", "32")
    assert version["gitVersion"].startswith("v1.32.")


def test_the_core_group_lists_v1(http: Http) -> None:
    body = http.get("/api").json()
    assert (body["kind"], body["versions"]) == ("APIVersions", ["v1"])


def test_apis_lists_the_built_in_groups_with_preferred_versions(http: Http) -> None:
    body = http.get("/apis", headers={"Accept": "application/json"})
    assert body.headers["Content-Type"].startswith("application/json")
    groups = {g["name"]: g for g in body.json()["groups"]}
    for name in (
        "apps",
        "events.k8s.io",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "admissionregistration.k8s.io",
    ):
        assert groups[name]["preferredVersion"] == {"groupVersion": f"{name}/v1", "version": "v1"}


def test_the_core_resource_list_describes_pods_and_their_subresources(http: Http) -> None:
    resources = {r["name"]: r for r in http.get("/api/v1").json()["resources"]}
    pods = resources["pods"]
    assert pods["kind"] == "Pod" and pods["namespaced"] is True and pods["singularName"] == "pod"
    assert pods["shortNames"] == ["po"] and pods["categories"] == ["all"]
    assert set(pods["verbs"]) == {
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    }
    assert resources["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["pods/log"]["verbs"] == ["get"]
    assert resources["pods/binding"] == {
        "name": "pods/binding",
        "singularName": "",
        "namespaced": True,
        "kind": "Binding",
        "verbs": ["create"],
    }
    assert resources["namespaces"]["namespaced"] is False


def test_deployments_scale_is_an_autoscaling_v1_scale(http: Http) -> None:
    resources = {r["name"]: r for r in http.get("/apis/apps/v1").json()["resources"]}
    assert {k: resources["deployments/scale"][k] for k in ("kind", "group", "version")} == {
        "kind": "Scale",
        "group": "autoscaling",
        "version": "v1",
    }


def test_a_crd_group_is_served_as_soon_as_the_crd_is_established(http: Http) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.discovery.example.com"},
        "spec": {
            "group": "discovery.example.com",
            "scope": "Cluster",
            "names": {
                "plural": "gadgets",
                "singular": "gadget",
                "kind": "Gadget",
                "shortNames": ["gd"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    created = http.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert created.status == 201, created.data
    conditions = {c["type"]: c["status"] for c in created.json()["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert created.json()["status"]["acceptedNames"]["listKind"] == "GadgetList"
    groups = {g["name"] for g in http.get("/apis").json()["groups"]}
    assert "discovery.example.com" in groups
    [gadgets] = http.get("/apis/discovery.example.com/v1").json()["resources"]
    assert (gadgets["name"], gadgets["kind"], gadgets["namespaced"], gadgets["shortNames"]) == (
        "gadgets",
        "Gadget",
        False,
        ["gd"],
    )
    http.delete(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.discovery.example.com"
    )
    eventually(
        lambda: (
            "discovery.example.com" not in {g["name"] for g in http.get("/apis").json()["groups"]}
        )
    )


@pytest.mark.skipif(kubectl is None, reason="kubectl binary not installed")
def test_kubectl_api_resources_lists_the_served_kinds(cluster: Cluster) -> None:
    out = subprocess.run(
        [kubectl, "api-resources", "-o", "name"],
        env=cluster.kubectl_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    names = set(out.stdout.split())
    assert {
        "pods",
        "namespaces",
        "deployments.apps",
        "leases.coordination.k8s.io",
        "customresourcedefinitions.apiextensions.k8s.io",
    } <= names


AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


def test_aggregated_discovery_is_served_when_asked_for_first(http: Http) -> None:
    reply = http.get("/apis", headers={"Accept": AGGREGATED})
    assert (
        reply.headers["Content-Type"]
        == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    body = reply.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    apps = next(g for g in body["items"] if g["metadata"]["name"] == "apps")
    deployments = next(
        r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments"
    )
    assert deployments["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced"
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    core = http.get("/api", headers={"Accept": AGGREGATED}).json()
    assert [g["metadata"]["name"] for g in core["items"]] == [""]
    assert "pods" in {r["resource"] for r in core["items"][0]["versions"][0]["resources"]}


def test_openapi_v2_in_protobuf_is_an_empty_document(http: Http) -> None:
    reply = http.get(
        "/openapi/v2",
        headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"},
    )
    assert reply.status == 200
    assert reply.data.startswith(b"\x0a\x032.0\x12")


@pytest.mark.skipif(kubectl is None, reason="kubectl binary not installed")
def test_kubectl_reports_a_missing_crd_as_a_real_cluster_does(cluster: Cluster) -> None:
    manifest = "apiVersion: nothing.example.com/v1\nkind: Ghost\nmetadata:\n  name: boo\n  namespace: default\n"
    out = subprocess.run(
        [kubectl or "kubectl", "apply", "-f", "-"],
        input=manifest,
        env=cluster.kubectl_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert 'no matches for kind "Ghost" in version "nothing.example.com/v1"' in out.stderr
