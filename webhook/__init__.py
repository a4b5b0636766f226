"""The admission webhook: AdmissionReviews in, `policies` verdicts out, over HTTPS.

`admission` is the pure core (review dict -> response dict); `app` the aiohttp shell; `tls` the
hot-reloading TLS context; `server` the listener and its lifetime. See docs/WEBHOOK.md.
"""

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
