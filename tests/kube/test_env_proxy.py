"""The environment's proxy for the API server is resolved once, when a client is made, and the
session does not look it (and ~/.netrc) up per request (kube/transport.py)."""

from __future__ import annotations

import pytest

from kube import Client
from kube.config import Config


def _client(host: str, proxy_url: str | None = None) -> Client:
    return Client.from_config(Config(server=host, proxy_url=proxy_url))


async def test_an_https_proxy_from_the_environment_is_pinned_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = _client("https://api.example.test:6443")
    try:
        assert client._http.proxy == "http://127.0.0.1:3128"
        assert client._http._pool.get().trust_env is False
    finally:
        await client.close()


async def test_proxy_credentials_from_the_environment_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://me:secret@127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = _client("https://api.example.test:6443")
    try:
        assert client._http.proxy == "http://me:secret@127.0.0.1:3128"
    finally:
        await client.close()


async def test_no_proxy_keeps_the_api_server_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "api.example.test")
    client = _client("https://api.example.test:6443")
    try:
        assert client._http.proxy is None
        assert client._http._pool.get().trust_env is False
    finally:
        await client.close()


async def test_a_kubeconfig_proxy_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    client = _client("https://api.example.test:6443", proxy_url="http://127.0.0.1:8888")
    try:
        assert client._http.proxy == "http://127.0.0.1:8888"
        assert client.impersonating("someone")._http.proxy == "http://127.0.0.1:8888"
    finally:
        await client.close()


async def test_requests_go_through_the_kubeconfig_proxy() -> None:
    import asyncio

    seen: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head.split(b"\r\n")[0])
        body = b'{"major": "1"}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = _client("http://api.example.test:6443", proxy_url=f"http://127.0.0.1:{port}")
    try:
        assert await client.request("GET", "/version", timeout=5) == {"major": "1"}
        assert seen == [b"GET http://api.example.test:6443/version HTTP/1.1"]
    finally:
        await client.close()
        server.close()
