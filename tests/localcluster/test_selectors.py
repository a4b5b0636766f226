"""Label and field selectors: the parser (pure) and LIST filtering over HTTP."""

from __future__ import annotations

import pytest

from localcluster.store.selectors import (
    Selector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from tests.localcluster._http import Http

LABELS = {"app": "web", "tier": "front", "version": "3"}

LABEL_CASES = {
    "equality": ("app=web", True),
    "double equals": ("app==web", True),
    "inequality": ("app!=web", False),
    "inequality of an absent key": ("zone!=x", True),
    "set in": ("tier in (front,back)", True),
    "set notin": ("tier notin (front)", False),
    "exists": ("app", True),
    "does not exist": ("!app", False),
    "conjunction": ("app=web,tier=back", False),
    "greater than": ("version>2", True),
    "less than": ("version<2", False),
    "empty": ("", True),
}


@pytest.mark.parametrize(("text", "expected"), list(LABEL_CASES.values()), ids=list(LABEL_CASES))
def test_label_selectors_match_as_kubernetes_does(text: str, expected: bool) -> None:
    selector = Selector(labels=parse_label_selector(text))
    assert selector.matches({"metadata": {"labels": LABELS}}) is expected


@pytest.mark.parametrize(
    "text", ["a in (", "=x", "a b", "-bad=1"], ids=["open set", "no key", "space", "bad key"]
)
def test_malformed_label_selectors_are_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def test_field_selectors_know_the_fields_of_each_kind() -> None:
    assert parse_field_selector("status.phase=Running,spec.nodeName!=n1", "/pods")
    with pytest.raises(SelectorError, match=r"field label not supported: status\.phase"):
        parse_field_selector("status.phase=Running", "/services")
    with pytest.raises(
        SelectorError,
        match=r'"status\.phase" is not a known field selector: only "metadata\.name", '
        r'"metadata\.namespace"$',
    ):
        parse_field_selector("status.phase=Running", "/configmaps")
    pod = {"metadata": {"name": "p"}, "status": {"phase": "Running"}, "spec": {"nodeName": "n2"}}
    assert Selector(
        fields=parse_field_selector("status.phase=Running,spec.nodeName!=n1", "/pods")
    ).matches(pod)


def test_event_field_selectors_reach_into_involved_object() -> None:
    event = {
        "metadata": {"name": "e"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "source": {"component": "kubelet"},
    }
    assert Selector(
        fields=parse_field_selector("involvedObject.name=p,source=kubelet", "/events")
    ).matches(event)


def test_list_filters_pods_by_label_and_field(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods"
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    for name, app, node in (("a", "web", "n1"), ("b", "web", "n2"), ("c", "db", "n1")):
        http.post(
            path,
            {
                "metadata": {"name": name, "labels": {"app": app}},
                "spec": {**spec, "nodeName": node},
            },
        )

    def names(query: str) -> list[str]:
        return [i["metadata"]["name"] for i in http.get(f"{path}?{query}").json()["items"]]

    assert names("labelSelector=app%3Dweb") == ["a", "b"]
    assert names("labelSelector=app%20notin%20(web)") == ["c"]
    assert names("fieldSelector=spec.nodeName%3Dn1") == ["a", "c"]
    assert names("labelSelector=app%3Dweb&fieldSelector=spec.nodeName%3Dn1") == ["a"]
    assert names("fieldSelector=status.phase%3DPending") == ["a", "b", "c"]


def test_pagination_walks_the_whole_list_with_continue_tokens(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for i in range(7):
        http.post(path, {"metadata": {"name": f"cm-{i}", "labels": {"page": "yes"}}})
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        body = http.get(
            f"{path}?labelSelector=page&limit=3" + (f"&continue={token}" if token else "")
        ).json()
        seen += [i["metadata"]["name"] for i in body["items"]]
        pages += 1
        token = body["metadata"].get("continue", "")
        if not token:
            break
        assert body["metadata"]["remainingItemCount"] == 7 - len(seen)
    assert (seen, pages) == ([f"cm-{i}" for i in range(7)], 3)


def test_an_invalid_continue_token_is_400(http: Http, namespace: str) -> None:
    assert (
        http.get(f"/api/v1/namespaces/{namespace}/configmaps?limit=1&continue=garbage").status
        == 400
    )


def test_an_exact_list_shows_the_state_at_that_version(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "a", "labels": {"snap": "yes"}}, "data": {"v": "1"}})
    rv = http.get(path).json()["metadata"]["resourceVersion"]
    http.patch(f"{path}/a", {"data": {"v": "2"}})
    http.post(path, {"metadata": {"name": "b", "labels": {"snap": "yes"}}})
    body = http.get(
        f"{path}?labelSelector=snap&resourceVersion={rv}&resourceVersionMatch=Exact"
    ).json()
    assert body["metadata"]["resourceVersion"] == rv
    assert [(i["metadata"]["name"], i["data"]) for i in body["items"]] == [("a", {"v": "1"})]


def test_later_pages_come_from_the_snapshot_of_the_first(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    for name in ("a", "b", "c", "d"):
        http.post(path, {"metadata": {"name": name, "labels": {"p": "1"}}})
    first = http.get(f"{path}?labelSelector=p&limit=2").json()
    http.delete(f"{path}/c")
    http.post(path, {"metadata": {"name": "bb", "labels": {"p": "1"}}})
    http.patch(f"{path}/d", {"data": {"changed": "yes"}})
    second = http.get(
        f"{path}?labelSelector=p&limit=2&continue={first['metadata']['continue']}"
    ).json()
    assert [i["metadata"]["name"] for i in second["items"]] == ["c", "d"]
    assert "data" not in second["items"][1]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


def test_list_across_namespaces_includes_every_namespace(http: Http, namespace: str) -> None:
    http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "everywhere"}})
    items = http.get("/api/v1/configmaps?fieldSelector=metadata.name%3Deverywhere").json()["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
        (namespace, "everywhere")
    ]
