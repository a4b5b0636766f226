"""WATCH: event order and types, resuming from a resourceVersion, 410, bookmarks, selectors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes import client, watch

from localcluster.apiserver import ApiServerConfig, start_apiserver
from tests.localcluster._http import Http, status_of
from tests.support.cluster import BackgroundApiServer, Cluster

NOT_PUBLISHED = "fieldSelector=metadata.name%21%3Dkube-root-ca.crt"
"""Leaves out the ConfigMap the root-CA publisher puts into every namespace."""


def _cm(name: str, **labels: str) -> dict:
    return {"metadata": {"name": name, "labels": labels}}


def test_the_python_client_sees_added_modified_deleted_in_order(
    cluster: Cluster, namespace: str
) -> None:
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        start = core.list_namespaced_config_map(namespace).metadata.resource_version
        core.create_namespaced_config_map(namespace, _cm("w"))
        core.patch_namespaced_config_map("w", namespace, {"data": {"a": "1"}})
        core.delete_namespaced_config_map("w", namespace)
        events = []
        for event in watch.Watch().stream(
            core.list_namespaced_config_map, namespace, resource_version=start, timeout_seconds=2
        ):
            events.append((event["type"], event["object"].metadata.name))
            if len(events) == 3:
                break
    assert events == [("ADDED", "w"), ("MODIFIED", "w"), ("DELETED", "w")]


def test_a_watch_without_resource_version_starts_with_the_current_objects(
    http: Http, namespace: str
) -> None:
    for name in ("a", "b"):
        http.post(f"/api/v1/namespaces/{namespace}/configmaps", _cm(name))
    reply = http.get(
        f"/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=1&{NOT_PUBLISHED}"
    )
    assert reply.status == 200
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in reply.lines()] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_deleted_events_carry_the_deletion_resource_version(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    created = http.post(path, _cm("d")).json()
    http.delete(f"{path}/d")
    rv = created["metadata"]["resourceVersion"]
    lines = http.get(f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=1").lines()
    assert [e["type"] for e in lines] == ["DELETED"]
    assert int(lines[0]["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_label_selected_watches_see_objects_enter_and_leave_the_selection(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    start = http.get(path).json()["metadata"]["resourceVersion"]
    http.post(path, _cm("s", team="a"))
    http.patch(f"{path}/s", {"metadata": {"labels": {"team": "b"}}})
    http.patch(f"{path}/s", {"metadata": {"labels": {"team": "a"}}})
    lines = http.get(
        f"{path}?watch=1&resourceVersion={start}&labelSelector=team%3Da&timeoutSeconds=1"
    ).lines()
    assert [e["type"] for e in lines] == ["ADDED", "DELETED", "ADDED"]


def test_field_selected_watches_follow_one_object(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    start = http.get(path).json()["metadata"]["resourceVersion"]
    http.post(path, _cm("one"))
    http.post(path, _cm("two"))
    lines = http.get(
        f"{path}?watch=1&resourceVersion={start}&fieldSelector=metadata.name%3Dtwo&timeoutSeconds=1"
    ).lines()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "two")]


def test_bookmarks_arrive_on_idle_watches_that_ask_for_them(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    rv = http.get(path).json()["metadata"]["resourceVersion"]
    lines = http.get(
        f"{path}?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=2"
    ).lines()
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert bookmarks, lines
    assert bookmarks[0]["object"]["kind"] == "ConfigMap"
    assert int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_send_initial_events_ends_with_an_annotated_bookmark(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, _cm("init"))
    lines = http.get(
        f"{path}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
    ).lines()
    assert lines[0]["type"] == "ADDED"
    end = next(e for e in lines if e["type"] == "BOOKMARK")
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_a_watch_delivers_writes_made_while_it_is_open(cluster: Cluster, namespace: str) -> None:
    seen: list[str] = []
    ready = threading.Event()

    def follow() -> None:
        with cluster.api_client() as api:
            core = client.CoreV1Api(api)
            rv = core.list_namespaced_config_map(namespace).metadata.resource_version
            ready.set()
            for event in watch.Watch().stream(
                core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=10
            ):
                seen.append(event["object"].metadata.name)
                if event["object"].metadata.name == "last":
                    return

    thread = threading.Thread(target=follow)
    thread.start()
    ready.wait(5)
    with cluster.api_client() as api:
        for name in ("first", "last"):
            client.CoreV1Api(api).create_namespaced_config_map(namespace, _cm(name))
    thread.join(15)
    assert seen == ["first", "last"]


@pytest.fixture(scope="module")
def small_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A second server that keeps only 5 events, to exercise compaction."""
    data_dir: Path = tmp_path_factory.mktemp("small-history")
    embedded = BackgroundApiServer(data_dir, event_history=5)
    srv = embedded.server
    try:
        yield Cluster(srv.kubeconfig, srv.url, srv.token, srv.ca_file, data_dir, embedded)
    finally:
        embedded.stop()


def test_a_watch_from_a_compacted_version_gets_a_410_expired_error_event(
    small_history: Cluster,
) -> None:
    http = Http(small_history)
    path = "/api/v1/namespaces/default/configmaps"
    first = http.post(path, _cm("c0")).json()["metadata"]["resourceVersion"]
    for i in range(1, 8):
        http.post(path, _cm(f"c{i}"))
    reply = http.get(f"{path}?watch=1&resourceVersion={first}&timeoutSeconds=1")
    assert reply.status == 200
    [event] = reply.lines()
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"
    assert event["object"]["message"].startswith(f"too old resource version: {first} (")


def test_the_python_client_reports_410_for_a_compacted_version(small_history: Cluster) -> None:
    with small_history.api_client() as api:
        core = client.CoreV1Api(api)
        for i in range(8):
            core.create_namespaced_config_map("default", _cm(f"p{i}"))
        with pytest.raises(client.ApiException) as info:
            for _ in watch.Watch().stream(
                core.list_namespaced_config_map, "default", resource_version="2", timeout_seconds=1
            ):
                pass
    assert info.value.status == 410


def test_an_expired_continue_token_is_410(small_history: Cluster) -> None:
    http = Http(small_history)
    path = "/api/v1/namespaces/default/configmaps"
    for i in range(3):
        http.post(path, _cm(f"page{i}"))
    token = http.get(f"{path}?limit=1").json()["metadata"]["continue"]
    for i in range(8):
        http.post(path, _cm(f"later{i}"))
    reply = http.get(f"{path}?limit=1&continue={token}")
    assert reply.status == 410
    assert status_of(reply)["reason"] == "Expired"


def test_an_exact_list_of_a_compacted_version_is_410(small_history: Cluster) -> None:
    http = Http(small_history)
    path = "/api/v1/namespaces/default/configmaps"
    for i in range(8):
        http.post(path, _cm(f"exact{i}"))
    reply = http.get(f"{path}?resourceVersion=1&resourceVersionMatch=Exact")
    assert reply.status == 410
    assert status_of(reply)["message"].startswith("too old resource version: 1 (")


def test_watch_ends_cleanly_at_timeout_seconds(http: Http, namespace: str) -> None:
    reply = http.get(
        f"/api/v1/namespaces/{namespace}/configmaps?watch=1&timeoutSeconds=1&{NOT_PUBLISHED}",
        timeout=10,
    )
    assert reply.status == 200
    assert reply.lines() == []


def test_watching_an_object_path_follows_only_that_object(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, _cm("mine"))
    http.post(path, _cm("other"))
    for url in (
        f"{path}/mine?watch=true&timeoutSeconds=1",
        f"/api/v1/watch/namespaces/{namespace}/configmaps/mine?timeoutSeconds=1",
    ):
        lines = http.get(url).lines()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [("ADDED", "mine")]


async def test_watchers_that_leave_or_outlive_the_server_end_without_logged_errors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Clients hanging up mid-stream, and a stop with watches open, end the watches quietly."""
    srv = await start_apiserver(ApiServerConfig(data_dir=tmp_path))
    ctx = ssl.create_default_context(cafile=str(srv.ca_file))
    auth = {"Authorization": f"Bearer {srv.token}"}
    paths = [
        "/api/v1/configmaps?watch=1&allowWatchBookmarks=true",
        "/api/v1/namespaces/default/configmaps?watch=1",
    ]

    async def watch_for(path: str, seconds: float) -> None:
        async with (
            aiohttp.ClientSession() as session,
            session.get(srv.url + path, headers=auth, ssl=ctx) as reply,
        ):
            with contextlib.suppress(TimeoutError, aiohttp.ClientError):
                await asyncio.wait_for(reply.content.read(), seconds)

    async def write(count: int) -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(count):
                body = {"metadata": {"generateName": "c"}, "data": {"a": "x" * 2000}}
                with contextlib.suppress(aiohttp.ClientError):
                    await session.post(
                        srv.url + "/api/v1/namespaces/default/configmaps",
                        json=body,
                        headers=auth,
                        ssl=ctx,
                    )

    with caplog.at_level(logging.DEBUG):
        leaving = [
            asyncio.create_task(watch_for(p, 0.05 * (i + 1))) for i, p in enumerate(paths * 3)
        ]
        await write(60)
        await asyncio.gather(*leaving)
        staying = [asyncio.create_task(watch_for(p, 30)) for p in paths]
        await write(5)
        await srv.stop()
        await asyncio.gather(*staying)
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
    assert noisy == [], [r.getMessage() for r in noisy]
