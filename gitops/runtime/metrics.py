"""The GitOps reconciler's Prometheus metrics, in a registry of its own (as the controller's).

Rounds by result and their duration, syncs by result, sync duration, git fetch duration and
failures, repositories by sync and health status, and rounds parked behind their namespace's
limit (`gitops.runtime.fairness`). The last two are read from the JobRepository informer's cache at scrape time (a
callback), so it always says what the reconciler last wrote, never a stale copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["GitOpsMetrics"]

_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

StatusCounts = Callable[[], dict[tuple[str, str], int]]


class GitOpsMetrics(Collector):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.syncs = Counter(
            "trainops_gitops_syncs",
            "Sync operations, by result (Succeeded, Failed, Error).",
            ("result",),
            registry=self.registry,
        )
        self.sync_duration = Histogram(
            "trainops_gitops_sync_duration_seconds",
            "Time spent in one sync operation (apply and prune).",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.fetch_duration = Histogram(
            "trainops_gitops_git_fetch_duration_seconds",
            "Time spent resolving and fetching a repository's revision.",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.fetch_failures = Counter(
            "trainops_gitops_git_fetch_failures",
            "Fetches that failed (unreachable remote, unknown revision, bad credentials).",
            registry=self.registry,
        )
        self.rounds = Counter(
            "trainops_gitops_rounds",
            "Reconcile rounds of JobRepositories (a fetch, and a comparison and sync when "
            "something changed), by result (success, error).",
            ("result",),
            registry=self.registry,
        )
        self.round_duration = Histogram(
            "trainops_gitops_round_duration_seconds",
            "Time spent in one reconcile round, no-op rounds included.",
            buckets=(0.005, *_BUCKETS),
            registry=self.registry,
        )
        self._counts: StatusCounts | None = None
        self._parked: Callable[[], int] | None = None
        self.registry.register(self)

    def repositories_by_status(self, counts: StatusCounts) -> None:
        """Report `counts()` — {(sync, health): repositories}, read at every scrape."""
        self._counts = counts

    def parked_rounds(self, parked: Callable[[], int]) -> None:
        """Report `parked()` — keys waiting for a slot of their namespace — at every scrape."""
        self._parked = parked

    def collect(self) -> Iterator[Metric]:
        if self._parked is not None:
            yield GaugeMetricFamily(
                "trainops_gitops_parked_rounds",
                "Rounds waiting because their namespace has its most rounds in flight "
                "(fairness between tenants).",
                value=self._parked(),
            )
        if self._counts is None:
            return
        family = GaugeMetricFamily(
            "trainops_gitops_repositories",
            "JobRepositories by sync and health status ('' before the first comparison).",
            labels=("sync", "health"),
        )
        for (sync, health), count in sorted(self._counts().items()):
            family.add_metric((sync, health), count)
        yield family
