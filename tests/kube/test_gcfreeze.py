"""kube.gcfreeze: young collections and a freeze every period, a full collection of
everything (frozen objects included) every `full_every` seconds."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from kube.gcfreeze import GcFreeze, step

STEPS = {
    "just after a full collection": (100.0, 100.0, 3600.0, "freeze"),
    "before the hour": (3699.0, 100.0, 3600.0, "freeze"),
    "the hour reached": (3700.0, 100.0, 3600.0, "full"),
    "long after": (99999.0, 100.0, 3600.0, "full"),
}


@pytest.mark.parametrize(("now", "last", "every", "expected"), STEPS.values(), ids=list(STEPS))
def test_a_full_collection_comes_once_full_every_seconds_passed(
    now: float, last: float, every: float, expected: str
) -> None:
    assert step(now, last, every) == expected


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    try:
        yield
    finally:
        gc.unfreeze()


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_freeze_hides_survivors_from_collections_and_a_full_one_frees_frozen_cycles(
    unfrozen: None,
) -> None:
    kept = [{"a": [1]} for _ in range(1000)]
    freezer = GcFreeze()
    freezer.once("freeze")
    assert gc.get_freeze_count() >= len(kept) and freezer.freezes == 1
    dead = Cycle()
    alive = weakref.ref(dead)
    freezer.once("freeze")  # the cycle is alive here: frozen with the rest
    del dead
    gc.collect()
    assert alive() is not None  # frozen: not even a full collection sees it
    freezer.once("full")
    assert freezer.full == 1 and alive() is None  # unfrozen and collected
    assert kept[0] == {"a": [1]}


async def test_the_loop_freezes_every_period_and_collects_fully_on_its_clock(
    unfrozen: None,
) -> None:
    now = [0.0]
    # threshold None: the suite's own collector settings stay as they are.
    freezer = GcFreeze(period=0.01, full_every=100.0, clock=lambda: now[0], threshold=None)
    task = asyncio.create_task(freezer.run())
    try:
        async with asyncio.timeout(10):
            while freezer.freezes < 3:
                await asyncio.sleep(0.01)
            assert freezer.full == 1  # at start only: what start-up loaded
            now[0] = 150.0
            while freezer.full < 2:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert gc.get_freeze_count() > 0


async def test_the_loop_sets_the_young_generations_threshold_at_start(unfrozen: None) -> None:
    before = gc.get_threshold()
    freezer = GcFreeze(period=3600.0, threshold=(12_345, 10, 10))
    task = asyncio.create_task(freezer.run())
    try:
        async with asyncio.timeout(10):
            while freezer.freezes < 1:
                await asyncio.sleep(0.01)
        assert gc.get_threshold() == (12_345, 10, 10)
        assert freezer.full == 1
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        gc.set_threshold(*before)
