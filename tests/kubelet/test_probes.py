"""Probe thresholds follow Kubernetes; handlers run against real processes and sockets."""

from __future__ import annotations

import asyncio
import os

import pytest

from localcluster.kubelet.probes import ProbeState, ProbeTiming, observe, run_probe, timing

T = ProbeTiming(initial_delay=0, period=1, timeout=1, success_threshold=2, failure_threshold=3)


def _run(results: list[bool], start: bool) -> list[bool]:
    state = ProbeState(ok=start)
    verdicts = []
    for r in results:
        state = observe(state, r, T)
        verdicts.append(state.ok)
    return verdicts


SEQUENCES = {
    "two successes to become ready": ([True, True], False, [False, True]),
    "a failure resets the success streak": (
        [True, False, True, True],
        False,
        [False, False, False, True],
    ),
    "three failures to fail": ([False, False, False], True, [True, True, False]),
    "a success resets the failure streak": ([False, False, True, False, False], True, [True] * 5),
}


@pytest.mark.parametrize(("results", "start", "want"), SEQUENCES.values(), ids=SEQUENCES.keys())
def test_thresholds(results: list[bool], start: bool, want: list[bool]) -> None:
    assert _run(results, start) == want


def test_defaults_are_kubernetes_defaults() -> None:
    assert timing({}) == ProbeTiming(0, 10, 1, 1, 3)


ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def _probe(probe: dict, container: dict | None = None) -> tuple[bool, str]:
    return await run_probe(
        probe, container=container or {}, env=ENV, static_env={"F": "/nonexistent"}, cwd="/"
    )


async def test_exec_probes_use_the_exit_code_and_expand_static_env() -> None:
    assert (await _probe({"exec": {"command": ["true"]}}))[0]
    ok, message = await _probe({"exec": {"command": ["sh", "-c", "echo nope; exit 1"]}})
    assert (ok, message) == (False, "nope")
    ok, _ = await _probe({"exec": {"command": ["test", "-e", "$(F)"]}})
    assert not ok


async def test_tcp_and_http_probes_reach_loopback_servers_by_port_name() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        path = (await asyncio.sleep(0)) or b""
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" + path)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    container = {"ports": [{"name": "http", "containerPort": port}]}
    try:
        assert (await _probe({"tcpSocket": {"port": "http"}}, container))[0]
        assert (await _probe({"httpGet": {"port": "http", "path": "/healthz"}}, container))[0]
    finally:
        server.close()
        await server.wait_closed()
    ok, message = await _probe({"tcpSocket": {"port": port}})
    assert not ok and message.startswith(f"dial tcp 127.0.0.1:{port}")
