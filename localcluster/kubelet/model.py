"""Values the kubelet's pure functions exchange: container instances and back-off entries.

An `Instance` is one run of one container (what a container runtime lists, running or exited).
The kubelet keeps every instance of the current pod on disk; the status builder only needs the
last two (the current state and `lastState`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

__all__ = ["BackOff", "BackOffPolicy", "ContainerView", "Instance"]


@dataclass(frozen=True)
class Instance:
    """One run of a container. `exit_code` is None while it runs."""

    attempt: int  # the container's restartCount when this instance started
    container_id: str  # "trainops://<64 hex>"
    started_at: str  # RFC 3339
    finished_at: str | None = None
    exit_code: int | None = None
    signal: int | None = None  # set when the process died by a signal
    reason: str = ""  # Completed / Error / ContainerStatusUnknown once finished
    message: str = ""

    @property
    def running(self) -> bool:
        return self.exit_code is None

    @property
    def succeeded(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class ContainerView:
    """What the kubelet knows about one container of a pod, for the status builder."""

    name: str
    image: str
    instances: tuple[Instance, ...] = ()  # oldest first
    waiting_reason: str = ""  # e.g. CrashLoopBackOff, CreateContainerConfigError
    waiting_message: str = ""
    # Probe verdicts for the running instance; None: no such probe (counts as passed).
    started: bool | None = None
    ready: bool | None = None

    @property
    def last(self) -> Instance | None:
        return self.instances[-1] if self.instances else None

    @property
    def previous(self) -> Instance | None:
        return self.instances[-2] if len(self.instances) > 1 else None


@dataclass(frozen=True)
class BackOffPolicy:
    """Crash-loop back-off: the kubelet's is 10 s doubling to 300 s."""

    initial: float = 10.0
    maximum: float = 300.0


@dataclass(frozen=True)
class BackOff:
    """One container's back-off entry (kubelet `flowcontrol.Backoff` per container key)."""

    period: float  # seconds the next restart waits after an exit
    last_update: datetime  # finish time of the exit that set `period`
