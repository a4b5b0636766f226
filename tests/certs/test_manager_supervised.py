"""The certificate manager's resync loop against an API server that drops connections: the
failure is logged at WARNING with its traceback, /readyz names the failing loop while it lasts,
and the loop keeps going (and the webhook becomes ready again) once the server answers.

A real `kube.Client` talks plain HTTP to the in-memory store of tests/certs/fakecluster.py,
which can hang up on every request without an answer, as an API server restarting does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from certs.manager import RESYNC_LOOP, CertManager, ManagerConfig
from kube.client import Client
from kube.config import Config
from kube.errors import Unavailable
from tests.certs.fakecluster import FakeCluster, serve_http
from webhook.app import Readiness, create_app

NS = "trainops-system"


async def _until(check: Callable[[], object], timeout: float = 10.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


async def test_a_dropped_connection_is_logged_reported_by_readyz_and_the_loop_keeps_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from certs import manager as manager_module

    monkeypatch.setattr(manager_module, "READINESS_POLL_SECONDS", 0.02)
    caplog.set_level(logging.WARNING, logger="certs.manager")
    store = FakeCluster()
    async with serve_http(store) as front:
        client = Client.from_config(Config(server=front.url), timeout=5.0)
        manager = CertManager(
            ManagerConfig(
                namespace=NS,
                service="trainops-webhook",
                secret_name="trainops-webhook-certs",
                cert_dir=tmp_path,
                webhook_configs=(),
                resync_seconds=0.05,
                retry_initial_seconds=0.05,
                retry_max_seconds=0.1,
            ),
            client=client,
            clock=lambda: datetime.now(UTC),
        )
        readiness = Readiness()
        web = TestClient(TestServer(create_app(readiness=readiness)))
        await web.start_server()
        task: asyncio.Task[None] | None = None
        try:
            await manager.prepare(readiness)
            assert (await web.get("/readyz")).status == 200
            task = asyncio.create_task(manager.run(readiness))

            front.dropping = True
            await _until(lambda: RESYNC_LOOP in readiness.reasons)
            answer = await web.get("/readyz")
            text = await answer.text()
            assert answer.status == 503, text
            assert f"{RESYNC_LOOP}: failing" in text and "Unavailable" in text, text
            # Logged at WARNING with the traceback, and retried (more than one drop).
            await _until(lambda: front.dropped >= 3)
            failures = [
                r
                for r in caplog.records
                if r.levelno == logging.WARNING and RESYNC_LOOP in r.getMessage()
            ]
            assert failures, caplog.text
            assert failures[0].exc_info is not None
            assert isinstance(failures[0].exc_info[1], Unavailable)
            assert "Traceback" in caplog.text
            assert not task.done()

            front.dropping = False
            served = front.requests
            await _until(lambda: RESYNC_LOOP not in readiness.reasons)
            assert (await web.get("/readyz")).status == 200
            await _until(lambda: front.requests >= served + 3)  # later passes keep coming
            assert not task.done()
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await web.close()
            await client.close()
