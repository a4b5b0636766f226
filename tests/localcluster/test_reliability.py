"""Bounded memory and committed writes: the event log's byte cap, bounded subscriber queues
(a subscriber that falls behind is cut off and starts over from a list), and storage listeners
that fail after a commit. Each test runs its own server with small bounds, over loopback."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.store.records import Event
from tests.localcluster._http import Http, Reply
from tests.support.cluster import BackgroundApiServer, Cluster, eventually

pytestmark = pytest.mark.embedded_only(reason="bounds and listeners of the embedded server itself")

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def _cm(name: str, size: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"blob": "x" * size}}


def _stored_cm(name: str) -> dict[str, Any]:
    """A ConfigMap as the write pipeline would store it (for bursts committed in one batch)."""
    meta = {"name": name, "namespace": "default", "uid": str(uuid.uuid4())}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": name}}


def _stored_ns(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


class _Private:
    """One embedded server with its own bounds, and ways to reach inside it."""

    def __init__(self, data_dir: Path, **config: Any) -> None:
        self.embedded = BackgroundApiServer(data_dir, **config)
        srv = self.embedded.server
        self.cluster = Cluster(srv.kubeconfig, srv.url, srv.token, srv.ca_file, data_dir)
        self.http = Http(self.cluster)

    @property
    def srv(self) -> Any:
        return self.embedded.server.server

    def subscribers(self, resource: str = "/configmaps") -> int:
        async def count() -> int:
            return int(self.srv.hub.subscribers_of(resource))

        return self.embedded.call(count())

    def burst(self, resource: str, objs: list[dict[str, Any]]) -> None:
        """Commit `objs` in one storage batch: their events are published in one loop step."""

        async def commit() -> None:
            await asyncio.gather(*(self.srv.store.create(resource, obj) for obj in objs))

        self.embedded.call(commit())


@pytest.fixture
def private(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[_Private]:
    server = _Private(tmp_path / "apiserver", **request.param)
    try:
        # The server publishes kube-root-ca.crt into each namespace in the background; wait
        # for it, so that no test's watch or event log sees that write interleaved with its own.
        eventually(lambda: server.http.get(f"{CONFIGMAPS}/kube-root-ca.crt").status == 200)
        yield server
    finally:
        server.embedded.stop()


def _watch_in_thread(http: Http, path: str) -> tuple[threading.Thread, list[Reply]]:
    replies: list[Reply] = []
    thread = threading.Thread(target=lambda: replies.append(http.get(path, timeout=60)))
    thread.start()
    return thread, replies


# -- the event log: capped by bytes as well as by count ----------------------------------------


@pytest.mark.parametrize(
    "private", [{"event_history": 10_000, "event_history_bytes": 200_000}], indirect=True
)
def test_the_event_log_is_capped_by_bytes_and_a_watch_from_an_evicted_version_gets_410(
    private: _Private,
) -> None:
    first = private.http.post(CONFIGMAPS, _cm("small")).json()["metadata"]["resourceVersion"]
    versions = [
        private.http.post(CONFIGMAPS, _cm(f"big{i}", 50_000)).json()["metadata"]["resourceVersion"]
        for i in range(6)
    ]

    [expired] = private.http.get(f"{CONFIGMAPS}?watch=1&resourceVersion={first}").lines()
    assert expired["type"] == "ERROR"
    assert expired["object"]["code"] == 410
    assert expired["object"]["reason"] == "Expired"
    assert expired["object"]["message"].startswith(f"too old resource version: {first} (")

    recent = private.http.get(
        f"{CONFIGMAPS}?watch=1&resourceVersion={versions[-2]}&timeoutSeconds=1"
    ).lines()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in recent] == [("ADDED", "big5")]


# -- subscribers: bounded queues, cut off when they fall behind -------------------------------


@pytest.mark.parametrize("private", [{"watch_queue_bytes": 1_000_000}], indirect=True)
def test_a_watcher_that_never_reads_has_its_watch_ended_and_can_re_list(
    private: _Private,
) -> None:
    baseline = private.subscribers()
    rv = private.http.get(CONFIGMAPS).json()["metadata"]["resourceVersion"]
    host, port = private.cluster.url.removeprefix("https://").rsplit(":", 1)
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.settimeout(30)
    raw.connect((host, int(port)))
    tls = ssl.create_default_context(cafile=str(private.cluster.ca_file))
    with tls.wrap_socket(raw, server_hostname=host) as conn:
        conn.sendall(
            f"GET {CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=600 HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: Bearer {private.cluster.token}\r\n\r\n".encode()
        )
        eventually(lambda: private.subscribers() == baseline + 1)

        # ~12 MB of events: far more than the socket buffers and the 1 MB queue bound hold.
        for i in range(60):
            assert private.http.post(CONFIGMAPS, _cm(f"cm{i}", 200_000)).status == 201

        eventually(lambda: private.subscribers() == baseline)
        received = bytearray()
        while chunk := _recv(conn):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    assert not received.endswith(b"0\r\n\r\n")  # cut off, not a clean end of the stream

    listed = private.http.get(CONFIGMAPS).json()
    names = sorted(i["metadata"]["name"] for i in listed["items"])
    assert names == sorted([*(f"cm{i}" for i in range(60)), "kube-root-ca.crt"])


def _recv(conn: ssl.SSLSocket) -> bytes:
    try:
        return conn.recv(65536)
    except (ConnectionResetError, ssl.SSLError):
        return b""


@pytest.mark.parametrize("private", [{"watch_queue_events": 3}], indirect=True)
def test_a_watcher_that_falls_behind_gets_a_410_expired_error_event_and_the_stream_ends(
    private: _Private,
) -> None:
    rv = private.http.get(CONFIGMAPS).json()["metadata"]["resourceVersion"]
    baseline = private.subscribers()
    thread, replies = _watch_in_thread(
        private.http, f"{CONFIGMAPS}?watch=1&resourceVersion={rv}&timeoutSeconds=30"
    )
    eventually(lambda: private.subscribers() == baseline + 1)

    private.burst("/configmaps", [_stored_cm(f"b{i}") for i in range(10)])

    thread.join(30)
    [reply] = replies
    *events, last = reply.lines()
    assert [e["object"]["metadata"]["name"] for e in events] == ["b0", "b1", "b2"]
    assert last["type"] == "ERROR"
    assert last["object"]["code"] == 410
    assert last["object"]["reason"] == "Expired"
    assert last["object"]["message"] == (
        "watch of configmaps fell behind: more than 3 events or 268435456 bytes waiting; re-list"
    )


@pytest.mark.parametrize("private", [{"watch_queue_events": 3}], indirect=True)
def test_controllers_that_fall_behind_re_read_everything_and_miss_no_namespace(
    private: _Private, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="localcluster.controllers")
    names = [f"burst{i}" for i in range(20)]

    private.burst("/namespaces", [_stored_ns(n) for n in names])

    def every_namespace_has_its_default_service_account() -> bool:
        return all(
            private.http.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status == 200
            for name in names
        )

    eventually(every_namespace_has_its_default_service_account)
    assert any("fell behind" in r.getMessage() for r in caplog.records)


# -- storage listeners: a failure after the commit never holds back the write's answer ---------


@pytest.mark.parametrize("private", [{}], indirect=True)
def test_a_failing_storage_listener_does_not_keep_a_committed_write_from_its_caller(
    private: _Private, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="localcluster.storage")
    heard: list[str] = []

    def broken(event: Event) -> None:
        raise RuntimeError(f"listener bug on {event.name}")

    async def install() -> None:
        private.srv.store.listeners.extend([broken, lambda e: heard.append(e.name)])
        # (the default ServiceAccounts the controllers create also reach both listeners)

    private.embedded.call(install())

    created = private.http.post(CONFIGMAPS, _cm("kept"), timeout=10)
    assert created.status == 201
    assert created.json()["metadata"]["name"] == "kept"
    stored = private.http.get(f"{CONFIGMAPS}/kept")
    assert stored.status == 200
    assert stored.json()["data"] == {"blob": ""}
    assert private.http.post(CONFIGMAPS, _cm("next"), timeout=10).status == 201
    assert [n for n in heard if n in ("kept", "next")] == ["kept", "next"]
    [record] = [r for r in caplog.records if "default/kept" in r.getMessage()]
    assert record.name == "localcluster.storage"
    assert "failed on ADDED /configmaps default/kept" in record.getMessage()
    assert "the write is committed" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "listener bug on kept"
