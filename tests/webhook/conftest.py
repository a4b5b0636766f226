"""A real webhook server on a loopback port, with certificates from certs/, and a TLS client."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
import uvloop

from certs import pki
from webhook.app import Settings
from webhook.server import RunningServer, ServerConfig, start

_ON_BOTH_LOOPS = {
    "test_cert_reload.py",
    "test_admission_over_tls.py",
    "test_bad_input.py",
    "test_large_reviews.py",
    "test_slow_clients.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]] | None:
    """The server's tests over TLS run on asyncio's loop and on uvloop's, which `trainops
    webhook` serves on: a certificate reload hands each handshake over in the front context's
    `sni_callback`, and the body limits read from aiohttp's buffer, which both loops'
    transports must honour."""
    if item.path.name not in _ON_BOTH_LOOPS:
        return None
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="session")
def ca() -> pki.KeyPair:
    return pki.new_ca("trainops-test-ca")


@pytest.fixture
def cert_dir(tmp_path: Path, ca: pki.KeyPair) -> Path:
    serving = pki.new_serving_cert(
        ca, ["trainops-webhook.trainops-system.svc"], now=datetime.now(UTC)
    )
    pki.write_bundle(tmp_path, ca, serving)
    return tmp_path


@pytest.fixture
def client_context(cert_dir: Path) -> ssl.SSLContext:
    """Trusts only the test CA and checks the host name, as the API server does."""
    ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


@dataclass
class Webhook:
    server: RunningServer
    session: aiohttp.ClientSession
    cert_dir: Path

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"

    async def post(self, path: str, body: dict | bytes) -> tuple[int, dict | str]:
        kwargs = {"data": body} if isinstance(body, bytes) else {"json": body}
        async with self.session.post(self.url + path, **kwargs) as resp:
            if resp.content_type == "application/json":
                return resp.status, await resp.json()
            return resp.status, await resp.text()


SETTINGS = Settings(body_timeout=1.0)


@pytest.fixture
async def webhook(cert_dir: Path, client_context: ssl.SSLContext) -> AsyncIterator[Webhook]:
    config = ServerConfig(
        cert_dir=cert_dir, host="127.0.0.1", port=0, settings=SETTINGS, reload_interval=0.05
    )
    server = await start(config)
    connector = aiohttp.TCPConnector(ssl=client_context)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield Webhook(server, session, cert_dir)
    await server.close()
