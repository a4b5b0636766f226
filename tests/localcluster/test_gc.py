"""Deletion semantics: finalizers, ownerReference GC (background/foreground/orphan),
namespace cascade, graceful pod deletion."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.localcluster._http import Http
from tests.support.cluster import BackgroundApiServer, Cluster, eventually

POD_SPEC = {"containers": [{"name": "c", "image": "busybox"}]}


def _owner_ref(owner: dict[str, Any], block: bool = False) -> dict[str, Any]:
    ref = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def _family(http: Http, ns: str, *, block: bool = False) -> tuple[str, str]:
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    owner = http.post(cms, {"metadata": {"name": "owner"}}).json()
    http.post(cms, {"metadata": {"name": "child", "ownerReferences": [_owner_ref(owner, block)]}})
    return f"{cms}/owner", f"{cms}/child"


def test_finalizers_hold_an_object_until_the_last_one_is_removed(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "f", "finalizers": ["example.com/a", "example.com/b"]}})
    marked = http.delete(f"{path}/f").json()
    assert marked["metadata"]["deletionTimestamp"]
    assert http.get(f"{path}/f").status == 200
    http.patch(f"{path}/f", {"metadata": {"finalizers": ["example.com/b"]}})
    assert http.get(f"{path}/f").status == 200
    http.patch(f"{path}/f", {"metadata": {"finalizers": None}})
    assert http.get(f"{path}/f").status == 404


def test_no_new_finalizers_can_be_added_while_deleting(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "g", "finalizers": ["example.com/a"]}})
    http.delete(f"{path}/g")
    reply = http.patch(
        f"{path}/g", {"metadata": {"finalizers": ["example.com/a", "example.com/new"]}}
    )
    assert reply.status == 422
    http.patch(f"{path}/g", {"metadata": {"finalizers": None}})


def test_background_deletion_removes_dependents_after_the_owner(http: Http, namespace: str) -> None:
    owner, child = _family(http, namespace)
    assert http.delete(owner, {"propagationPolicy": "Background"}).status == 200
    assert http.get(owner).status == 404
    eventually(lambda: http.get(child).status == 404)


def test_orphan_deletion_keeps_dependents_without_the_owner_reference(
    http: Http, namespace: str
) -> None:
    owner, child = _family(http, namespace)
    http.delete(owner, {"propagationPolicy": "Orphan"})
    eventually(lambda: http.get(owner).status == 404)
    kept = http.get(child).json()
    assert "ownerReferences" not in kept["metadata"]


def test_foreground_deletion_waits_for_blocking_dependents(http: Http, namespace: str) -> None:
    owner, child = _family(http, namespace, block=True)
    http.patch(child, {"metadata": {"finalizers": ["example.com/slow"]}})
    marked = http.delete(owner, {"propagationPolicy": "Foreground"}).json()
    assert "foregroundDeletion" in marked["metadata"]["finalizers"]
    eventually(lambda: http.get(child).json()["metadata"].get("deletionTimestamp") or False)
    assert http.get(owner).status == 200
    http.patch(child, {"metadata": {"finalizers": None}})
    eventually(lambda: http.get(owner).status == 404)


def test_dependents_of_an_owner_that_never_existed_are_collected(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    ghost = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "ghost",
        "uid": "11111111-2222-3333-4444-555555555555",
    }
    http.post(path, {"metadata": {"name": "stray", "ownerReferences": [ghost]}})
    eventually(lambda: http.get(f"{path}/stray").status == 404)


def test_namespace_deletion_cascades_to_everything_inside(http: Http) -> None:
    ns = "cascade-test"
    http.post("/api/v1/namespaces", {"metadata": {"name": ns}})
    http.post(f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "a"}})
    http.post(f"/api/v1/namespaces/{ns}/pods", {"metadata": {"name": "p"}, "spec": POD_SPEC})
    held = http.post(
        f"/api/v1/namespaces/{ns}/secrets",
        {"metadata": {"name": "held", "finalizers": ["example.com/x"]}},
    )
    assert held.status == 201
    terminating = http.delete(f"/api/v1/namespaces/{ns}").json()
    assert terminating["status"]["phase"] == "Terminating"
    assert terminating["spec"]["finalizers"] == ["kubernetes"]
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}/configmaps/a").status == 404)
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}/pods/p").status == 404)
    assert http.get(f"/api/v1/namespaces/{ns}").status == 200
    http.patch(f"/api/v1/namespaces/{ns}/secrets/held", {"metadata": {"finalizers": None}})
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}").status == 404)


def test_a_pod_bound_to_a_node_is_deleted_gracefully(http: Http, namespace: str) -> None:
    node = f"node-{namespace}"[:63]
    assert http.post("/api/v1/nodes", {"metadata": {"name": node}}).status == 201
    try:
        path = f"/api/v1/namespaces/{namespace}/pods"
        spec = {**POD_SPEC, "nodeName": node, "terminationGracePeriodSeconds": 7}
        http.post(path, {"metadata": {"name": "bound"}, "spec": spec})
        marked = http.delete(f"{path}/bound")
        assert marked.status == 200
        meta = marked.json()["metadata"]
        assert meta["deletionGracePeriodSeconds"] == 7 and meta["deletionTimestamp"]
        assert http.get(f"{path}/bound").status == 200
        final = http.delete(f"{path}/bound", {"gracePeriodSeconds": 0})
        assert final.status == 200
        assert http.get(f"{path}/bound").status == 404
    finally:
        http.delete(f"/api/v1/nodes/{node}")


def test_a_pod_on_a_node_that_does_not_exist_is_removed_at_once(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    http.post(
        path, {"metadata": {"name": "stranded"}, "spec": {**POD_SPEC, "nodeName": "no-such-node"}}
    )
    assert http.delete(f"{path}/stranded").status == 200
    assert http.get(f"{path}/stranded").status == 404


def test_an_unbound_pod_is_removed_at_once(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    http.post(path, {"metadata": {"name": "free"}, "spec": POD_SPEC})
    assert http.delete(f"{path}/free").status == 200
    assert http.get(f"{path}/free").status == 404


def test_delete_collection_honours_the_label_selector(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name, tier in (("a", "web"), ("b", "web"), ("c", "db")):
        http.post(path, {"metadata": {"name": name, "labels": {"tier": tier}}})
    assert http.delete(f"{path}?labelSelector=tier%3Dweb").status == 200
    left = [i["metadata"]["name"] for i in http.get(f"{path}?labelSelector=tier").json()["items"]]
    assert left == ["c"]


def test_every_namespace_gets_a_default_service_account(http: Http, namespace: str) -> None:
    eventually(
        lambda: http.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/default").status == 200
    )


def test_the_finalize_subresource_releases_a_terminating_namespace(http: Http) -> None:
    ns = "finalize-test"
    http.post("/api/v1/namespaces", {"metadata": {"name": ns}})
    http.post(
        f"/api/v1/namespaces/{ns}/secrets",
        {"metadata": {"name": "held", "finalizers": ["example.com/x"]}},
    )
    http.delete(f"/api/v1/namespaces/{ns}")
    current = http.get(f"/api/v1/namespaces/{ns}").json()
    current["spec"]["finalizers"] = []
    released = http.put(f"/api/v1/namespaces/{ns}/finalize", current)
    assert released.status == 200
    eventually(lambda: http.get(f"/api/v1/namespaces/{ns}").status == 404)
    http.patch(f"/api/v1/namespaces/{ns}/secrets/held", {"metadata": {"finalizers": None}})


def test_events_expire_after_the_event_ttl(tmp_path: Path) -> None:
    embedded = BackgroundApiServer(tmp_path, event_ttl=1.0)
    try:
        srv = embedded.server
        http = Http(Cluster(srv.kubeconfig, srv.url, srv.token, srv.ca_file, tmp_path, embedded))
        path = "/api/v1/namespaces/default/events"
        event = {
            "metadata": {"name": "old"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reason": "R",
        }
        assert http.post(path, event).status == 201
        eventually(lambda: http.get(f"{path}/old").status == 404, timeout=15)
    finally:
        embedded.stop()
