"""A reader that leaves a followed log is no error: the kubelet ends that follow quietly.

The way it happens under `trainops up`: a browser closes a followed log, the dashboard closes
its `pods/log` request, the API server drops its connection to the kubelet, and the kubelet's
next write finds the connection gone. That used to escape the handler, and aiohttp printed
`Error handling request` with a `ClientConnectionResetError` traceback in `up`'s terminal.

Here the reader is a plain TLS client with the API server's client certificate (what the API
server presents) that reads a few lines and hangs up, three times, on a chatty container and
on a quiet one (which no write notices: the follow must see the closed connection itself).
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from typing import Any

import pytest

from tests.kubelet.conftest import LocalNode, eventually
from tests.support import kubeletclient

LEFT = "ended: the reader left"


def _running_pod(core: Any, namespace: str, name: str, script: str) -> None:
    pod = {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    eventually(
        lambda: core.read_namespaced_pod(name, namespace).status.phase == "Running", timeout=30
    )


def _follow_then_hang_up(local_node: LocalNode, path: str, want: bytes) -> None:
    """GET `path` with follow, read until `want` arrived, then close the socket at once."""
    port = kubeletclient.node_port(local_node.kubeconfig, "trainops")
    pki_dir = local_node.data_dir / "pki"
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(pki_dir / "kubelet-client.crt", pki_dir / "kubelet-client.key")
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn = context.wrap_socket(raw)
    try:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        got = b""
        deadline = time.monotonic() + 15
        while want not in got and time.monotonic() < deadline:
            got += conn.recv(4096)
        assert want in got, got[-500:]
    finally:
        # No close_notify, no FIN wait: the connection is just gone, as when the API server
        # aborts its transport to the kubelet.
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
        conn.close()


@pytest.mark.parametrize(
    ("script", "want"),
    [
        ("i=0; while true; do i=$((i+1)); echo tick $i; sleep 0.05; done", b"tick 3\n"),
        ("echo ready; while true; do sleep 0.05; done", b"ready\n"),
    ],
    ids=["chatty", "quiet"],
)
def test_a_reader_leaving_a_followed_log_ends_it_without_an_error(
    core: Any,
    namespace: str,
    local_node: LocalNode,
    caplog: pytest.LogCaptureFixture,
    script: str,
    want: bytes,
) -> None:
    caplog.set_level(logging.DEBUG, logger="localcluster.kubelet.logserver")
    _running_pod(core, namespace, "talker", script)
    path = f"/containerLogs/{namespace}/talker/c?follow=true"

    def over() -> int:
        # Either way a follow is over: it said the reader left, or something was logged as an
        # error (the traceback this test is about).
        return sum(r.levelno >= logging.ERROR or LEFT in r.getMessage() for r in caplog.records)

    for attempt in range(1, 4):
        _follow_then_hang_up(local_node, path, want)
        eventually(lambda: over() >= attempt, timeout=10)  # noqa: B023 (called at once)
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not errors, [(r.name, r.getMessage(), r.exc_text) for r in errors]
    assert sum(LEFT in r.getMessage() for r in caplog.records) == 3
