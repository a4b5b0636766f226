"""The admission webhook: AdmissionReviews in, `policies` verdicts out, over HTTPS.

`admission` is the pure core (review dict -> response dict); `app` the aiohttp shell; `tls` the
hot-reloading TLS context; `server` the listener and its lifetime. See docs/WEBHOOK.md.

Re-exports only, loaded when first used: the CLI imports `webhook.configurations` (two names)
for every command, and loading the app with it cost every process — `trainops controller`
too — ~9 MiB and ~0.4 s (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from webhook.admission import ReviewError, review
    from webhook.app import Readiness, Settings, create_app
    from webhook.server import ServerConfig, run, serve, start

__all__ = [
    "Readiness",
    "ReviewError",
    "ServerConfig",
    "Settings",
    "create_app",
    "review",
    "run",
    "serve",
    "start",
]

_HOME = {
    "ReviewError": "webhook.admission",
    "review": "webhook.admission",
    "Readiness": "webhook.app",
    "Settings": "webhook.app",
    "create_app": "webhook.app",
    "ServerConfig": "webhook.server",
    "run": "webhook.server",
    "serve": "webhook.server",
    "start": "webhook.server",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'webhook' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
