"""No-op writes and metadata.generation (issue #10 item 5): the pure rules, then HTTP.

kube-apiserver decides both on the object as it will be stored — after defaulting and mutating
admission: a write that changes nothing stores nothing (same resourceVersion and generation,
no watch event, managedFields times included), and generation counts only what the kind's
strategy watches. The kubectl round trips are in test_noop_writes.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from localcluster.api.registry import BUILTINS
from localcluster.api.types import ResourceInfo
from localcluster.write import objectmeta, writes
from tests.localcluster._http import Http

DEPLOYMENTS = next(i for i in BUILTINS if i.plural == "deployments")
REPLICASETS = next(i for i in BUILTINS if i.plural == "replicasets")
WEBHOOKS = next(i for i in BUILTINS if i.plural == "mutatingwebhookconfigurations")
CONFIGMAPS = next(i for i in BUILTINS if i.plural == "configmaps")


def _widgets(*, status: bool) -> ResourceInfo:
    return ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True, "WidgetList",
        subresources=("status",) if status else (), crd={"metadata": {"name": "widgets"}},
    )  # fmt: skip


WIDGETS = _widgets(status=True)
BARE_WIDGETS = _widgets(status=False)

OLD: dict[str, Any] = {
    "metadata": {"name": "x", "uid": "u", "generation": 3, "annotations": {"a": "1"}},
    "spec": {"size": 1},
    "status": {"phase": "Running"},
    "data": {"k": "v"},
}

GENERATION = {
    "built-in spec": (DEPLOYMENTS, {"spec": {"size": 2}}, 4),
    "built-in label": (DEPLOYMENTS, {"metadata": {"labels": {"l": "x"}}}, 3),
    "built-in status": (DEPLOYMENTS, {"status": {"phase": "Done"}}, 3),
    "deployment annotation": (DEPLOYMENTS, {"metadata": {"annotations": {"a": "2"}}}, 4),
    "replicaset annotation": (REPLICASETS, {"metadata": {"annotations": {"a": "2"}}}, 3),
    "webhook configuration webhooks": (WEBHOOKS, {"webhooks": [{"name": "w"}]}, 4),
    "webhook configuration label": (WEBHOOKS, {"metadata": {"labels": {"l": "x"}}}, 3),
    "untracked kind": (CONFIGMAPS, {"data": {"k": "w"}}, 3),
    "CR spec": (WIDGETS, {"spec": {"size": 2}}, 4),
    "CR other top-level field": (WIDGETS, {"data": {"k": "w"}}, 4),
    "CR metadata": (WIDGETS, {"metadata": {"annotations": {"a": "2"}}}, 3),
    "CR status, status subresource": (WIDGETS, {"status": {"phase": "Done"}}, 3),
    "CR status, no status subresource": (BARE_WIDGETS, {"status": {"phase": "Done"}}, 4),
}


def _changed(change: dict[str, Any]) -> dict[str, Any]:
    new = {**OLD, **{k: v for k, v in change.items() if k != "metadata"}}
    new["metadata"] = {**OLD["metadata"], **change.get("metadata", {})}
    return new


@pytest.mark.parametrize(("info", "change", "generation"), GENERATION.values(), ids=GENERATION)
def test_generation_follows_what_the_kinds_strategy_watches(
    info: ResourceInfo, change: dict[str, Any], generation: int
) -> None:
    new = _changed(change)
    if info is CONFIGMAPS:
        new["metadata"].pop("generation")
        generation = None  # type: ignore[assignment]
        old = {**OLD, "metadata": {k: v for k, v in OLD["metadata"].items() if k != "generation"}}
    else:
        old = OLD
    objectmeta.update_generation(info, old, new)
    assert new["metadata"].get("generation") == generation


@pytest.mark.parametrize("info", [DEPLOYMENTS, WIDGETS, BARE_WIDGETS], ids=lambda i: i.plural)
def test_status_writes_never_bump_generation_and_a_client_cannot_set_it(
    info: ResourceInfo,
) -> None:
    new = _changed({"status": {"phase": "Done"}, "spec": {"size": 9}})
    objectmeta.update_generation(info, OLD, new, subresource="status")
    assert new["metadata"]["generation"] == 3
    same = _changed({"metadata": {"generation": 42}})
    objectmeta.update_generation(info, OLD, same)
    assert same["metadata"]["generation"] == 3


def _entry(manager: str, time: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "manager": manager, "operation": "Apply", "apiVersion": "v1", "time": time,
        "fieldsType": "FieldsV1", "fieldsV1": fields or {"f:data": {"f:k": {}}},
    }  # fmt: skip


STORED: dict[str, Any] = {
    "metadata": {"name": "x", "resourceVersion": "7", "managedFields": [_entry("a", "t1")]},
    "data": {"k": "v"},
}

UNCHANGED = {
    "identical": ({}, True),
    "another resourceVersion": ({"resourceVersion": "8"}, True),
    "only managedFields times": ({"managedFields": [_entry("a", "t2")]}, True),
    "an entry added": ({"managedFields": [_entry("a", "t1"), _entry("b", "t2")]}, False),
    "an entry's fields": ({"managedFields": [_entry("a", "t1", {"f:data": {}})]}, False),
    "an entry's manager": ({"managedFields": [_entry("b", "t1")]}, False),
    "entries dropped": ({"managedFields": None}, False),
    "a label": ({"labels": {"l": "x"}}, False),
}


@pytest.mark.parametrize(("meta", "same"), UNCHANGED.values(), ids=UNCHANGED)
def test_a_write_is_a_no_op_when_only_the_version_or_managed_fields_times_differ(
    meta: dict[str, Any], same: bool
) -> None:
    new_meta = {**STORED["metadata"], **meta}
    new_meta = {k: v for k, v in new_meta.items() if v is not None}
    assert writes.unchanged(STORED, {**STORED, "metadata": new_meta}) is same
    assert writes.unchanged(STORED, {**STORED, "data": {"k": "w"}}) is False


# --- against the embedded API server --------------------------------------------------------

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _crd(group: str, *, status: bool) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "size": {"type": "integer", "default": 1},
                    "color": {"type": "string"},
                },
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    names = {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"}
    version = {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {"group": group, "scope": "Namespaced", "names": names, "versions": [version]},
    }


@pytest.fixture(params=[True, False], ids=["status-subresource", "no-status-subresource"])
def widgets(http: Http, namespace: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A Widget CRD (spec.size defaults to 1) in a fresh group; yields the collection path."""
    group = f"n{uuid.uuid4().hex[:8]}.example.com"
    reply = http.post(CRDS, _crd(group, status=request.param))
    assert reply.status == 201, reply.data
    yield f"/apis/{group}/v1/namespaces/{namespace}/widgets"
    http.delete(f"{CRDS}/widgets.{group}")


def _stamp(obj: dict[str, Any]) -> tuple[str, Any]:
    return obj["metadata"]["resourceVersion"], obj["metadata"].get("generation")


def _events(http: Http, path: str, name: str, rv: str) -> list[tuple[str, str]]:
    lines = http.get(
        f"{path}?watch=1&resourceVersion={rv}&fieldSelector=metadata.name%3D{name}&timeoutSeconds=1"
    ).lines()
    return [
        (e["type"], e["object"]["metadata"]["resourceVersion"])
        for e in lines
        if e["type"] != "BOOKMARK"
    ]


def test_leaving_out_what_defaulting_puts_back_is_no_change(
    http: Http, namespace: str, widgets: str
) -> None:
    created = http.post(widgets, {"metadata": {"name": "w"}, "spec": {"color": "red"}}).json()
    assert created["spec"] == {"color": "red", "size": 1}
    first = _stamp(created)
    # A PUT and a merge patch without the defaulted field, an apply of the same, a dry run.
    put = http.put(f"{widgets}/w", {**created, "spec": {"color": "red"}})
    patched = http.patch(f"{widgets}/w", {"spec": {"size": None}})
    dry = http.patch(f"{widgets}/w?dryRun=All", {"spec": {"size": None}})
    for reply in (put, patched, dry):
        assert reply.status == 200, reply.data
        assert _stamp(reply.json()) == first and reply.json()["spec"]["size"] == 1
    assert _stamp(http.get(f"{widgets}/w").json()) == first

    labelled = http.patch(f"{widgets}/w", {"metadata": {"labels": {"l": "x"}}}).json()
    assert int(labelled["metadata"]["resourceVersion"]) > int(first[0])
    assert labelled["metadata"]["generation"] == 1
    resized = http.patch(f"{widgets}/w", {"spec": {"size": 2}}).json()
    assert resized["metadata"]["generation"] == 2
    assert _events(http, widgets, "w", first[0]) == [
        ("MODIFIED", labelled["metadata"]["resourceVersion"]),
        ("MODIFIED", resized["metadata"]["resourceVersion"]),
    ]


def test_status_changes_bump_generation_only_without_a_status_subresource(
    http: Http, namespace: str, widgets: str
) -> None:
    http.post(widgets, {"metadata": {"name": "w"}, "spec": {"size": 1}})
    subresource = http.get(f"{widgets}/w/status").status == 200
    target = f"{widgets}/w/status" if subresource else f"{widgets}/w"
    reply = http.patch(target, {"status": {"phase": "Running"}})
    assert reply.status == 200, reply.data
    assert reply.json()["status"] == {"phase": "Running"}
    assert reply.json()["metadata"]["generation"] == (1 if subresource else 2)
    again = http.patch(target, {"status": {"phase": "Running"}}).json()
    assert _stamp(again) == _stamp(reply.json())


def test_a_deployment_patch_that_defaulting_undoes_changes_nothing(
    http: Http, namespace: str
) -> None:
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    body = {
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]},
            },
        },
    }
    created = http.post(path, body).json()
    first = _stamp(created)
    assert created["spec"]["revisionHistoryLimit"] == 10
    reply = http.patch(
        f"{path}/web",
        {"spec": {"revisionHistoryLimit": None, "template": {"spec": {"dnsPolicy": None}}}},
        content_type="application/strategic-merge-patch+json",
    )
    assert reply.status == 200, reply.data
    assert _stamp(reply.json()) == first
    # Annotations count for a Deployment's generation (they are copied to its ReplicaSets).
    annotated = http.patch(f"{path}/web", {"metadata": {"annotations": {"a": "1"}}}).json()
    assert annotated["metadata"]["generation"] == 2
    labelled = http.patch(f"{path}/web", {"metadata": {"labels": {"l": "x"}}}).json()
    assert labelled["metadata"]["generation"] == 2


def test_a_write_changing_only_managed_fields_times_is_not_stored(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = http.patch(
        f"{path}/c?fieldManager=tester",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}},
        content_type="application/apply-patch+yaml",
    ).json()
    entries = created["metadata"]["managedFields"]
    moved = [{**e, "time": "2001-01-01T00:00:00Z"} for e in entries]
    reply = http.put(
        f"{path}/c", {**created, "metadata": {**created["metadata"], "managedFields": moved}}
    )
    assert reply.status == 200, reply.data
    stored = http.get(f"{path}/c").json()
    assert stored["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert stored["metadata"]["managedFields"] == entries
    assert _events(http, path, "c", created["metadata"]["resourceVersion"]) == []
