"""`kube.Informer` against a real API server: list then watch, handlers and indexes, a relist
after 410 Gone, and convergence across an API server restart with changes made meanwhile."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kube import Client, Informer, resources
from tests.kube.conftest import NOT_PUBLISHED, PrivateServer
from tests.support.cluster import aeventually


def _cm(name: str, namespace: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {},
    }


class Recorder:
    """A handler that remembers `(event_type, name)`; async, to exercise awaiting handlers."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def __call__(
        self, event_type: str, obj: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        if event_type == "MODIFIED":
            assert old is not None and old["metadata"]["name"] == obj["metadata"]["name"]
        self.events.append((event_type, obj["metadata"]["name"]))


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        assert await informer.wait_synced(10)
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_informer_lists_then_sees_adds_changes_and_deletes(
    client: Client, namespace: str
) -> None:
    await client.create(resources.CONFIGMAPS, _cm("before", namespace, team="a"))
    informer = Informer(
        client,
        resources.CONFIGMAPS,
        namespace,
        field_selector=NOT_PUBLISHED,
        indexers={"team": lambda o: [o["metadata"].get("labels", {}).get("team", "")]},
    )
    recorder = Recorder()
    informer.add_handler(recorder)
    assert not informer.has_synced
    async with running(informer):
        assert informer.has_synced
        assert recorder.events == [("ADDED", "before")]
        assert informer.keys() == [f"{namespace}/before"]

        await client.create(resources.CONFIGMAPS, _cm("after", namespace, team="b"))
        await client.patch(
            resources.CONFIGMAPS, "before", {"metadata": {"labels": {"team": "b"}}}, namespace
        )
        await client.delete(resources.CONFIGMAPS, "after", namespace)
        await aeventually(lambda: len(recorder.events) == 4)
        assert recorder.events[1:] == [
            ("ADDED", "after"),
            ("MODIFIED", "before"),
            ("DELETED", "after"),
        ]
        cached = informer.get(namespace, "before")
        assert cached is not None and cached["metadata"]["labels"] == {"team": "b"}
        assert informer.get_by_key(f"{namespace}/after") is None
        assert [o["metadata"]["name"] for o in informer.by_index("team", "b")] == ["before"]
        assert informer.by_index("team", "a") == []
        assert [o["metadata"]["name"] for o in informer.list()] == ["before"]


async def test_a_handler_added_late_is_given_what_is_already_cached(
    client: Client, namespace: str
) -> None:
    """As client-go's late handlers: the objects cached before it came, as ADDED, then the
    changes as everyone sees them (a second reader of a shared cache misses nothing)."""
    for name in ("one", "two"):
        await client.create(resources.CONFIGMAPS, _cm(name, namespace))
    informer = Informer(client, resources.CONFIGMAPS, namespace, field_selector=NOT_PUBLISHED)
    async with running(informer):
        late, plain = Recorder(), []
        informer.add_handler(late)
        informer.add_handler(lambda event, obj, old: plain.append((event, obj["metadata"]["name"])))
        assert sorted(plain) == [("ADDED", "one"), ("ADDED", "two")]
        await aeventually(lambda: len(late.events) == 2)
        assert sorted(late.events) == [("ADDED", "one"), ("ADDED", "two")]
        await client.create(resources.CONFIGMAPS, _cm("three", namespace))
        await aeventually(lambda: len(late.events) == 3 and len(plain) == 3)
        assert late.events[-1] == plain[-1] == ("ADDED", "three")


async def test_a_failing_handler_is_logged_and_does_not_stop_the_informer(
    client: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(event_type: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        raise RuntimeError("handler bug")

    informer = Informer(client, resources.CONFIGMAPS, namespace, label_selector="app=x")
    recorder = Recorder()
    informer.add_handler(broken)
    informer.add_handler(recorder)
    async with running(informer):
        await client.create(resources.CONFIGMAPS, _cm("one", namespace, app="x"))
        await client.create(resources.CONFIGMAPS, _cm("other", namespace, app="y"))
        await client.create(resources.CONFIGMAPS, _cm("two", namespace, app="x"))
        await aeventually(lambda: recorder.events == [("ADDED", "one"), ("ADDED", "two")])
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 2 and all(r.exc_info for r in errors)


async def test_an_informer_relists_when_its_resource_version_has_expired(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # No bookmarks (they would keep the informer's resourceVersion fresh), a history of 5
    # events, and a selector that hides the writes which push its version out of history.
    server = PrivateServer(tmp_path / "apiserver", event_history=5, bookmark_interval=600)
    await server.start()
    client = await server.client()
    try:
        caplog.set_level(logging.WARNING)
        informer = Informer(
            client, resources.CONFIGMAPS, "default", label_selector="app=x", watch_timeout=1
        )
        recorder = Recorder()
        informer.add_handler(recorder)
        async with running(informer):
            await client.create(resources.CONFIGMAPS, _cm("seen", "default", app="x"))
            await aeventually(lambda: recorder.events == [("ADDED", "seen")])
            for i in range(10):
                await client.create(resources.CONFIGMAPS, _cm(f"hidden{i}", "default"))
            await aeventually(lambda: informer.relists >= 1, timeout=5)
            assert any("expired" in r.getMessage() for r in caplog.records)
            await client.create(resources.CONFIGMAPS, _cm("later", "default", app="x"))
            await aeventually(lambda: recorder.events[-1] == ("ADDED", "later"))
            assert recorder.events == [("ADDED", "seen"), ("ADDED", "later")]
    finally:
        await client.close()
        await server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_informer_converges_after_the_api_server_restarts(
    private_server: PrivateServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    client = await private_server.client(timeout=2)
    port = private_server.port
    try:
        for name in ("keep", "change", "remove"):
            await client.create(resources.CONFIGMAPS, _cm(name, "default", app="r"))
        informer = Informer(
            client,
            resources.CONFIGMAPS,
            "default",
            label_selector="app=r",
            initial_backoff=0.05,
            max_backoff=0.5,
        )
        recorder = Recorder()
        informer.add_handler(recorder)
        async with running(informer):
            assert sorted(informer.keys()) == ["default/change", "default/keep", "default/remove"]
            await private_server.stop()

            # Meanwhile, another server on the same data writes changes the informer misses.
            await private_server.start(port=_free_port())
            other = await private_server.client()
            try:
                await other.create(resources.CONFIGMAPS, _cm("new", "default", app="r"))
                await other.patch(resources.CONFIGMAPS, "change", {"data": {"v": "2"}}, "default")
                await other.delete(resources.CONFIGMAPS, "remove", "default")
            finally:
                await other.close()
            await private_server.stop()

            await private_server.start(port=port)
            await aeventually(
                lambda: (
                    sorted(informer.keys()) == ["default/change", "default/keep", "default/new"]
                ),
                timeout=10,
            )
            assert (informer.get("default", "change") or {})["data"] == {"v": "2"}
            assert set(recorder.events[3:]) == {
                ("ADDED", "new"),
                ("MODIFIED", "change"),
                ("DELETED", "remove"),
            }
            assert any("list/watch failed" in r.getMessage() for r in caplog.records)
    finally:
        await client.close()


async def test_an_informer_lists_in_pages(client: Client, namespace: str) -> None:
    for i in range(5):
        await client.create(resources.CONFIGMAPS, _cm(f"p{i}", namespace))
    informer = Informer(
        client, resources.CONFIGMAPS, namespace, page_size=2, field_selector=NOT_PUBLISHED
    )
    async with running(informer):
        assert sorted(informer.keys()) == [f"{namespace}/p{i}" for i in range(5)]
