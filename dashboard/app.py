"""Mount the dashboard on the GitOps API's aiohttp application (wiring only).

Why on the same app rather than a sub-app: the pages live at `/`, and the job routes sit under
`/api/v1` beside the API's own, so they pass through the API's middlewares (the `Host` check
against DNS rebinding, the cross-site refusal of every write) exactly like sync and refresh do.
Call `install` before the app starts (its router and signals freeze then).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from importlib import resources as importlib_resources
from pathlib import Path

from aiohttp import web

from dashboard import jobapi, pages
from dashboard.backend import Backend
from dashboard.render import Renderer, add_security_headers
from gitops.hub import Hub
from kube.client import Client

__all__ = ["STATIC_DIR", "install"]

STATIC_DIR = Path(str(importlib_resources.files("dashboard") / "static"))


def install(
    app: web.Application,
    *,
    hub: Hub,
    client: Client,
    clock: Callable[[], datetime] = pages.system_clock,
) -> None:
    """Add the pages, `/static/…`, the job API routes and the security headers to `app` (an
    app from `gitops.api.create_app`)."""
    static = app.router.add_static("/static", STATIC_DIR, name="dashboard-static")
    assert isinstance(static, web.StaticResource)

    def static_url(filename: str) -> str:
        return str(static.url_for(filename=filename, append_version=True))

    app[pages.BACKEND] = Backend(hub, client)
    app[pages.RENDERER] = Renderer(static_url)
    app[pages.CLOCK] = clock
    pages.add_routes(app)
    jobapi.add_routes(app)
    app.middlewares.append(pages.not_found_middleware())
    app.on_response_prepare.append(add_security_headers)
