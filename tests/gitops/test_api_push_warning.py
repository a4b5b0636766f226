"""The warning about an unsigned push hook names where it is reachable: logged by `serve` for
an address beyond loopback, not for `trainops gitops --bind 127.0.0.1` (which builds its app
with `allow_remote_writes`, and was told its hook was "beyond loopback")."""

from __future__ import annotations

import logging

import pytest

from gitops import api
from tests.gitops.test_api import FakeHub

WARNING = "has no secret"


async def test_an_unsigned_hook_served_on_loopback_is_not_said_to_be_beyond_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="gitops.api")
    app = api.create_app(FakeHub(), token="t", webhook_secret=None, allow_remote_writes=True)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    try:
        assert port > 0
    finally:
        await runner.cleanup()
    assert not [r for r in caplog.records if WARNING in r.getMessage()]
