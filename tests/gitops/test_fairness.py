"""Fairness between tenants (`gitops.runtime.fairness`): at most `limit` rounds of one namespace in
flight; a key over the limit is parked, not waited on, and gets its turn in order."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from gitops.runtime.fairness import Gate, gated, namespace_of
from kube.workqueue import WorkQueue, run_workers

# Each case: the limit, then steps ("admit" | "finish", key) with what each returns.
CASES: dict[str, tuple[int, list[tuple[str, str, object]]]] = {
    "a round of a namespace with none in flight starts": (1, [("admit", "a/1", True)]),
    "a second round of the same namespace is parked": (
        1,
        [("admit", "a/1", True), ("admit", "a/2", False)],
    ),
    "another namespace is not held back": (
        1,
        [("admit", "a/1", True), ("admit", "a/2", False), ("admit", "b/1", True)],
    ),
    "a limit of two admits two": (
        2,
        [("admit", "a/1", True), ("admit", "a/2", True), ("admit", "a/3", False)],
    ),
    "the end of a round hands its slot to the first parked key": (
        1,
        [
            ("admit", "a/1", True),
            ("admit", "a/2", False),
            ("admit", "a/3", False),
            ("finish", "a/1", "a/2"),
            ("admit", "a/3", False),  # the slot is a/2's, reserved
            ("admit", "a/2", True),
            ("finish", "a/2", "a/3"),
            ("admit", "a/3", True),
            ("finish", "a/3", None),
            ("admit", "a/4", True),  # nothing in flight again
        ],
    ),
    "a newcomer lines up behind parked keys": (
        1,
        [
            ("admit", "a/1", True),
            ("admit", "a/2", False),
            ("finish", "a/1", "a/2"),
            ("admit", "a/9", False),
            ("admit", "a/2", True),
            ("finish", "a/2", "a/9"),
        ],
    ),
    "a key parked twice waits once, in its first place": (
        1,
        [
            ("admit", "a/1", True),
            ("admit", "a/2", False),
            ("admit", "a/3", False),
            ("admit", "a/2", False),
            ("finish", "a/1", "a/2"),
            ("admit", "a/2", True),
            ("finish", "a/2", "a/3"),
        ],
    ),
    "a finished round with nothing parked frees its slot": (
        1,
        [("admit", "a/1", True), ("finish", "a/1", None), ("admit", "a/1", True)],
    ),
    "the end of a round of one namespace frees nothing of another": (
        1,
        [
            ("admit", "a/1", True),
            ("admit", "b/1", True),
            ("admit", "b/2", False),
            ("finish", "a/1", None),
            ("admit", "b/3", False),
            ("finish", "b/1", "b/2"),
        ],
    ),
}


@pytest.mark.parametrize("limit, steps", CASES.values(), ids=CASES.keys())
def test_gate_decides_which_rounds_start(limit: int, steps: list[tuple[str, str, object]]) -> None:
    gate = Gate(limit)
    for i, (op, key, expected) in enumerate(steps):
        got = gate.admit(key) if op == "admit" else gate.finish(key)
        assert got == expected, f"step {i}: {op} {key}"


def test_a_drained_gate_keeps_no_state() -> None:
    gate = Gate(1)
    assert gate.admit("a/1") and not gate.admit("a/2")
    assert gate.parked() == 1
    assert gate.finish("a/1") == "a/2"
    assert gate.admit("a/2")
    assert gate.finish("a/2") is None
    assert (gate.running, gate.waiting, gate.reserved, gate.parked()) == ({}, {}, set(), 0)


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit must be at least 1, not 0"):
        Gate(0)


def test_namespace_of_a_key() -> None:
    assert namespace_of("team-a/jobs") == "team-a"
    assert namespace_of("team-a/a/b") == "team-a"
    assert namespace_of("lonely") == "lonely"


async def test_many_keys_of_one_namespace_all_get_their_rounds_one_at_a_time() -> None:
    """20 keys of one namespace and 3 of another on 4 workers: every key runs exactly once,
    never two of `a` at once, and `b` is not held behind `a`."""
    queue = WorkQueue(name="fair")
    gate = Gate(1)
    runs: Counter[str] = Counter()
    in_flight: Counter[str] = Counter()
    most: Counter[str] = Counter()
    b_done = asyncio.Event()
    a_started_before_b_done = 0
    release_a = asyncio.Event()

    async def handler(key: object) -> float | None:
        nonlocal a_started_before_b_done
        name = str(key)
        ns = namespace_of(name)
        in_flight[ns] += 1
        most[ns] = max(most[ns], in_flight[ns])
        try:
            if ns == "a" and not b_done.is_set():
                a_started_before_b_done += 1
                await release_a.wait()  # `a` stalls until `b` is through
            else:
                await asyncio.sleep(0)
            runs[name] += 1
            if ns == "b" and sum(runs[f"b/{i}"] for i in range(3)) == 3:
                b_done.set()
                release_a.set()
        finally:
            in_flight[ns] -= 1
        return None

    keys = [f"a/{i}" for i in range(20)] + [f"b/{i}" for i in range(3)]
    for key in keys:
        queue.add(key)
    workers = asyncio.create_task(run_workers(queue, gated(queue, gate, handler), 4))
    try:
        async with asyncio.timeout(10):
            while sum(runs.values()) < len(keys):
                await asyncio.sleep(0.01)
    finally:
        queue.shut_down()
        await asyncio.wait_for(workers, 5)
    assert runs == Counter({k: 1 for k in keys})
    assert most == Counter({"a": 1, "b": 1})
    assert a_started_before_b_done == 1  # one worker held by `a`, the others served `b`
    assert gate.parked() == 0 and gate.running == {} and gate.reserved == set()


async def test_a_key_added_again_while_parked_runs_once_more_not_twice_at_once() -> None:
    queue = WorkQueue(name="fair")
    gate = Gate(1)
    order: list[str] = []
    hold = asyncio.Event()

    async def handler(key: object) -> float | None:
        order.append(str(key))
        if key == "a/1":
            await hold.wait()
        return None

    queue.add("a/1")
    queue.add("a/2")
    workers = asyncio.create_task(run_workers(queue, gated(queue, gate, handler), 2))
    try:
        async with asyncio.timeout(5):
            while gate.parked() < 1:
                await asyncio.sleep(0.01)
            queue.add("a/2")  # asked again while parked
            while gate.parked() < 1 or len(queue):
                await asyncio.sleep(0.01)
            hold.set()
            while len(order) < 2:
                await asyncio.sleep(0.01)
    finally:
        queue.shut_down()
        await asyncio.wait_for(workers, 5)
    assert order == ["a/1", "a/2"]


def test_parked_rounds_are_a_metric_read_at_scrape_time() -> None:
    from prometheus_client import generate_latest

    from gitops.runtime.metrics import GitOpsMetrics

    gate = Gate(1)
    metrics = GitOpsMetrics()
    metrics.parked_rounds(gate.parked)
    assert "trainops_gitops_parked_rounds 0.0" in generate_latest(metrics.registry).decode()
    gate.admit("a/1")
    gate.admit("a/2")
    gate.admit("a/3")
    assert "trainops_gitops_parked_rounds 2.0" in generate_latest(metrics.registry).decode()
