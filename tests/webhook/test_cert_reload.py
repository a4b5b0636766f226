"""A rotated certificate pair on disk is served to new connections without a restart."""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime

import pytest
from cryptography import x509

from certs import pki
from tests.webhook.conftest import Webhook

# With SNI (a DNS name, as the API server uses) and without (an IP address sends none).
SERVER_NAMES = {"with SNI": "localhost", "without SNI": None}


async def _served_serial(port: int, ctx: ssl.SSLContext, server_name: str | None) -> int:
    _, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname=server_name or ""
    )
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der).serial_number
    finally:
        writer.close()


async def _eventually_serial(port: int, ctx: ssl.SSLContext, name: str | None, serial: int) -> None:
    async with asyncio.timeout(10):
        while await _served_serial(port, ctx, name) != serial:
            await asyncio.sleep(0.05)


def _no_hostname_check(ctx: ssl.SSLContext) -> ssl.SSLContext:
    ctx.check_hostname = False
    return ctx


@pytest.mark.parametrize("server_name", SERVER_NAMES.values(), ids=SERVER_NAMES.keys())
async def test_a_new_pair_on_disk_is_served_to_new_connections(
    webhook: Webhook, ca: pki.KeyPair, client_context: ssl.SSLContext, server_name: str | None
) -> None:
    ctx = client_context if server_name else _no_hostname_check(client_context)
    before = pki.serial_number((webhook.cert_dir / "tls.crt").read_bytes())
    assert await _served_serial(webhook.server.port, ctx, server_name) == before

    async with webhook.session.get(webhook.url + "/healthz") as resp:  # a pooled connection
        assert resp.status == 200
    renewed = pki.new_serving_cert(ca, ["renewed.example"], now=datetime.now(UTC))
    pki.write_bundle(webhook.cert_dir, ca, renewed)

    await _eventually_serial(webhook.server.port, ctx, server_name, renewed.serial)
    async with webhook.session.get(webhook.url + "/healthz") as resp:
        assert resp.status == 200
    assert webhook.server.tls.serial == renewed.serial


async def test_a_half_written_pair_keeps_the_old_one_serving(
    webhook: Webhook, ca: pki.KeyPair
) -> None:
    tls = webhook.server.tls
    before = tls.serial
    other = pki.new_serving_cert(ca, [], now=datetime.now(UTC))
    # Only the certificate has arrived; its key has not.
    pki.atomic_write(webhook.cert_dir / "tls.crt", other.cert_pem)
    assert await asyncio.to_thread(tls.check) is False
    assert tls.serial == before
    pki.atomic_write(webhook.cert_dir / "tls.key", other.key_pem, 0o600)
    async with asyncio.timeout(10):
        while tls.serial != other.serial:
            await asyncio.sleep(0.05)


async def test_an_expired_serving_certificate_makes_the_webhook_unready(
    webhook: Webhook, ca: pki.KeyPair
) -> None:
    from datetime import timedelta

    expired = pki.new_serving_cert(ca, [], days=1, now=datetime.now(UTC) - timedelta(days=2))
    pki.write_bundle(webhook.cert_dir, ca, expired)
    async with asyncio.timeout(10):
        while webhook.server.tls.serial != expired.serial:
            await asyncio.sleep(0.05)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # only to read /readyz from a server with a dead cert
    async with webhook.session.get(webhook.url + "/readyz", ssl=insecure) as resp:
        assert resp.status == 503
        assert "serving certificate expired" in await resp.text()
