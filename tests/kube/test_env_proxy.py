"""The environment's proxy for the API server is resolved once, when a client is made, and the
session stops looking it (and ~/.netrc) up per request (kube/transport.py)."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import Configuration

from kube import Client


def _client(host: str) -> Client:
    cfg = Configuration()
    cfg.host = host
    return Client.from_configuration(cfg)


async def test_an_https_proxy_from_the_environment_is_pinned_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = _client("https://api.example.test:6443")
    try:
        rest = client._http.api_client.rest_client
        assert rest.proxy == "http://127.0.0.1:3128"
        assert rest.pool_manager.trust_env is False
    finally:
        await client.close()


async def test_no_proxy_keeps_the_api_server_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "api.example.test")
    client = _client("https://api.example.test:6443")
    try:
        rest = client._http.api_client.rest_client
        assert not rest.proxy
        assert rest.pool_manager.trust_env is False
    finally:
        await client.close()


async def test_a_kubeconfig_proxy_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    cfg = Configuration()
    cfg.host = "https://api.example.test:6443"
    cfg.proxy = "http://127.0.0.1:8888"
    client = Client.from_configuration(cfg)
    try:
        assert client._http.api_client.rest_client.proxy == "http://127.0.0.1:8888"
    finally:
        await client.close()
