"""`up`'s stop steps are bounded: one that hangs is given up on by name, the others still run."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from trainops.commands import up


async def test_a_hanging_stop_step_is_given_up_on_and_the_rest_still_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(up, "STOP_STEP_SECONDS", 0.2)
    stopped: list[str] = []

    async def first_started() -> None:
        stopped.append("first started")

    async def hangs() -> None:
        await asyncio.Event().wait()

    async def fails() -> None:
        raise RuntimeError("the server went away")

    async def last_started() -> None:
        stopped.append("last started")

    stack = up.Stack(tmp_path, stops=[first_started, hangs, fails, last_started])
    with caplog.at_level(logging.WARNING, logger="trainops.up"):
        await asyncio.wait_for(stack.stop(), 5)

    assert stopped == ["last started", "first started"]
    assert stack.stops == []
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "stopping: test_a_hanging_stop_step_is_given_up_on_and_the_rest_still_stop.<locals>.fails:"
        " the server went away",
        "stopping: gave up on test_a_hanging_stop_step_is_given_up_on_and_the_rest_still_stop."
        "<locals>.hangs after 0.2 s",
    ]
