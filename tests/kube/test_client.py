"""`kube.Client` against a real API server over loopback: CRUD, every patch type, conditional
deletes, the status subresource, the error family, watches, and timeouts on a hung server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from kube import Client, errors, resources
from kube.errors import AlreadyExists, Conflict, Gone, Invalid, NotFound, Unavailable
from tests.kube.conftest import NOT_PUBLISHED, PrivateServer
from tests.support.cluster import Cluster, aeventually


def _cm(name: str, namespace: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


async def test_create_get_list_replace_delete_round_trip_plain_dicts(
    client: Client, namespace: str
) -> None:
    created = await client.create(resources.CONFIGMAPS, _cm("a", namespace, k="v"))
    assert created["metadata"]["uid"] and created["data"] == {"k": "v"}

    got = await client.get(resources.CONFIGMAPS, "a", namespace)
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    got["data"]["k"] = "w"
    replaced = await client.replace(resources.CONFIGMAPS, got)
    assert replaced["data"] == {"k": "w"}

    listed = await client.list(resources.CONFIGMAPS, namespace, field_selector=NOT_PUBLISHED)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a"]
    assert listed["metadata"]["resourceVersion"]

    await client.delete(resources.CONFIGMAPS, "a", namespace)
    with pytest.raises(NotFound):
        await client.get(resources.CONFIGMAPS, "a", namespace)


async def test_list_selects_by_label_and_pages_with_continue(
    client: Client, namespace: str
) -> None:
    for i in range(5):
        body = _cm(f"c{i}", namespace)
        body["metadata"]["labels"] = {"parity": "even" if i % 2 == 0 else "odd"}
        await client.create(resources.CONFIGMAPS, body)
    even = await client.list(resources.CONFIGMAPS, namespace, label_selector="parity=even")
    assert sorted(i["metadata"]["name"] for i in even["items"]) == ["c0", "c2", "c4"]

    first = await client.list(
        resources.CONFIGMAPS, namespace, limit=2, field_selector=NOT_PUBLISHED
    )
    assert len(first["items"]) == 2 and first["metadata"]["continue"]
    rest = await client.list(
        resources.CONFIGMAPS,
        namespace,
        limit=10,
        continue_token=first["metadata"]["continue"],
        field_selector=NOT_PUBLISHED,
    )
    names = [i["metadata"]["name"] for i in first["items"] + rest["items"]]
    assert sorted(names) == [f"c{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("patch_type", "patch", "expected"),
    [
        ("merge", {"data": {"b": "2", "a": None}}, {"b": "2"}),
        ("json", [{"op": "add", "path": "/data/b", "value": "2"}], {"a": "1", "b": "2"}),
        ("strategic", {"data": {"b": "2"}}, {"a": "1", "b": "2"}),
    ],
)
async def test_patch_sends_the_content_type_of_each_patch_type(
    client: Client, namespace: str, patch_type: Any, patch: Any, expected: dict[str, str]
) -> None:
    await client.create(resources.CONFIGMAPS, _cm("p", namespace, a="1"))
    patched = await client.patch(resources.CONFIGMAPS, "p", patch, namespace, patch_type=patch_type)
    assert patched["data"] == expected


async def test_server_side_apply_records_the_field_manager_and_force_takes_over(
    client: Client, namespace: str
) -> None:
    applied = await client.patch(
        resources.CONFIGMAPS,
        "s",
        _cm("s", namespace, a="1"),
        namespace,
        patch_type="apply",
        field_manager="one",
    )
    assert applied["data"] == {"a": "1"}
    managers = {m["manager"] for m in applied["metadata"]["managedFields"]}
    assert "one" in managers

    with pytest.raises(Conflict):
        await client.patch(
            resources.CONFIGMAPS,
            "s",
            _cm("s", namespace, a="2"),
            namespace,
            patch_type="apply",
            field_manager="two",
        )
    forced = await client.patch(
        resources.CONFIGMAPS,
        "s",
        _cm("s", namespace, a="2"),
        namespace,
        patch_type="apply",
        field_manager="two",
        force=True,
    )
    assert forced["data"] == {"a": "2"}


async def test_delete_with_a_stale_uid_precondition_is_a_conflict_and_the_object_survives(
    client: Client, namespace: str
) -> None:
    created = await client.create(resources.CONFIGMAPS, _cm("d", namespace))
    with pytest.raises(Conflict):
        await client.delete(
            resources.CONFIGMAPS, "d", namespace, preconditions={"uid": "not-the-uid"}
        )
    await client.get(resources.CONFIGMAPS, "d", namespace)
    await client.delete(
        resources.CONFIGMAPS,
        "d",
        namespace,
        preconditions={"uid": created["metadata"]["uid"]},
        propagation_policy="Background",
        grace_period_seconds=0,
    )
    with pytest.raises(NotFound):
        await client.get(resources.CONFIGMAPS, "d", namespace)


async def test_status_subresource_replace_changes_status_only(
    client: Client, namespace: str
) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    await client.create(resources.DEPLOYMENTS, deployment)

    async def replace_status() -> dict[str, Any]:
        # On a real cluster the Deployment controller writes the status too: retry a conflict.
        current = await client.get(resources.DEPLOYMENTS, "web", namespace)
        current["status"] = {"observedGeneration": 7}
        current["spec"]["replicas"] = 3
        return await client.replace(resources.DEPLOYMENTS, current, subresource="status")

    updated = await aeventually(replace_status, timeout=10)
    assert updated["status"]["observedGeneration"] == 7
    assert updated["spec"]["replicas"] == 0

    patched = await client.patch(
        resources.DEPLOYMENTS,
        "web",
        {"status": {"observedGeneration": 8}},
        namespace,
        subresource="status",
    )
    assert patched["status"]["observedGeneration"] == 8


async def test_refusals_map_to_the_error_family(client: Client, namespace: str) -> None:
    with pytest.raises(NotFound) as nf:
        await client.get(resources.CONFIGMAPS, "missing", namespace)
    assert nf.value.status == 404 and nf.value.reason == "NotFound"

    await client.create(resources.CONFIGMAPS, _cm("x", namespace))
    with pytest.raises(AlreadyExists) as ae:
        await client.create(resources.CONFIGMAPS, _cm("x", namespace))
    assert isinstance(ae.value, Conflict) and ae.value.status == 409

    bad = _cm("Not_A_Valid_Name", namespace)
    with pytest.raises(Invalid) as inv:
        await client.create(resources.CONFIGMAPS, bad)
    assert inv.value.status == 422 and "Not_A_Valid_Name" in inv.value.message

    stale = await client.get(resources.CONFIGMAPS, "x", namespace)
    await client.patch(resources.CONFIGMAPS, "x", {"data": {"n": "1"}}, namespace)
    with pytest.raises(Conflict) as cf:
        await client.replace(resources.CONFIGMAPS, stale)
    assert not isinstance(cf.value, AlreadyExists)


async def test_binding_subresource_and_pod_log_through_the_escape_hatch(
    client: Client, namespace: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]},
    }
    await client.create(resources.PODS, pod)
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": namespace},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-x"},
    }
    await client.create(resources.PODS, binding, subresource="binding")
    bound = await client.get(resources.PODS, "p", namespace)
    assert bound["spec"]["nodeName"] == "node-x"

    raw = await client.request("GET", resources.PODS.object_path("p", namespace), raw=True)
    assert isinstance(raw, bytes) and b'"node-x"' in raw
    answer = await client.request("GET", "/version")
    assert isinstance(answer, dict)


async def test_watch_yields_events_from_a_resource_version(client: Client, namespace: str) -> None:
    listed = await client.list(resources.CONFIGMAPS, namespace)
    rv = listed["metadata"]["resourceVersion"]
    await client.create(resources.CONFIGMAPS, _cm("w", namespace))
    seen = []
    events = client.watch(resources.CONFIGMAPS, namespace, resource_version=rv, timeout_seconds=5)
    async with contextlib.aclosing(events):
        async for event_type, obj in events:
            seen.append((event_type, obj["metadata"]["name"]))
            if event_type == "ADDED":
                break
    assert seen[-1] == ("ADDED", "w")


async def test_a_watch_from_an_expired_resource_version_raises_gone(
    private_server: PrivateServer,
) -> None:
    client = await private_server.client()
    try:
        first = await client.create(resources.CONFIGMAPS, _cm("g0", "default"))
        for i in range(1, 10):
            await client.create(resources.CONFIGMAPS, _cm(f"g{i}", "default"))
        with pytest.raises(Gone) as e:
            async for _ in client.watch(
                resources.CONFIGMAPS,
                "default",
                resource_version=first["metadata"]["resourceVersion"],
                timeout_seconds=5,
            ):
                pass
        assert e.value.status == 410
    finally:
        await client.close()


# -- a server that accepts and never answers --------------------------------------------------


@contextlib.asynccontextmanager
async def _hung_server(headers: bytes = b"") -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that reads requests and answers nothing (or only `headers`)."""
    writers = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        if headers:
            writer.write(headers)
            await writer.drain()
        await asyncio.Event().wait()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for w in writers:
            w.close()
        server.close()


def _plain_client(port: int, timeout: float) -> Client:
    from kube.config import Config

    return Client.from_config(Config(server=f"http://127.0.0.1:{port}"), timeout=timeout)


async def test_a_hung_server_makes_calls_raise_unavailable_within_their_timeout() -> None:
    async with _hung_server() as port:
        client = _plain_client(port, timeout=0.3)
        try:
            start = time.monotonic()
            with pytest.raises(Unavailable) as e:
                await client.get(resources.PODS, "p", "ns")
            assert e.value.status == 0
            with pytest.raises(Unavailable):
                await client.list(resources.PODS, "ns", timeout=0.2)
            with pytest.raises(Unavailable):
                async for _ in client.watch(resources.PODS, "ns", timeout_seconds=1):
                    pass
            assert time.monotonic() - start < 5
        finally:
            await client.close()


async def test_a_watch_whose_server_stops_sending_ends_with_unavailable() -> None:
    headers = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    async with _hung_server(headers) as port:
        client = _plain_client(port, timeout=0.3)
        try:
            start = time.monotonic()
            with pytest.raises(Unavailable):
                async for _ in client.watch(resources.PODS, "ns", timeout_seconds=1):
                    pass
            assert time.monotonic() - start < 5
        finally:
            await client.close()


async def test_a_refused_connection_is_unavailable_with_status_zero() -> None:
    async with _hung_server() as port:
        pass
    client = _plain_client(port, timeout=2)
    try:
        with pytest.raises(Unavailable) as e:
            await client.get(resources.PODS, "p", "ns")
        assert e.value.status == 0
        assert e.value.message == (
            f"GET /api/v1/namespaces/ns/pods/p: cannot connect to 127.0.0.1:{port}: "
            "connection refused"
        )
    finally:
        await client.close()


async def test_connect_reads_the_kubeconfig(cluster: Cluster) -> None:
    client = await Client.connect(str(cluster.kubeconfig))
    try:
        assert client.host.rstrip("/") == cluster.url.rstrip("/")
        ns = await client.get(resources.NAMESPACES, "default")
        assert ns["metadata"]["name"] == "default"
    finally:
        await client.close()
    assert errors.NotFound is NotFound
    await aeventually(lambda: True)


async def test_stream_lines_follows_a_streamed_answer_line_by_line(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, _cm("s1", namespace))
    await client.create(resources.CONFIGMAPS, _cm("s2", namespace))
    lines = client.stream_lines(
        resources.CONFIGMAPS.collection_path(namespace),
        query={"watch": True, "timeoutSeconds": 1, "fieldSelector": NOT_PUBLISHED},
        idle_timeout=5,
    )
    names = []
    async with contextlib.aclosing(lines):
        async for line in lines:
            names.append(orjson.loads(line)["object"]["metadata"]["name"])
    assert sorted(names) == ["s1", "s2"]


async def test_every_write_names_the_clients_field_manager(
    cluster: Cluster, namespace: str
) -> None:
    async with await Client.connect(cluster.kubeconfig, field_manager="trainops-test") as client:
        await client.create(resources.CONFIGMAPS, _cm("fm", namespace, a="1"))
        got = await client.get(resources.CONFIGMAPS, "fm", namespace)
        got["data"]["a"] = "2"
        await client.replace(resources.CONFIGMAPS, got)
        await client.patch(resources.CONFIGMAPS, "fm", {"data": {"b": "3"}}, namespace)
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "fm", "namespace": namespace},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "fm"}},
                "template": {
                    "metadata": {"labels": {"app": "fm"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            },
        }
        await client.create(resources.DEPLOYMENTS, deployment)

        async def replace_status() -> dict[str, Any]:
            current = await client.get(resources.DEPLOYMENTS, "fm", namespace)
            current["status"] = {"observedGeneration": 7}
            return await client.replace(resources.DEPLOYMENTS, current, subresource="status")

        status = await aeventually(replace_status, timeout=10)
        cm = await client.get(resources.CONFIGMAPS, "fm", namespace)
    for obj in (cm, status):
        managers = {m["manager"] for m in obj["metadata"]["managedFields"]}
        assert "trainops-test" in managers
        assert not any(m.startswith("OpenAPI-Generator") for m in managers)
    subresources = {
        (m["manager"], m.get("subresource", "")) for m in status["metadata"]["managedFields"]
    }
    assert ("trainops-test", "status") in subresources
