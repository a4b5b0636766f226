"""What the HTTP API's modules share: its settings, the open streams, the app's keys, its error.

`gitops.api.routes` builds the app, `gitops.api.access` authenticates and authorizes its requests and
`gitops.api.stream` serves `/api/v1/stream`; they meet here. `ApiError` is an answer (status,
message, headers) that the API's error middleware turns into `{"error": message}`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from gitops.api import rules
from gitops.api.floods import PushLimiter
from gitops.api.reviews import Access
from gitops.api.rules import User
from gitops.runtime.hub import Hub

__all__ = [
    "ACCESS",
    "HUB",
    "LOGIN_PATH",
    "PREFIX",
    "RULES",
    "SETTINGS",
    "STREAMS",
    "USER",
    "ApiError",
    "MiB",
    "Settings",
    "Streams",
]

MiB = 1024 * 1024
PREFIX = "/api/v1"


@dataclass(frozen=True)
class Settings:
    token: str | None
    webhook_secret: bytes | None
    allow_remote_writes: bool
    max_body_bytes: int = MiB
    body_timeout: float = 10.0
    heartbeat: float = 15.0
    retry_ms: int = 2000
    write_timeout: float = 30.0
    max_streams: int = 64
    max_streams_per_user: int = 8
    trusted_proxies: tuple[rules.Network, ...] = ()
    """Peers whose `X-Forwarded-Proto: https` makes the login cookie Secure (`--trusted-proxy`)."""
    stream_recheck: float = 30.0
    """How often an open event stream asks again whether its token is valid (a TokenReview)."""
    stream_lifetime: float = 3600.0
    """The longest an event stream stays open; the browser reconnects (and is authenticated)."""


@dataclass
class Streams:
    """The open streams (events, and the dashboard's log follows): how many, per user, and
    the event that ends them all (on shutdown)."""

    closing: asyncio.Event = field(default_factory=asyncio.Event)
    open: int = 0
    by_user: dict[str, int] = field(default_factory=dict)


HUB = web.AppKey[Hub]("gitops_hub")
SETTINGS = web.AppKey("gitops_api_settings", Settings)
STREAMS = web.AppKey("gitops_api_streams", Streams)
ACCESS = web.AppKey[Access]("gitops_api_access")
"""Present when requests are authenticated and authorized by the API server (`gitops.api.reviews`)."""
RULES = web.AppKey[dict[str, rules.Rule]]("gitops_api_rules")
"""Each route's access rule by route name (`gitops.api.rules.API_RULES`, and the dashboard's)."""
PageError = Callable[[web.Request, int, str], web.StreamResponse]
PAGE_ERROR = web.AppKey[PageError]("gitops_api_page_error")
"""How a page (not `/api/v1/`) shows a 403 or 503 (the dashboard's HTML error page); JSON
without it."""
LOGIN_PATH = web.AppKey("gitops_api_login_path", str)
PUSH_LIMITER = web.AppKey("gitops_api_push_limiter", PushLimiter)
"""The push hook's token buckets (`gitops.api.floods`)."""
"""Where a page request without a valid token is sent (the dashboard sets `/login`)."""
USER: Any = (
    web.RequestKey("gitops_api_user", User) if hasattr(web, "RequestKey") else "gitops_api_user"
)
"""The request's authenticated user (a RequestKey where aiohttp has them: 3.12 and later)."""


class ApiError(Exception):
    """An error answer: `status`, `{"error": message}` and extra `headers`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
