"""What `bench_gitops_scale.py` reads around a run: the kube-apiserver's own request latency
(`apiserver_request_duration_seconds` from its `/metrics`, the delta between two scrapes), whether
the process holds its Lease, and how long each wrapped step of a round takes."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection, Manager

__all__ = ["LeaseWatch", "Phases", "latency_report", "lease_spec", "quantile", "request_buckets"]

LEASE_NAMESPACE = LeaderElection().namespace
QUANTILES = (0.5, 0.99)


# -- kube-apiserver's own request latency -------------------------------------------------------


Buckets = dict[str, dict[float, float]]
"""verb (and "all") -> upper bound -> cumulative count."""


async def request_buckets(client: Client) -> Buckets:
    text = (await client.request("GET", "/metrics", raw=True, timeout=60)).decode()
    out: Buckets = defaultdict(lambda: defaultdict(float))
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request_duration_seconds":
            continue
        for sample in family.samples:
            verb = sample.labels.get("verb", "")
            if not sample.name.endswith("_bucket") or verb in ("WATCH", "CONNECT"):
                continue
            le = float(sample.labels["le"])
            out[verb][le] += sample.value
            out["all"][le] += sample.value
    return out


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The q-quantile of the requests between the two scrapes, interpolated linearly within
    its bucket (the last finite bound when it falls in +Inf); None without requests."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            share = (rank - below) / (cumulative - below) if cumulative > below else 1.0
            return lower + (bound - lower) * share
        lower, below = bound, cumulative
    return lower


def latency_report(before: Buckets, after: Buckets) -> dict[str, str]:
    out = {}
    for verb in sorted(after, key=lambda v: (v != "all", v)):
        b, a = before.get(verb, {}), after[verb]
        n = a.get(float("inf"), 0.0) - b.get(float("inf"), 0.0)
        if n < 1:
            continue
        qs = [quantile(b, a, q) for q in QUANTILES]
        out[verb] = f"{int(n)} requests, " + ", ".join(
            f"p{round(q * 100)} {v * 1000:.0f} ms" for q, v in zip(QUANTILES, qs, strict=True) if v
        )
    return out


# -- the Lease ------------------------------------------------------------------------------------


class LeaseWatch:
    """Samples whether the process holds `lease` every `period` s; `losses` counts the times
    it went from held to not held, `longest_gap` the longest stretch not held after the first
    hold."""

    def __init__(self, manager: Manager, lease: str, period: float = 0.1) -> None:
        self.manager, self.lease, self.period = manager, lease, period
        self.losses = 0
        self.longest_gap = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        held, since = False, 0.0
        while True:
            now = self.manager.is_leader(self.lease)
            if held and not now:
                self.losses += 1
                since = time.perf_counter()
            elif now and not held and since:
                self.longest_gap = max(self.longest_gap, time.perf_counter() - since)
            held = now
            await asyncio.sleep(self.period)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


async def lease_spec(client: Client, name: str) -> dict[str, Any]:
    try:
        return dict((await client.get(resources.LEASES, name, LEASE_NAMESPACE)).get("spec") or {})
    except errors.NotFound:
        return {}


# -- where a sync's time goes ----------------------------------------------------------------------


class Phases:
    """Times every call of the async methods it wraps: (name, start, end) spans."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []

    def wrap(self, owner: Any, attr: str, name: str) -> None:
        inner = getattr(owner, attr)
        spans = self.spans

        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner(*args, **kwargs)
            finally:
                spans.append((name, t0, time.perf_counter()))

        setattr(owner, attr, timed)

    def wrap_class(self, cls: type, attr: str, name: str) -> None:
        """Wrap the method `attr` of every instance of `cls`."""
        inner = getattr(cls, attr)
        spans = self.spans

        async def timed(obj: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner(obj, *args, **kwargs)
            finally:
                spans.append((name, t0, time.perf_counter()))

        setattr(cls, attr, timed)

    def report(self, start: float, end: float) -> dict[str, str]:
        """Per name: calls, summed and longest seconds, of the spans within [start, end]."""
        by: dict[str, list[float]] = defaultdict(list)
        for name, t0, t1 in self.spans:
            if t0 >= start and t1 <= end:
                by[name].append(t1 - t0)
        return {
            name: f"{len(d)} calls, {sum(d):.1f} s in all, longest {max(d):.2f} s"
            + (f", mean {sum(d) / len(d) * 1000:.0f} ms" if len(d) > 1 else "")
            for name, d in by.items()
        }
