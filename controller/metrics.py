"""The controller's Prometheus metrics.

Reconciles by kind and result, reconcile duration, the work queue's depth, adds, wait and work
time (fed by `kube.WorkQueue`'s metrics hook), and jobs by kind and phase. The last is read from
the informers' caches at scrape time (a callback), so it can never drift from what the
controller sees. One registry per instance: tests and several controllers in one process (as in
`trainops up` next to the webhook) never share numbers.

Unlike the webhook, the controller does tens of operations per second, not thousands, so the
client library's own metric objects are cheap enough here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["ControllerMetrics"]

_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

PhaseCounts = Callable[[], dict[tuple[str, str], int]]


class ControllerMetrics(Collector):
    """Counters and histograms of one controller, plus the jobs-by-phase gauge."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(
            "trainops_controller_reconciles",
            "Reconciles of training jobs, by kind and result (success, requeue, error).",
            ("kind", "result"),
            registry=self.registry,
        )
        self.errors = Counter(
            "trainops_controller_reconcile_errors",
            "Reconciles that ended in an error, by kind and error class.",
            ("kind", "error"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "trainops_controller_reconcile_duration_seconds",
            "Time spent in one reconcile, by kind.",
            ("kind",),
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.actions = Counter(
            "trainops_controller_actions",
            "Child objects created, updated or deleted (and pod logs kept: verb keep), by verb and "
            "kind of child.",
            ("verb", "kind"),
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "trainops_controller_workqueue_depth",
            "Keys waiting in the work queue.",
            registry=self.registry,
        )
        self.queue_adds = Counter(
            "trainops_controller_workqueue_adds",
            "Keys added to the work queue.",
            registry=self.registry,
        )
        self.queue_latency = Histogram(
            "trainops_controller_workqueue_queue_duration_seconds",
            "How long a key waited in the work queue before a worker took it.",
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.work_duration = Histogram(
            "trainops_controller_workqueue_work_duration_seconds",
            "How long a worker held a key.",
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._phase_counts: PhaseCounts | None = None
        self.registry.register(self)

    # -- the work queue's metrics hook (kube.workqueue) -------------------------------------
    def on_add(self, name: str) -> None:
        self.queue_adds.inc()

    def on_get(self, name: str, waited_seconds: float) -> None:
        self.queue_latency.observe(waited_seconds)

    def on_done(self, name: str, worked_seconds: float) -> None:
        self.work_duration.observe(worked_seconds)

    def queue_length(self, depth: Callable[[], int]) -> None:
        """Report `depth()` (read at every scrape) as the work queue's depth."""
        self.queue_depth.set_function(lambda: float(depth()))

    # -- jobs by phase ------------------------------------------------------------------------
    def jobs_by_phase(self, counts: PhaseCounts) -> None:
        """Report `counts()` — {(kind, phase): jobs}, read at every scrape — as a gauge."""
        self._phase_counts = counts

    def collect(self) -> Iterator[Metric]:
        if self._phase_counts is None:
            return
        family = GaugeMetricFamily(
            "trainops_controller_jobs",
            "Training jobs the controller sees, by kind and phase (phase '' before the first "
            "status).",
            labels=("kind", "phase"),
        )
        for (kind, phase), count in sorted(self._phase_counts().items()):
            family.add_metric((kind, phase), count)
        yield family
