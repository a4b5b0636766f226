"""The API against what an attacker sends or what a careless log says, over loopback.

- Headers of raw bytes that are not UTF-8 (aiohttp hands them over as surrogates): refused in
  the usual words, never a 500 with a traceback (the error quoted them, and orjson refused).
- The warning about an unsigned push hook names where it is reachable: logged by `serve` for
  an address beyond loopback, not for `trainops gitops --bind 127.0.0.1` (which builds its app
  with `allow_remote_writes`, and was told its hook was "beyond loopback").
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from gitops.api import routes as api
from tests.gitops.test_api import FakeHub

WARNING = "has no secret"


async def _raw(port: int, request: bytes) -> tuple[bytes, bytes]:
    """Send `request` as is; the status line and the body of the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0], body


async def test_headers_of_bytes_that_are_no_text_are_refused_not_a_500() -> None:
    app = api.create_app(FakeHub(), token=None, webhook_secret=None, allow_remote_writes=False)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    try:
        for header, quoted in [
            (b"Origin: http://\xff\xfe", "Origin http://\\udcff\\udcfe is not this server"),
            (b"Sec-Fetch-Site: \xff", "Sec-Fetch-Site: \\udcff"),
        ]:
            status, body = await _raw(
                port,
                b"POST /api/v1/repositories/default/jobs/refresh HTTP/1.1\r\n"
                b"Host: 127.0.0.1\r\n" + header + b"\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n",
            )
            assert status == b"HTTP/1.1 403 Forbidden", (header, body)
            message = json.loads(body)["error"]
            assert message.startswith("cross-site request refused"), message
            assert quoted in message, message
    finally:
        await runner.cleanup()


async def test_an_unsigned_hook_served_on_loopback_is_not_said_to_be_beyond_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="gitops.api.routes")
    app = api.create_app(FakeHub(), token="t", webhook_secret=None, allow_remote_writes=True)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    try:
        assert port > 0
    finally:
        await runner.cleanup()
    assert not [r for r in caplog.records if WARNING in r.getMessage()]
