"""CRUD for every built-in resource, over raw HTTP: status codes, bodies, server-owned fields."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.localcluster._http import Http, status_of

POD_SPEC = {"containers": [{"name": "main", "image": "busybox:1.36"}]}

# (collection path with {ns}, kind, apiVersion, body extras, merge patch to apply, field it sets)
RESOURCES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "configmap": ("/api/v1/namespaces/{ns}/configmaps", "ConfigMap", "v1", {"data": {"a": "1"}}),
    "secret": ("/api/v1/namespaces/{ns}/secrets", "Secret", "v1", {"stringData": {"k": "v"}}),
    "service": (
        "/api/v1/namespaces/{ns}/services",
        "Service",
        "v1",
        {"spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}},
    ),
    "endpoints": ("/api/v1/namespaces/{ns}/endpoints", "Endpoints", "v1", {"subsets": []}),
    "serviceaccount": ("/api/v1/namespaces/{ns}/serviceaccounts", "ServiceAccount", "v1", {}),
    "pod": ("/api/v1/namespaces/{ns}/pods", "Pod", "v1", {"spec": POD_SPEC}),
    "event": (
        "/api/v1/namespaces/{ns}/events",
        "Event",
        "v1",
        {"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Test", "message": "m"},
    ),
    "events.k8s.io event": (
        "/apis/events.k8s.io/v1/namespaces/{ns}/events",
        "Event",
        "events.k8s.io/v1",
        {
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "t",
            "reportingInstance": "i",
            "action": "A",
            "reason": "R",
        },
    ),
    "lease": (
        "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        "Lease",
        "coordination.k8s.io/v1",
        {"spec": {"holderIdentity": "me"}},
    ),
    "deployment": (
        "/apis/apps/v1/namespaces/{ns}/deployments",
        "Deployment",
        "apps/v1",
        {
            "spec": {
                "selector": {"matchLabels": {"app": "x"}},
                "template": {"metadata": {"labels": {"app": "x"}}, "spec": POD_SPEC},
            }
        },
    ),
}


@pytest.mark.parametrize("resource", list(RESOURCES), ids=list(RESOURCES))
def test_each_namespaced_resource_supports_the_full_crud_cycle(
    http: Http, namespace: str, resource: str
) -> None:
    collection, kind, api_version, extras = RESOURCES[resource]
    base = collection.format(ns=namespace)
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "thing", "labels": {"a": "1"}},
        **extras,
    }

    created = http.post(base, body)
    assert created.status == 201, created.data
    obj = created.json()
    meta = obj["metadata"]
    assert (obj["kind"], obj["apiVersion"], meta["namespace"]) == (kind, api_version, namespace)
    assert re.fullmatch(r"[0-9a-f-]{36}", meta["uid"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["creationTimestamp"])

    got = http.get(f"{base}/thing").json()
    assert got["metadata"]["resourceVersion"] == meta["resourceVersion"]

    listed = http.get(f"{base}?labelSelector=a%3D1").json()
    assert listed["kind"] == f"{kind}List"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["thing"]
    assert int(listed["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])

    got["metadata"]["labels"]["b"] = "2"
    replaced = http.put(f"{base}/thing", got)
    assert replaced.status == 200, replaced.data
    assert int(replaced.json()["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])

    patched = http.patch(f"{base}/thing", {"metadata": {"labels": {"c": "3"}}})
    assert patched.status == 200, patched.data
    assert patched.json()["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"}

    deleted = http.delete(f"{base}/thing")
    assert deleted.status == 200, deleted.data
    missing = http.get(f"{base}/thing")
    assert missing.status == 404
    assert status_of(missing)["reason"] == "NotFound"


def test_cluster_scoped_nodes_support_crud_and_the_status_subresource(http: Http) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "crud-node"},
        "status": {"capacity": {"cpu": "2"}},
    }
    assert http.post("/api/v1/nodes", node).status == 201
    status = http.patch("/api/v1/nodes/crud-node/status", {"status": {"phase": "Running"}})
    assert status.status == 200
    assert status.json()["status"]["capacity"] == {"cpu": "2"}
    main = http.patch(
        "/api/v1/nodes/crud-node", {"spec": {"unschedulable": True}, "status": {"phase": "X"}}
    )
    assert main.json()["spec"]["unschedulable"] is True
    assert main.json()["status"]["phase"] == "Running"
    assert http.delete("/api/v1/nodes/crud-node").status == 200
    assert http.get("/api/v1/nodes/crud-node").status == 404


def test_generate_name_appends_five_random_characters(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"generateName": "cfg-"}}
    )
    assert reply.status == 201
    assert re.fullmatch(r"cfg-[bcdfghjklmnpqrstvwxz2456789]{5}", reply.json()["metadata"]["name"])


def test_creating_a_duplicate_answers_409_already_exists_with_details(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    assert http.post(path, {"metadata": {"name": "dup"}}).status == 201
    reply = http.post(path, {"metadata": {"name": "dup"}})
    assert reply.status == 409
    assert status_of(reply) | {} == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "dup" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "dup", "kind": "configmaps"},
        "code": 409,
    }


def test_a_missing_object_answers_404_with_the_qualified_resource_name(
    http: Http, namespace: str
) -> None:
    reply = http.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/nope")
    body = status_of(reply)
    assert (reply.status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'deployments.apps "nope" not found',
    )
    assert body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}


def test_an_update_with_a_stale_resource_version_is_a_409_conflict(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    first = http.post(path, {"metadata": {"name": "x"}, "spec": POD_SPEC}).json()
    http.patch(f"{path}/x", {"metadata": {"labels": {"v": "2"}}})
    stale = http.put(f"{path}/x", first)
    body = status_of(stale)
    assert (stale.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on pods "x": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_resource_versions_grow_across_kinds(http: Http, namespace: str) -> None:
    a = http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "a"}}).json()
    b = http.post(f"/api/v1/namespaces/{namespace}/secrets", {"metadata": {"name": "b"}}).json()
    c = http.patch(f"/api/v1/namespaces/{namespace}/configmaps/a", {"data": {"x": "y"}}).json()
    rvs = [int(o["metadata"]["resourceVersion"]) for o in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_generation_is_bumped_on_spec_changes_only(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = {"metadata": {"name": "gen"}, **RESOURCES["deployment"][3]}
    assert http.post(path, body).json()["metadata"]["generation"] == 1
    labelled = http.patch(f"{path}/gen", {"metadata": {"labels": {"x": "y"}}}).json()
    assert labelled["metadata"]["generation"] == 1
    scaled = http.patch(f"{path}/gen", {"spec": {"replicas": 3}}).json()
    assert scaled["metadata"]["generation"] == 2
    status = http.patch(f"{path}/gen/status", {"status": {"replicas": 3}}).json()
    assert status["metadata"]["generation"] == 2
    assert status["status"] == {"replicas": 3}


def test_a_no_op_update_keeps_the_resource_version(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = http.post(path, {"metadata": {"name": "same"}, "data": {"a": "1"}}).json()
    again = http.patch(f"{path}/same", {"data": {"a": "1"}}).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_a_no_op_update_by_another_manager_keeps_the_resource_version(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = http.post(path, {"metadata": {"name": "same"}, "data": {"a": "1"}}).json()
    again = http.put(f"{path}/same?fieldManager=other", created).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert [e["manager"] for e in again["metadata"]["managedFields"]] == [
        e["manager"] for e in created["metadata"]["managedFields"]
    ]


def test_a_write_that_changes_only_managed_fields_is_stored(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = http.post(
        f"{path}?fieldManager=first", {"metadata": {"name": "mf"}, "data": {"a": "1"}}
    ).json()
    entries = created["metadata"]["managedFields"]
    renamed = [{**e, "manager": "second"} for e in entries]
    patched = http.patch(
        f"{path}/mf",
        [{"op": "replace", "path": "/metadata/managedFields", "value": renamed}],
        content_type="application/json-patch+json",
    )
    assert patched.status == 200, patched.data
    stored = http.get(f"{path}/mf").json()
    assert [e["manager"] for e in stored["metadata"]["managedFields"]] == ["second"]
    assert int(stored["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


def test_pods_start_pending_with_defaults_applied(http: Http, namespace: str) -> None:
    pod = http.post(
        f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": "p"}, "spec": POD_SPEC}
    ).json()
    assert pod["status"]["phase"] == "Pending"
    assert pod["spec"]["restartPolicy"] == "Always"
    assert pod["spec"]["terminationGracePeriodSeconds"] == 30
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"


def test_services_get_a_cluster_ip_and_target_port_defaults(http: Http, namespace: str) -> None:
    svc = http.post(
        f"/api/v1/namespaces/{namespace}/services",
        {"metadata": {"name": "s"}, **RESOURCES["service"][3]},
    ).json()
    assert re.fullmatch(r"10\.96\.\d+\.\d+", svc["spec"]["clusterIP"])
    assert svc["spec"]["ports"][0] == {"port": 80, "protocol": "TCP", "targetPort": 80}
    headless = http.post(
        f"/api/v1/namespaces/{namespace}/services",
        {"metadata": {"name": "h"}, "spec": {"clusterIP": "None", "ports": [{"port": 2222}]}},
    ).json()
    assert headless["spec"]["clusterIP"] == "None"


def test_binding_assigns_a_node_once(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    http.post(path, {"metadata": {"name": "b"}, "spec": POD_SPEC})
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "b"},
        "target": {"kind": "Node", "name": "n1"},
    }
    assert http.post(f"{path}/b/binding", binding).status == 201
    pod = http.get(f"{path}/b").json()
    assert pod["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= pod["status"]["conditions"][
        0
    ].items()
    again = http.post(f"{path}/b/binding", binding)
    assert again.status == 409
    assert (
        status_of(again)["message"]
        == 'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "n1"'
    )


def test_deployment_scale_subresource_reads_and_writes_replicas(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    http.post(path, {"metadata": {"name": "sc"}, **RESOURCES["deployment"][3]})
    scale = http.get(f"{path}/sc/scale").json()
    assert (scale["kind"], scale["apiVersion"], scale["spec"]["replicas"]) == (
        "Scale",
        "autoscaling/v1",
        1,
    )
    assert scale["status"]["selector"] == "app=x"
    http.patch(f"{path}/sc/scale", {"spec": {"replicas": 4}})
    assert http.get(f"{path}/sc").json()["spec"]["replicas"] == 4


def test_dry_run_create_returns_the_object_without_storing_it(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps?dryRun=All", {"metadata": {"name": "dry"}}
    )
    assert reply.status == 201
    assert reply.json()["metadata"]["name"] == "dry"
    assert http.get(f"/api/v1/namespaces/{namespace}/configmaps/dry").status == 404


def test_secret_string_data_is_merged_into_data(http: Http, namespace: str) -> None:
    secret = http.post(
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"b": "bee"}},
    ).json()
    assert secret["data"] == {"a": "YQ==", "b": "YmVl"}
    assert "stringData" not in secret and secret["type"] == "Opaque"


def test_immutable_configmaps_refuse_data_changes(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "frozen"}, "data": {"a": "1"}, "immutable": True})
    reply = http.patch(f"{path}/frozen", {"data": {"a": "2"}})
    assert reply.status == 422
    assert "field is immutable when `immutable` is set" in reply.json()["message"]


def test_a_deployment_selector_is_immutable(http: Http, namespace: str) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    http.post(path, {"metadata": {"name": "sel"}, **RESOURCES["deployment"][3]})
    reply = http.patch(
        f"{path}/sel",
        {
            "spec": {
                "selector": {"matchLabels": {"app": "y"}},
                "template": {"metadata": {"labels": {"app": "y"}}},
            }
        },
    )
    assert reply.status == 422
    assert reply.json()["details"]["causes"][0]["field"] == "spec.selector"


def test_a_service_replaced_without_its_cluster_ip_keeps_it(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/services"
    created = http.post(path, {"metadata": {"name": "keep-ip"}, **RESOURCES["service"][3]}).json()
    replacement = {
        "metadata": {"name": "keep-ip"},
        "spec": {"selector": {"app": "z"}, "ports": [{"port": 81}]},
    }
    replaced = http.put(f"{path}/keep-ip", replacement).json()
    assert replaced["spec"]["clusterIP"] == created["spec"]["clusterIP"]
    changed = http.patch(
        f"{path}/keep-ip", {"spec": {"clusterIP": "10.96.9.9", "clusterIPs": ["10.96.9.9"]}}
    )
    assert changed.status == 422


def test_replica_sets_are_served_with_defaults_scale_and_printer_columns(
    http: Http, namespace: str
) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    template = {"metadata": {"labels": {"app": "r"}}, "spec": POD_SPEC}
    created = http.post(
        path,
        {
            "metadata": {"name": "r"},
            "spec": {"selector": {"matchLabels": {"app": "r"}}, "template": template},
        },
    )
    assert created.status == 201, created.data
    rs = created.json()
    assert (rs["spec"]["replicas"], rs["metadata"]["generation"], rs["status"]) == (
        1,
        1,
        {"replicas": 0},
    )
    scale = http.get(f"{path}/r/scale").json()
    assert (scale["kind"], scale["spec"]["replicas"], scale["status"]["selector"]) == (
        "Scale",
        1,
        "app=r",
    )
    table = http.get(
        path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    ).json()
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Desired",
        "Current",
        "Ready",
        "Age",
        "Containers",
        "Images",
        "Selector",
    ]
    assert table["rows"][0]["cells"][:4] == ["r", 1, 0, 0]
    mismatched = http.post(
        path,
        {
            "metadata": {"name": "m"},
            "spec": {"selector": {"matchLabels": {"app": "other"}}, "template": template},
        },
    )
    assert mismatched.status == 422
    assert status_of(mismatched)["details"]["causes"][0]["field"] == "spec.template.metadata.labels"
    resources = {r["name"]: r for r in http.get("/apis/apps/v1").json()["resources"]}
    assert resources["replicasets"]["shortNames"] == ["rs"]
    assert {"replicasets/status", "replicasets/scale"} <= set(resources)
