"""One runtime per process: the shared caches, leader election and supervised loops of every
component in it — controller-runtime's Manager in small.

Why: `trainops up` runs the job controller and GitOps in one process, and both read training
jobs. Built separately, each kept its own informer of every job kind (two caches of every job,
two watches per kind on the API server), its own Lease elector and supervisor, and repeated the
lease settings. Here a component asks the Manager for what it needs and the Manager hands out
one of each:

- `informer(resource, namespace=…, label_selector=…)`: ONE informer per such key. A second
  caller gets the same object, with its indexers added (`Informer.add_indexer` indexes what is
  already cached). What the cache keeps is one decision per key: callers must ask the same
  `transform` (the cache holds what every reader reads); another one is a programming error,
  a ValueError naming both. Asked after `start()`, the informer is started at once.
- `acquire_metadata(resource, namespace)` / `release_metadata(…)`: metadata-only informers
  (`Informer(metadata_only=True)`: names, labels, annotations, resourceVersions) started on
  demand and counted per holder: the first `acquire` starts one, the last `release` stops it
  and drops it, its memory freed. For kinds a component needs only now and then (GitOps: the
  kinds repositories keep besides training jobs). They are not readiness: a cache started on
  demand is waited for by whoever asked for it;
- `add(name, fn, lease=…)`: a loop run under the one `Supervisor` (crashes logged, restarted
  with back-off, shown by `problems()`). With a lease, it runs only while this process holds
  that Lease: one `LeaderElector` per lease name, all with the process's one identity and the
  settings of `LeaderElection`; the loops of a lease start when it is won and are cancelled
  when it is lost (then the elector campaigns again). Leader election off: loops just run.
- `gc_freeze`: garbage collection without long loop stalls (`kube.gcfreeze`: young
  collections and a `gc.freeze()` every 10 s, one full collection an hour), a loop like the
  others (the commands' Manager has it: `trainops.commands.runtime.new_manager`);
- `problems()`: crashed loops and unsynced caches — what `/readyz` reports (`kube.probes`);
  `metrics`: a Prometheus registry with each cache's size, relists and watches, and which
  leases are held.

Writes never go through a cache: components write with `client` (resourceVersion-guarded
where it matters); the cache is for reads.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kube.client import Client
from kube.gcfreeze import GcFreeze
from kube.informer import IndexFunc, Informer, Transform, callable_name, unsynced, wait_synced
from kube.leader import LeaderElector
from kube.resources import Resource
from kube.supervise import Supervisor

__all__ = ["LeaderElection", "Manager"]

_log = logging.getLogger(__name__)

Loop = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class LeaderElection:
    """Lease settings, once per process (controller-runtime's defaults)."""

    enabled: bool = True
    namespace: str = "kube-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None
    """The holder identity of every lease of the process; default `<host>_<pid>_<random>`."""
    release_on_stop: bool = True
    """Clear the holder on `stop()` so a standby takes over at once; False is a crash (tests)."""


@dataclass
class _Held:
    """A metadata-only informer and how many hold it."""

    informer: Informer
    holders: int = 0


@dataclass(frozen=True)
class _Key:
    group: str
    plural: str
    namespace: str
    label_selector: str


class Manager:
    """Caches, leases and loops of one process; runs from `start()` to `stop()`."""

    def __init__(
        self,
        client: Client,
        *,
        leader_election: LeaderElection = LeaderElection(),
        supervisor: Supervisor | None = None,
        logger: logging.Logger | None = None,
        gc_freeze: GcFreeze | None = None,
    ) -> None:
        self.client = client
        self.leader_election = leader_election
        self.identity = (
            leader_election.identity
            or f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(4)}"
        )
        self._log = logger or _log
        self.supervisor = supervisor or Supervisor(logger=self._log)
        self._informers: dict[_Key, Informer] = {}
        self._transforms: dict[_Key, Transform | None] = {}
        self._metadata: dict[tuple[str, str, str], _Held] = {}
        self._loops: list[tuple[str, Loop, str | None]] = []
        self._electors: dict[str, LeaderElector] = {}
        self._held: dict[str, list[str]] = {}  # lease -> the loops running in this term
        self._on_stop: list[Callable[[], object]] = []
        self.gc_freeze = gc_freeze
        """The process's garbage collection without long loop stalls (`kube.gcfreeze`), run
        as one of its loops; None: left to the interpreter (tests build many Managers)."""
        self._started = False
        self._stopped = False
        self.metrics = CollectorRegistry()
        self.metrics.register(_CacheCollector(self))

    # -- caches ---------------------------------------------------------------------------------
    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> Informer:
        """The one informer of `resource` (in `namespace`, or all; `label_selector`), its
        `indexers` added. ValueError when it exists with another `transform` or another
        function under one of the index names."""
        key = _Key(resource.group, resource.plural, namespace or "", label_selector or "")
        informer = self._informers.get(key)
        if informer is None:
            informer = Informer(
                self.client,
                resource,
                namespace,
                label_selector=label_selector,
                indexers=indexers,
                name=_name(resource, namespace, label_selector),
                transform=transform,
            )
            self._informers[key] = informer
            self._transforms[key] = transform
            if self._running:
                self._run_informer(informer)
            return informer
        cached = self._transforms[key]
        if cached is not transform:
            raise ValueError(
                f"the {informer.name} cache keeps objects through {_transform_name(cached)}; "
                f"a second reader asked for {_transform_name(transform)}: one cache, one "
                "transform (the union of what its readers read)"
            )
        for name, fn in (indexers or {}).items():
            informer.add_indexer(name, fn)
        return informer

    def informers(self) -> list[Informer]:
        """Every informer made so far."""
        return list(self._informers.values())

    def acquire_metadata(self, resource: Resource, namespace: str | None = None) -> Informer:
        """The metadata-only informer of `resource` in `namespace` (None: every namespace, or
        a cluster-scoped kind), one more holder counted; started now if the Manager runs."""
        key = (resource.api_version, resource.plural, namespace or "")
        held = self._metadata.get(key)
        if held is None:
            name = "metadata:" + _name(resource, namespace, None)
            informer = Informer(self.client, resource, namespace, metadata_only=True, name=name)
            held = self._metadata[key] = _Held(informer)
            if self._running:
                self._run_informer(informer)
        held.holders += 1
        return held.informer

    async def release_metadata(self, resource: Resource, namespace: str | None = None) -> None:
        """One holder fewer of that metadata-only informer; the last one stops it (and waits
        for it to end) and drops it. Releasing one not held is a no-op."""
        key = (resource.api_version, resource.plural, namespace or "")
        held = self._metadata.get(key)
        if held is None:
            return
        held.holders -= 1
        if held.holders > 0:
            return
        del self._metadata[key]
        await self.supervisor.cancel(f"informer/{held.informer.name}")

    def metadata_informers(self) -> list[Informer]:
        """The metadata-only informers held now."""
        return [held.informer for held in self._metadata.values()]

    async def wait_synced(self, timeout: float | None = None) -> None:
        """Wait until every informer made so far has listed once (TimeoutError after
        `timeout` seconds)."""
        await wait_synced(self.informers(), timeout)

    # -- loops and leases -----------------------------------------------------------------------
    def add(self, name: str, fn: Loop, *, lease: str | None = None) -> None:
        """Run `fn()` supervised from `start()` on (at once if started); with `lease`, only
        while this process holds that Lease (always when leader election is off): added while
        the lease is held, it joins the current term."""
        if any(name == known for known, _, _ in self._loops):
            raise ValueError(f"a loop named {name!r} is already added")
        if lease is not None and not self.leader_election.enabled:
            lease = None
        self._loops.append((name, fn, lease))
        if lease is not None and lease not in self._electors:
            self._electors[lease] = self._elector(lease)
            if self._running:
                self.supervisor.start(f"leader/{lease}", self._campaign(lease))
            return
        if not self._running:
            return
        if lease is None:
            self.supervisor.start(name, fn)
        elif lease in self._held:  # a lease held now: the loop joins this term
            self.supervisor.start(name, fn)
            self._held[lease].append(name)

    def is_leader(self, lease: str) -> bool:
        """Whether this process holds `lease` now (always True with leader election off;
        False for a lease no loop asked for)."""
        if not self.leader_election.enabled:
            return True
        elector = self._electors.get(lease)
        return elector is not None and elector.is_leader

    def leases(self) -> list[str]:
        """The leases loops asked for (none with leader election off)."""
        return sorted(self._electors)

    def on_stop(self, fn: Callable[[], object]) -> None:
        """Call `fn()` after every loop has stopped (e.g. shut a work queue down: before, a
        worker loop would end normally and be restarted as one that returned); awaited when it
        returns an awaitable (e.g. closing an HTTP session)."""
        self._on_stop.append(fn)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every informer and loop (call once, from the event loop)."""
        if self._started:
            raise RuntimeError("the manager is already started")
        self._started = True
        if self.gc_freeze is not None:
            self.supervisor.start("gc-freeze", self.gc_freeze.run)
        for informer in [*self._informers.values(), *self.metadata_informers()]:
            self._run_informer(informer)
        for name, fn, lease in self._loops:
            if lease is None:
                self.supervisor.start(name, fn)
        for lease in self._electors:
            self.supervisor.start(f"leader/{lease}", self._campaign(lease))

    async def stop(self) -> None:
        """Stop every loop (releasing held leases), then run the `on_stop` callbacks. Once:
        stopping again is a no-op."""
        if self._stopped:
            return
        self._stopped = True
        await self.supervisor.stop()
        for fn in self._on_stop:
            result = fn()
            if inspect.isawaitable(result):
                await result

    def problems(self) -> dict[str, str]:
        """Why the process is not ready ({} when it is): crashed loops, unsynced caches."""
        return {**self.supervisor.problems(), **unsynced(self.informers())}

    # -- internals ------------------------------------------------------------------------------
    @property
    def _running(self) -> bool:
        """Started and not stopping: nothing new starts in a stopping process (its loops
        would outlive `stop()`)."""
        return self._started and not self._stopped

    def _run_informer(self, informer: Informer) -> None:
        self.supervisor.start(f"informer/{informer.name}", informer.run)

    def _elector(self, lease: str) -> LeaderElector:
        settings = self.leader_election
        return LeaderElector(
            self.client,
            namespace=settings.namespace,
            name=lease,
            identity=self.identity,
            lease_duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            retry_period=settings.retry_period,
            release_on_cancel=settings.release_on_stop,
            logger=self._log,
        )

    def _campaign(self, lease: str) -> Loop:
        elector = self._electors[lease]

        async def hold() -> None:
            # The loops of this lease, as of winning it: each supervised on its own, so one
            # that crashes restarts without giving the lease up.
            started = self._held[lease] = []
            try:
                for name, fn, loop_lease in list(self._loops):
                    if loop_lease == lease and self._running:
                        self.supervisor.start(name, fn)
                        started.append(name)
                await asyncio.Event().wait()  # until the lease is lost or the manager stops
            finally:
                del self._held[lease]
                for name in started:
                    await self.supervisor.cancel(name)

        async def campaign() -> None:
            await elector.run(hold)

        return campaign


def _name(resource: Resource, namespace: str | None, label_selector: str | None) -> str:
    """`pods`, `jobrepositories@team-a`, `pods[batch.tensorstack.dev/job-name]`."""
    name = resource.plural if not resource.group else f"{resource.plural}.{resource.group}"
    if namespace:
        name += f"@{namespace}"
    if label_selector:
        name += f"[{label_selector}]"
    return name


def _transform_name(fn: Transform | None) -> str:
    return "no transform" if fn is None else callable_name(fn)


class _CacheCollector(Collector):
    """What the caches and elections look like, read at every scrape."""

    def __init__(self, manager: Manager) -> None:
        self._manager = manager

    def collect(self) -> Iterator[Metric]:
        objects = GaugeMetricFamily(
            "trainops_cache_objects", "Objects held in each informer's cache.", labels=("cache",)
        )
        synced = GaugeMetricFamily(
            "trainops_cache_synced", "1 once the cache has listed once.", labels=("cache",)
        )
        relists = CounterMetricFamily(
            "trainops_cache_relists",
            "Lists after the first one (410 Gone or a failed watch).",
            labels=("cache",),
        )
        watches = CounterMetricFamily(
            "trainops_cache_watches",
            "Watch requests made (each restart of the watch is one more).",
            labels=("cache",),
        )
        every = [*self._manager.informers(), *self._manager.metadata_informers()]
        for informer in sorted(every, key=lambda i: i.name):
            objects.add_metric((informer.name,), informer.count())
            synced.add_metric((informer.name,), 1.0 if informer.has_synced else 0.0)
            relists.add_metric((informer.name,), informer.relists)
            watches.add_metric((informer.name,), informer.watches)
        leader = GaugeMetricFamily(
            "trainops_leader", "1 while this process holds the Lease.", labels=("lease",)
        )
        for lease in self._manager.leases():
            leader.add_metric((lease,), 1.0 if self._manager.is_leader(lease) else 0.0)
        yield from (objects, synced, relists, watches, leader)
