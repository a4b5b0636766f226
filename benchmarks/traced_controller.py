"""`trainops controller` with a timeline of each job written to a file (run by bench_peer
`--trace FILE`, never in production): where the time between a pod's exit and its job's
Succeeded goes.

    python benchmarks/traced_controller.py TRACE_FILE [trainops controller arguments...]

Wraps, from outside, the points a child's event passes: the informer's handler (the delay
chosen for it), the work queue (`add`, a worker's `get`), the reconcile, the status write (sent,
answered); and two machine-wide sources of delay: event-loop lag (a 5 ms ticker's lateness over
20 ms) and garbage collections over 5 ms. One JSON line per record, wall-clock seconds
(`time.time()`, comparable with the bench's own stamps), written when the process exits.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from controller import manager as ctl_manager  # noqa: E402
from controller import reconciler as ctl_reconciler  # noqa: E402
from kube import workqueue  # noqa: E402
from trainops.cli import main  # noqa: E402

RECORDS: list[tuple[Any, ...]] = []
MAX_RECORDS = 2_000_000


def note(*fields: Any) -> None:
    if len(RECORDS) < MAX_RECORDS:
        RECORDS.append((time.time(), *fields))


def _owner_key(obj: dict[str, Any]) -> str | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return f"{ref.get('kind')}/{meta.get('namespace', '')}/{ref.get('name')}"
    return None


def install() -> None:
    delay_of = ctl_manager.child_event_delay

    def child_event_delay(kind: str, event_type: str, obj: dict[str, Any]) -> float:
        delay = delay_of(kind, event_type, obj)
        phase = (obj.get("status") or {}).get("phase")
        note("child", _owner_key(obj), kind, event_type, phase, delay)
        return delay

    ctl_manager.child_event_delay = child_event_delay

    add, fire, get = workqueue.WorkQueue.add, workqueue.WorkQueue._fire, workqueue.WorkQueue.get

    def traced_add(self: workqueue.WorkQueue, key: Any, **kwargs: Any) -> None:
        note("add", key, key in self._dirty, key in self._processing, *kwargs.values())
        add(self, key, **kwargs)

    def traced_fire(self: workqueue.WorkQueue, key: Any) -> None:
        note("timer", key)
        fire(self, key)

    async def traced_get(self: workqueue.WorkQueue) -> Any:
        key = await get(self)
        note("get", key, len(self))
        return key

    workqueue.WorkQueue.add = traced_add  # type: ignore[method-assign]
    workqueue.WorkQueue._fire = traced_fire  # type: ignore[method-assign]
    workqueue.WorkQueue.get = traced_get  # type: ignore[method-assign]

    reconcile = ctl_reconciler.Reconciler.reconcile
    write = ctl_reconciler.Reconciler._write_status

    async def traced_reconcile(self: ctl_reconciler.Reconciler, key: str) -> float | None:
        note("reconcile", key)
        try:
            return await reconcile(self, key)
        finally:
            note("reconciled", key)

    async def traced_write(
        self: ctl_reconciler.Reconciler, resource: Any, job: dict[str, Any], st: dict[str, Any]
    ) -> dict[str, Any]:
        meta = job["metadata"]
        key = f"{resource.kind}/{meta.get('namespace', '')}/{meta['name']}"
        note("write", key, st.get("phase"))
        try:
            return await write(self, resource, job, st)
        finally:
            note("written", key, st.get("phase"))

    ctl_reconciler.Reconciler.reconcile = traced_reconcile  # type: ignore[method-assign]
    ctl_reconciler.Reconciler._write_status = traced_write  # type: ignore[method-assign,assignment]

    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            took = time.perf_counter() - started[0]
            if took > 0.005:
                note("gc", info.get("generation"), round(took * 1000, 1))

    gc.callbacks.append(on_gc)

    run = asyncio.run

    async def ticker() -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            late = time.perf_counter() - t - 0.005
            if late > 0.02:
                note("lag", round(late * 1000, 1))

    def traced_run(main: Any, **kwargs: Any) -> Any:
        async def with_ticker() -> Any:
            tick = asyncio.create_task(ticker())
            try:
                return await main
            finally:
                tick.cancel()

        return run(with_ticker(), **kwargs)

    asyncio.run = traced_run


def dump(path: Path) -> None:
    with path.open("w") as out:
        for record in RECORDS:
            out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    trace = Path(sys.argv[1])
    install()
    atexit.register(dump, trace)
    sys.exit(main(sys.argv[2:]))
