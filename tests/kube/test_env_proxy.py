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
