"""The HTML pages: `/`, a repository, its diff, a job; each also as fragments for live updates.

A page and its fragments share one context builder, so what the browser swaps in on a stream
event (`?fragment=<name>`: the same template part the page includes) is exactly what a reload
would show. Errors are pages too: an unknown repository or job is a 404 page naming it, an
API server that cannot be reached a 502 page saying so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from dashboard import jobviews, plotlyfile, progressviews, views
from dashboard.backend import Backend, UnknownJob
from dashboard.render import Renderer
from gitops.api import routes as api
from gitops.api.access import may_list, visible_diffs
from gitops.runtime.hub import UnknownRepository
from kube import errors

__all__ = ["BACKEND", "CLOCK", "RENDERER", "add_routes", "error_page", "not_found_middleware"]

log = logging.getLogger(__name__)

BACKEND = web.AppKey("dashboard_backend", Backend)
RENDERER = web.AppKey("dashboard_renderer", Renderer)
Clock = Callable[[], datetime]
CLOCK: web.AppKey[Clock] = web.AppKey("dashboard_clock")

_FRAGMENTS = {
    "front": {"repositories": "_repositories.html", "jobs": "_jobs.html"},
    "repository": {"repository": "_repository.html"},
    "job": {"job": "_job.html"},
}


def add_routes(app: web.Application) -> None:
    app.router.add_get("/", front, name="dashboard-front")
    app.router.add_get("/repositories/{namespace}/{name}", repository, name="dashboard-repo")
    app.router.add_get("/repositories/{namespace}/{name}/diff", diff, name="dashboard-diff")
    app.router.add_get("/jobs/{namespace}/{plural}/{name}", job, name="dashboard-job")


def who(request: web.Request) -> str:
    """The signed-in user's name, for the page header's logout ("" without authentication)."""
    user = api.user_of(request)
    return user.name if user is not None else ""


def now(request: web.Request) -> datetime:
    return request.app[CLOCK]()


async def front(request: web.Request) -> web.Response:
    backend = request.app[BACKEND]
    moment = now(request)
    filters = views.Filters.from_query(request.query)
    shown = await api.visible_repositories(request, backend.repositories())
    repositories = [views.repository_row(r, moment) for r in shown]
    jobs = views.job_rows(await api.visible_jobs(request, backend.job_rows()), moment)
    context = {
        "now": moment.astimezone(UTC).isoformat(timespec="milliseconds"),
        "user": who(request),
        "page": "front",
        "watch": "",
        "title": "Overview",
        "repositories": repositories,
        "jobs": views.filter_jobs(jobs, filters),
        "jobs_total": len(jobs),
        "progress": progressviews.progress_by_key(backend.live_jobs()),
        "filters": filters,
        "options": views.filter_options(jobs, repositories, filters),
        "clear_filters": "/",
    }
    return _respond(request, "front", "front.html", context)


async def repository(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    backend = request.app[BACKEND]
    try:
        obj = backend.repository(namespace, name)
        every = backend.diffs(namespace, name)
    except UnknownRepository:
        return _unknown_repository(request, namespace, name)
    diffs = [asdict(d) for d in await visible_diffs(request, every)]
    moment = now(request)
    detail = views.repository_detail(obj, diffs, moment)
    context = {
        "now": moment.astimezone(UTC).isoformat(timespec="milliseconds"),
        "user": who(request),
        "page": "repository",
        "watch": f"repository:{namespace}/{name}",
        "title": f"{namespace}/{name}",
        "repo": detail,
        "progress": progressviews.progress_by_key(backend.live_jobs()),
    }
    return _respond(request, "repository", "repository.html", context)


async def diff(request: web.Request) -> web.Response:
    namespace, name = request.match_info["namespace"], request.match_info["name"]
    backend = request.app[BACKEND]
    resource = request.query.get("resource", "")
    try:
        obj = backend.repository(namespace, name)
        every = backend.diffs(namespace, name)
    except UnknownRepository:
        return _unknown_repository(request, namespace, name)
    diffs = [asdict(d) for d in await visible_diffs(request, every)]
    moment = now(request)
    row = views.repository_row(obj, moment)
    context = {
        "now": moment.astimezone(UTC).isoformat(timespec="milliseconds"),
        "user": who(request),
        "page": "repository",
        "watch": "",
        "title": f"diff {resource} · {namespace}/{name}",
        "repo": row,
        "resource": resource,
        "diff": views.resource_diff(diffs, resource) if resource else None,
    }
    return request.app[RENDERER].page("diff.html", context)


async def readable_parts(
    request: web.Request, backend: Backend, namespace: str, job: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The job's pods and Events, each only if this request's user may list them in the
    namespace (read with the service's identity, shown as the user's rights allow: `get` on
    the job alone does not show its pods' specs or its Events)."""
    pods, events = [], []
    if await may_list(request, "", "pods", namespace):
        pods = await backend.pods(namespace, str((job.get("metadata") or {}).get("name") or ""))
    if await may_list(request, "", "events", namespace):
        events = await backend.events(namespace, job)
    return pods, events


async def job(request: web.Request) -> web.Response:
    namespace = request.match_info["namespace"]
    plural, name = request.match_info["plural"], request.match_info["name"]
    backend = request.app[BACKEND]
    what = f"{plural} {namespace}/{name}"
    try:
        obj = await backend.job(namespace, plural, name)
        pods, events = await readable_parts(request, backend, namespace, obj)
    except UnknownJob:
        return error_page(
            request,
            404,
            f"{plural} is not a training job kind",
            "Job pages are /jobs/<namespace>/tensorflowtrainingjobs/<name> or "
            "/jobs/<namespace>/xgboosttrainingjobs/<name>.",
        )
    except errors.NotFound:
        title = f"No {plural.removesuffix('s')} {namespace}/{name}"
        message = "It may have been deleted, or not created yet. The overview lists every job."
        if request.query.get("fragment") == "job":
            # The open page's live refresh asks for this: a 404 would be a console error in
            # the browser (every 4xx fetch is), so the fragment says "gone" with a 200 and
            # the page shows its notice. The page itself stays a 404.
            gone = {"title": title, "message": message}
            return request.app[RENDERER].page("_job_gone.html", gone)
        return error_page(request, 404, title, message)
    except errors.APIError as e:
        log.warning("job page %s: %s", what, e)
        return error_page(
            request, 502, "The API server did not answer", f"Reading {what} failed: {e}"
        )
    moment = now(request)
    detail = jobviews.job_detail(obj, pods, events, moment)
    api_path = f"/api/v1{detail['path']}" if detail["path"] else ""
    context = {
        "now": moment.astimezone(UTC).isoformat(timespec="milliseconds"),
        "user": who(request),
        "page": "job",
        "watch": f"job:{namespace}/{name}",
        "title": f"{namespace}/{name}",
        "job": detail,
        "api_path": api_path,
        "progress": progressviews.summary(obj.get("status")),
        "plotly_url": progressviews.PLOTLY_PATH,
        "plotly_guards": (plotlyfile.GLOBAL_STYLE_ID, *plotlyfile.style_guard_ids()),
    }
    return _respond(request, "job", "job.html", context)


def error_page(request: web.Request, status: int, title: str, message: str) -> web.Response:
    context = {
        "page": "error",
        "watch": "",
        "title": title,
        "message": message,
        "status": status,
        "user": who(request),
    }
    return request.app[RENDERER].page("error.html", context, status=status)


def not_found_middleware() -> Any:
    """HTML 404 pages for paths outside `/api/` (the API's own middleware answers JSON there)."""

    @web.middleware
    async def middleware(
        request: web.Request, handler: Callable[[web.Request], Any]
    ) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
            return response
        except web.HTTPNotFound:
            if request.path.startswith("/api/") or request.method not in ("GET", "HEAD"):
                raise
            return error_page(request, 404, "Page not found", f"Nothing lives at {request.path}.")

    return middleware


def _unknown_repository(request: web.Request, namespace: str, name: str) -> web.Response:
    return error_page(
        request,
        404,
        f"No repository {namespace}/{name}",
        f"No JobRepository {namespace}/{name} exists (kubectl get jobrepo -A lists them); "
        "the overview shows the ones there are.",
    )


def _respond(
    request: web.Request, page: str, template: str, context: Mapping[str, Any]
) -> web.Response:
    renderer = request.app[RENDERER]
    fragment = request.query.get("fragment")
    if fragment is None:
        return renderer.page(template, context)
    part = _FRAGMENTS[page].get(fragment)
    if part is None:
        known = ", ".join(sorted(_FRAGMENTS[page]))
        return web.Response(
            status=400, text=f"unknown fragment {fragment!r} (this page has: {known})"
        )
    return renderer.page(part, context)


def system_clock() -> datetime:
    return datetime.now(UTC)
