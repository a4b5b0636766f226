"""The webhook's Prometheus metrics: counted in plain numbers, exposed by a custom collector.

Why not the client library's `Counter`/`Histogram` objects: each increment takes a lock and
goes through two or three method layers — about 4 µs per request inside the server, a tenth of
everything the HTTP shell adds to bare aiohttp. The webhook counts from its event loop thread
only, so plain `int`s in dicts suffice; the library still does the exposition, through the
collector interface it provides for exactly this (`registry.register(collector)`), and
`/metrics` reads the numbers on the same thread. The optional `_created` series are not
exported.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = ["LATENCY_BUCKETS", "Metrics"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

_REQUESTS = "trainops_webhook_requests"
_LATENCY = "trainops_webhook_request_duration_seconds"
_EXPIRY = "trainops_webhook_certificate_expiry_seconds"
_CONNECTIONS = "trainops_webhook_connections"
_CONNECTION_EVENTS = "trainops_webhook_connection_events"


class _Latency:
    """One histogram series: a count per bucket (the last one is +Inf) and the sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0


class Metrics(Collector):
    """Requests by endpoint/kind/operation/verdict, latency by endpoint, connections,
    certificate expiry.

    A registry of its own per instance (one per app), so tests and several apps in one process
    never share numbers.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._requests: dict[tuple[str, str, str, str], int] = {}
        self._latency: dict[str, _Latency] = {}
        self._expiry: Callable[[], float] | None = None
        self._connections: tuple[Callable[[], dict[str, int]], Callable[[], dict[str, int]]]
        self._connections = (dict, dict)
        self.registry.register(self)

    def count(self, endpoint: str, kind: str, operation: str, verdict: str) -> None:
        """One answered request (labels must come from bounded sets, never from client text)."""
        key = (endpoint, kind, operation, verdict)
        self._requests[key] = self._requests.get(key, 0) + 1

    def observe(self, endpoint: str, seconds: float) -> None:
        series = self._latency.get(endpoint)
        if series is None:
            series = self._latency[endpoint] = _Latency()
        series.counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1  # le: upper bound inclusive
        series.total += seconds

    def certificate_expiry(self, seconds_left: Callable[[], float]) -> None:
        """Report `seconds_left()` (read at every scrape) as the certificate expiry gauge."""
        self._expiry = seconds_left

    def connections(
        self, open_by_phase: Callable[[], dict[str, int]], events: Callable[[], dict[str, int]]
    ) -> None:
        """Report the listener's open connections by phase and its connection events
        (accepted, refused, evicted, cut_*), both read at every scrape."""
        self._connections = (open_by_phase, events)

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            _REQUESTS,
            "Admission requests answered, by endpoint, kind, operation and verdict.",
            labels=("endpoint", "kind", "operation", "verdict"),
        )
        for labels, value in sorted(self._requests.items()):
            requests.add_metric(labels, value)
        yield requests
        latency = HistogramMetricFamily(
            _LATENCY,
            "Time from the start of reading a request to the response being ready.",
            labels=("endpoint",),
        )
        for endpoint, series in sorted(self._latency.items()):
            cumulative, buckets = 0, []
            for bound, count in zip((*LATENCY_BUCKETS, float("inf")), series.counts, strict=True):
                cumulative += count
                buckets.append((floatToGoString(bound), cumulative))
            latency.add_metric((endpoint,), buckets, series.total)
        yield latency
        open_by_phase, events = self._connections
        gauge = GaugeMetricFamily(
            _CONNECTIONS,
            "Open connections by phase: head (request head not complete), idle, request.",
            labels=("phase",),
        )
        for phase, value in sorted(open_by_phase().items()):
            gauge.add_metric((phase,), value)
        yield gauge
        counter = CounterMetricFamily(
            _CONNECTION_EVENTS,
            "Connections accepted, refused, evicted for a newer one, or cut at a deadline.",
            labels=("event",),
        )
        for event, value in sorted(events().items()):
            counter.add_metric((event,), value)
        yield counter
        if self._expiry is not None:
            yield GaugeMetricFamily(
                _EXPIRY,
                "Seconds until the serving certificate in use expires (negative once expired).",
                value=self._expiry(),
            )
