"""The one client runtime: the API client and its configuration (kubeconfig, in-cluster),
informers, work queue, leader election, Events and the supervisor of background loops (see
docs/CONTROLLER.md). Re-exports only."""

from __future__ import annotations

from kube import errors, resources
from kube.client import Client, PatchType
from kube.config import Config, ConfigError
from kube.errors import (
    AlreadyExists,
    APIError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    Unauthorized,
    Unavailable,
)
from kube.events import EventRecorder
from kube.informer import Informer
from kube.leader import LeaderElector, LeaderLost
from kube.resources import Resource, for_kind, key_of
from kube.supervise import Supervisor
from kube.workqueue import (
    ExponentialRateLimiter,
    QueueShutDown,
    RateLimiter,
    WorkQueue,
    default_rate_limiter,
    run_workers,
)

__all__ = [
    "APIError",
    "AlreadyExists",
    "BadRequest",
    "Client",
    "Config",
    "ConfigError",
    "Conflict",
    "EventRecorder",
    "ExponentialRateLimiter",
    "Forbidden",
    "Gone",
    "Informer",
    "Invalid",
    "LeaderElector",
    "LeaderLost",
    "NotFound",
    "PatchType",
    "QueueShutDown",
    "RateLimiter",
    "Resource",
    "Supervisor",
    "Unauthorized",
    "Unavailable",
    "WorkQueue",
    "default_rate_limiter",
    "errors",
    "for_kind",
    "key_of",
    "resources",
    "run_workers",
]
