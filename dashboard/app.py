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

from dashboard import jobapi, login, pages, progressapi
from dashboard.backend import Backend
from dashboard.render import Renderer, add_security_headers
from gitops.api import routes as api
from gitops.api.rules import GROUP, JOB_GROUP, LISTED, PUBLIC, REPOSITORIES, Need, Rule
from gitops.runtime.hub import Hub
from kube.client import Client

__all__ = ["RULES", "STATIC_DIR", "install"]

STATIC_DIR = Path(str(importlib_resources.files("dashboard") / "static"))

_GET_REPOSITORY = (Need("get", GROUP, REPOSITORIES),)
_GET_JOB = Need("get", JOB_GROUP, "{plural}")
RULES: dict[str, Rule] = {
    "dashboard-static": PUBLIC,
    "dashboard-login": PUBLIC,
    "dashboard-login-submit": PUBLIC,
    "dashboard-logout": PUBLIC,
    "dashboard-front": LISTED,
    "dashboard-repo": _GET_REPOSITORY,
    "dashboard-diff": _GET_REPOSITORY,
    "dashboard-job": (_GET_JOB,),
    "dashboard-job-api": (_GET_JOB,),
    "dashboard-job-progress": (_GET_JOB,),
    "dashboard-plotly": PUBLIC,
    "dashboard-job-logs": (_GET_JOB, Need("get", "", "pods", "log")),
    "dashboard-job-pause": (Need("patch", JOB_GROUP, "{plural}"),),
    "dashboard-job-resume": (Need("patch", JOB_GROUP, "{plural}"),),
    "dashboard-job-delete": (Need("delete", JOB_GROUP, "{plural}"),),
}
"""Who may use each dashboard route (`gitops.api.rules`): a page needs what its API call would."""


def install(
    app: web.Application,
    *,
    hub: Hub,
    client: Client,
    clock: Callable[[], datetime] = pages.system_clock,
    progress_namespace: str = "kube-system",
) -> None:
    """Add the pages, `/static/…`, the job API routes and the security headers to `app` (an
    app from `gitops.api.routes.create_app`)."""
    static = app.router.add_static("/static", STATIC_DIR, name="dashboard-static")
    assert isinstance(static, web.StaticResource)

    def static_url(filename: str) -> str:
        return str(static.url_for(filename=filename, append_version=True))

    renderer = Renderer(static_url)
    # The controller's namespace: each job's curves are there (docs/PROGRESS.md).
    app[pages.BACKEND] = Backend(hub, client, progress_namespace=progress_namespace)
    app[pages.RENDERER] = renderer
    app[pages.CLOCK] = clock
    app[api.RULES].update(RULES)
    app[api.LOGIN_PATH] = login.LOGIN_PATH
    app[api.PAGE_ERROR] = _page_error
    pages.add_routes(app)
    jobapi.add_routes(app)
    progressapi.add_routes(app)
    login.add_routes(app, renderer)
    app.middlewares.append(pages.not_found_middleware())
    app.on_response_prepare.append(add_security_headers)


def _page_error(request: web.Request, status: int, message: str) -> web.StreamResponse:
    title = "Not allowed" if status == 403 else "Cannot check access now"
    return pages.error_page(request, status, title, message)
