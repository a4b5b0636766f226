"""The GitOps API and dashboard hold slow clients to deadlines (`kube.connlimits`, through
`gitops.api.routes.serve`): connections that never finish their request head cannot take the
slots of the users and Git hosts behind them."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from gitops.api import routes as api
from kube.connlimits import ConnectionLimits
from tests.gitops.test_api import FakeHub


async def test_slow_clients_are_cut_and_a_user_is_still_served() -> None:
    limits = ConnectionLimits(max_connections=20, max_per_source=20, header_timeout=1.0)
    app = api.create_app(
        FakeHub(), token=None, webhook_secret=None, allow_remote_writes=False, limits=limits
    )
    runner, port = await api.serve(app, "127.0.0.1", 0)
    slow: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(40):  # twice the slots: each sends half a request head, then nothing
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /api/v1/repositories HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            await writer.drain()
            slow.append((reader, writer))
        started = time.monotonic()
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{port}/api/v1/repositories"
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as response:
                assert response.status == 200
                names = [r["metadata"]["name"] for r in (await response.json())["items"]]
                assert names == [r["metadata"]["name"] for r in FakeHub().repositories()]
        assert time.monotonic() - started < 5
        # Every slow connection is closed: by its deadline, or to give its slot away.
        async with asyncio.timeout(10):
            for reader, _ in slow:
                assert await reader.read() == b""
    finally:
        for _, writer in slow:
            writer.close()
        await runner.cleanup()
