"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `tools/leaderelection`.

Several replicas of a controller run for availability, but only one may act: two reconcilers of
the same job would create its pods twice. Each candidate tries to hold the Lease; the holder
runs the work and renews the Lease every `retry_period`; a candidate takes over only when the
Lease has expired (now > renewTime + leaseDurationSeconds) or was released (no holder). Every
write is a `replace` carrying the resourceVersion that was read, so of two candidates racing
for an expired Lease exactly one wins and the other gets Conflict. A holder that cannot renew
within `renew_deadline` stops its work and raises `LeaderLost` (it must assume someone else
holds the Lease by now); on cancellation (clean shutdown) it releases the Lease — clears the
holder — so a standby takes over at once instead of waiting out the lease.

Defaults are controller-runtime's: 15 s duration, 10 s renew deadline, 2 s retry period.

Expiry is judged as client-go judges it: by how long *this process* has observed the Lease
unchanged, on its own monotonic clock — never by comparing the holder's `renewTime`, written
from another machine's wall clock, with ours. Each read is folded into an `Observation`
(`observe`: the record — resourceVersion, holder, renewTime — and the monotonic instant it was
first seen); `decide` says, from that and `now`, whether to renew, take over or wait. A holder
renewing changes the record, so its Lease stays valid however its clock is set; a holder that
stopped renewing is taken over `leaseDurationSeconds` after the last change this process saw,
even when its renewTime lies hours in the future. The price, as in client-go: a candidate that
starts next to a long-dead holder waits one lease duration before taking over.
`renewTime` and `acquireTime` are still written (wall clock) for people and tools to read.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import Any, TypeVar

from kube.client import Client
from kube.errors import AlreadyExists, Conflict, NotFound
from kube.resources import LEASES

__all__ = [
    "Decision",
    "LeaderElector",
    "LeaderLost",
    "Observation",
    "current_holder",
    "decide",
    "format_micro_time",
    "lead",
    "observe",
    "parse_time",
]

T = TypeVar("T")
_log = logging.getLogger(__name__)


class LeaderLost(Exception):
    """The Lease could not be renewed within the renew deadline, or another holder has it."""


@dataclass(frozen=True)
class Observation:
    """What this process last saw of a Lease and when it first saw it (monotonic seconds)."""

    record: tuple[str, str, str]  # (resourceVersion, holderIdentity, renewTime)
    since: float


class Decision(Enum):
    RENEW = "renew"  # we hold it: write a new renewTime
    ACQUIRE = "acquire"  # nobody holds it, or the holder has not renewed for a lease duration
    WAIT = "wait"  # another holds it and has renewed within a lease duration (as observed)


def observe(previous: Observation | None, lease: dict[str, Any], now: float) -> Observation:
    """`previous` if `lease` is unchanged since, else a new observation starting at `now`."""
    meta: dict[str, Any] = lease.get("metadata") or {}
    spec: dict[str, Any] = lease.get("spec") or {}
    record = (
        str(meta.get("resourceVersion") or ""),
        str(spec.get("holderIdentity") or ""),
        str(spec.get("renewTime") or ""),
    )
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def decide(
    observed: Observation,
    lease: dict[str, Any],
    *,
    identity: str,
    now: float,
    default_duration: float,
) -> Decision:
    """What a candidate `identity` should do about `lease` at monotonic `now`, given when it
    first saw the Lease as it is (`observed`, from `observe`). The Lease's renewTime plays no
    part: it comes from another machine's clock. A Lease without a usable
    leaseDurationSeconds counts as lasting `default_duration` (the candidate's own)."""
    spec: dict[str, Any] = lease.get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    if holder == identity:
        return Decision.RENEW
    if not holder:
        return Decision.ACQUIRE
    try:
        duration = float(spec.get("leaseDurationSeconds") or 0)
    except (TypeError, ValueError):
        duration = 0.0
    if not duration > 0 or not math.isfinite(duration):
        duration = default_duration
    return Decision.ACQUIRE if now >= observed.since + duration else Decision.WAIT


class _Attempt(Enum):
    HELD = "held"  # we hold the lease (acquired or renewed)
    TAKEN = "taken"  # someone else holds a valid lease
    FAILED = "failed"  # lost a race (Conflict); try again


class LeaderElector:
    """Run work only while holding the Lease `namespace/name`."""

    def __init__(
        self,
        client: Client,
        *,
        namespace: str,
        name: str,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`clock` (monotonic seconds) judges expiry; `wall_clock` only dates the renewTime
        and acquireTime written for readers (tests skew it)."""
        if not retry_period < renew_deadline < lease_duration:
            raise ValueError("need retry_period < renew_deadline < lease_duration")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or f"{socket.gethostname()}_{os.getpid()}_{secrets.token_hex(4)}"
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.observed_holder = ""
        self.observation: Observation | None = None
        self._clock = clock
        self._wall_clock = wall_clock
        self._log = logger or _log
        self._leader = False

    @property
    def is_leader(self) -> bool:
        return self._leader

    async def run(self, work: Callable[[], Awaitable[T]]) -> T:
        """Wait to acquire the Lease, then run `work()` while renewing it. Returns what `work`
        returns (releasing the Lease); raises LeaderLost (after cancelling `work`) when renewal
        fails; on cancellation cancels `work` and releases the Lease (unless
        `release_on_cancel` is False, which simulates a crash)."""
        await self._acquire()
        self._leader = True
        self._log.info("%s: became leader of lease %s/%s", self.identity, self.namespace, self.name)
        work_task: asyncio.Task[T] = asyncio.ensure_future(work())
        renew_task = asyncio.create_task(self._renew_loop(), name=f"lease-renew-{self.name}")
        release = True
        try:
            await asyncio.wait({work_task, renew_task}, return_when=asyncio.FIRST_COMPLETED)
            if work_task.done():
                return work_task.result()
            release = False
            self._leader = False
            await _cancel(work_task)
            renew_task.result()  # raises LeaderLost
            raise LeaderLost(f"{self.identity}: renew loop ended")
        except asyncio.CancelledError:
            release = self.release_on_cancel
            raise
        finally:
            self._leader = False
            await _cancel(work_task)
            await _cancel(renew_task)
            if release:
                await self._release()

    async def _acquire(self) -> None:
        told = False
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the result and
                # swallows a cancellation that arrives as the call completes (gh-86296), and
                # a candidate then became leader while its process was stopping.
                async with asyncio.timeout(self.renew_deadline):
                    attempt = await self._try_acquire_or_renew()
            except Exception as e:
                self._log.warning("%s: acquiring lease %s failed: %s", self.identity, self.name, e)
                attempt = _Attempt.FAILED
            if attempt is _Attempt.HELD:
                return
            if not told and attempt is not _Attempt.FAILED:
                told = True  # once: a standby may wait for hours
                self._log.info(
                    "%s: lease %s/%s is held by another; standing by",
                    self.identity,
                    self.namespace,
                    self.name,
                )
            await asyncio.sleep(self.retry_period * (1 + 0.2 * random.random()))

    async def _renew_loop(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.renew_deadline
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                remaining = max(0.01, deadline - loop.time())
                async with asyncio.timeout(remaining):
                    attempt = await self._try_acquire_or_renew()
            except Exception as e:
                self._log.warning("%s: renewing lease %s failed: %s", self.identity, self.name, e)
                attempt = _Attempt.FAILED
            if attempt is _Attempt.HELD:
                deadline = loop.time() + self.renew_deadline
            elif attempt is _Attempt.TAKEN:
                raise LeaderLost(
                    f"{self.identity}: lease {self.name} is held by {self.observed_holder}"
                )
            elif loop.time() >= deadline:
                raise LeaderLost(
                    f"{self.identity}: could not renew lease {self.name} within {self.renew_deadline:g}s"
                )

    async def _try_acquire_or_renew(self) -> _Attempt:
        now = self._wall_clock()
        try:
            lease = await self.client.get(LEASES, self.name, self.namespace)
        except NotFound:
            self.observation = None
            body = {
                "apiVersion": LEASES.api_version,
                "kind": LEASES.kind,
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, acquire=True, transitions=0),
            }
            try:
                created = await self.client.create(LEASES, body)
            except (AlreadyExists, Conflict):
                return _Attempt.FAILED
            self.observation = observe(None, created, self._clock())
            return _Attempt.HELD
        spec: dict[str, Any] = lease.get("spec") or {}
        self.observed_holder = str(spec.get("holderIdentity") or "")
        self.observation = observe(self.observation, lease, self._clock())
        decision = decide(
            self.observation,
            lease,
            identity=self.identity,
            now=self._clock(),
            default_duration=self.lease_duration,
        )
        if decision is Decision.WAIT:
            return _Attempt.TAKEN
        transitions = int(spec.get("leaseTransitions") or 0)
        if decision is Decision.RENEW:
            new_spec = {**spec, **self._spec(now, acquire=False, transitions=transitions)}
        else:
            new_spec = {**spec, **self._spec(now, acquire=True, transitions=transitions + 1)}
        try:
            written = await self.client.replace(LEASES, {**lease, "spec": new_spec})
        except (Conflict, NotFound):
            return _Attempt.FAILED
        self.observation = observe(self.observation, written, self._clock())
        self.observed_holder = self.identity
        return _Attempt.HELD

    def _spec(self, now: datetime, *, acquire: bool, transitions: int) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self.lease_duration)),
            "renewTime": format_micro_time(now),
            "leaseTransitions": transitions,
        }
        if acquire:
            spec["acquireTime"] = format_micro_time(now)
        return spec

    async def _release(self) -> None:
        """Clear the holder (if it is still us) so a standby acquires at once."""
        try:
            async with asyncio.timeout(self.renew_deadline):
                lease = await self.client.get(LEASES, self.name, self.namespace)
                spec = dict(lease.get("spec") or {})
                if spec.get("holderIdentity") != self.identity:
                    return
                now = format_micro_time(self._wall_clock())
                spec.update(
                    holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now
                )
                await self.client.replace(LEASES, {**lease, "spec": spec})
            self._log.info("%s: released lease %s/%s", self.identity, self.namespace, self.name)
        except Exception as e:
            self._log.warning("%s: releasing lease %s failed: %s", self.identity, self.name, e)


def format_micro_time(t: datetime) -> str:
    """A metav1.MicroTime: `2006-01-02T15:04:05.000000Z`."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> datetime | None:
    """A metav1.Time or MicroTime (RFC 3339, with or without fraction) as an aware datetime."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def current_holder(lease: dict[str, Any] | None, now: datetime) -> str:
    """Who holds `lease` at `now`: its holderIdentity, or "" when there is no Lease, no holder
    (released) or the holder let it expire (anyone may take it over).

    A one-look estimate for messages (`trainops up` naming another install before it starts a
    controller): it compares renewTime with the wall clock `now`. Leader election never uses
    it; `decide` judges expiry by observation."""
    spec: dict[str, Any] = (lease or {}).get("spec") or {}
    holder = str(spec.get("holderIdentity") or "")
    return "" if not holder or _expired(spec, now) else holder


def _expired(spec: dict[str, Any], now: datetime) -> bool:
    renewed = parse_time(str(spec.get("renewTime") or ""))
    if renewed is None:
        return True
    duration = float(spec.get("leaseDurationSeconds") or 0)
    return now > renewed + timedelta(seconds=duration)


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel `task` and wait for it to end, without letting its outcome escape (our own
    cancellation still does)."""
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: it was handled (or is irrelevant) already


async def lead(elector: LeaderElector | None, work: Callable[[], Awaitable[T]]) -> T:
    """`work()` while holding the elector's Lease, or at once without an elector (a single
    instance, leader election off)."""
    if elector is None:
        return await work()
    return await elector.run(work)
