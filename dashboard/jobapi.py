"""The job routes the pages use, under `/api/v1` beside the GitOps API, with its rules.

    GET    /api/v1/jobs/{namespace}/{plural}/{name}          {"job", "pods", "events"}
    GET    /api/v1/jobs/{namespace}/{plural}/{name}/logs     ?pod=&container=&tailLines=&follow=
    POST   /api/v1/jobs/{namespace}/{plural}/{name}/pause    202 (merge patch of
    POST   /api/v1/jobs/{namespace}/{plural}/{name}/resume   202  spec.runMode.pause.enabled)
    DELETE /api/v1/jobs/{namespace}/{plural}/{name}          202 (background propagation)

Security: the API's own middleware (`gitops.api`) already refuses non-loopback `Host` names
and cross-site browser requests for every non-GET method, DELETE included. The writes here
add what it applies to its own sync and refresh (`gitops.apiauth`): from loopback peers only
unless the app allows remote writes, and the bearer token whenever one is configured. Errors
are the API's shape, `{"error": "<message>"}`.

Logs are read through the API server's `pods/log` (`kube.Client`), never from local files; a
pod must carry the job's label, so these routes cannot read any other pod of the namespace.
With `follow=true` the answer streams until the client leaves, the log ends, or the app
shuts down (the API's `on_shutdown` event ends log streams as it ends event streams).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from aiohttp import web

from dashboard import jobviews
from dashboard.backend import JOB_LABEL, UnknownJob
from dashboard.pages import BACKEND
from gitops.api import SETTINGS, STREAMS
from gitops.apiauth import bearer_matches, is_loopback
from kube import errors

__all__ = ["DEFAULT_TAIL", "MAX_TAIL", "add_routes", "write_refusal"]

log = logging.getLogger(__name__)

DEFAULT_TAIL = 500
MAX_TAIL = 100_000
_POLL = 1.0
_PASSED = frozenset({400, 404, 409, 422})
"""API server answers passed on as they are (the request's fault); others are 502."""
_JOB = "/api/v1/jobs/{namespace}/{plural}/{name}"


def add_routes(app: web.Application) -> None:
    app.router.add_get(_JOB, get_job, name="dashboard-job-api")
    app.router.add_delete(_JOB, delete_job, name="dashboard-job-delete")
    app.router.add_get(_JOB + "/logs", logs, name="dashboard-job-logs")
    app.router.add_post(_JOB + "/pause", pause, name="dashboard-job-pause")
    app.router.add_post(_JOB + "/resume", resume, name="dashboard-job-resume")


def write_refusal(request: web.Request) -> web.Response | None:
    """The answer refusing a write (403/401), or None when it may go ahead (the same rules as
    the API's sync and refresh)."""
    settings = request.app[SETTINGS]
    if not settings.allow_remote_writes and not is_loopback(request.remote or ""):
        return _error(403, "changes are accepted from this machine only")
    if settings.token is not None and not bearer_matches(
        request.headers.get("Authorization"), settings.token
    ):
        given = "Authorization" in request.headers
        response = _error(
            401, "the token does not match" if given else "a bearer token is required"
        )
        response.headers["WWW-Authenticate"] = 'Bearer realm="trainops"'
        return response
    return None


async def get_job(request: web.Request) -> web.Response:
    namespace, plural, name = _target(request)
    backend = request.app[BACKEND]
    try:
        obj = await backend.job(namespace, plural, name)
        pods = await backend.pods(namespace, name)
        events = await backend.events(namespace, obj)
    except (UnknownJob, errors.APIError) as e:
        return _failure(e, namespace, plural, name)
    return _json(
        {
            "job": obj,
            "pods": [jobviews.pod_summary(p) for p in pods],
            "events": events,
        }
    )


async def pause(request: web.Request) -> web.Response:
    return await _set_paused(request, True)


async def resume(request: web.Request) -> web.Response:
    return await _set_paused(request, False)


async def delete_job(request: web.Request) -> web.Response:
    refusal = write_refusal(request)
    if refusal is not None:
        return refusal
    namespace, plural, name = _target(request)
    try:
        await request.app[BACKEND].delete(namespace, plural, name)
    except (UnknownJob, errors.APIError) as e:
        return _failure(e, namespace, plural, name)
    log.info("dashboard: deleting %s %s/%s", plural, namespace, name)
    return _json({"status": "deleting", "job": f"{namespace}/{name}"}, status=202)


async def logs(request: web.Request) -> web.StreamResponse:
    namespace, plural, name = _target(request)
    backend = request.app[BACKEND]
    pod_name = request.query.get("pod", "").strip()
    if not pod_name:
        return _error(400, "name the replica's pod: ?pod=<pod name>")
    try:
        tail = _tail(request.query.get("tailLines"))
    except ValueError as e:
        return _error(400, str(e))
    follow = request.query.get("follow", "").lower() in ("1", "true", "yes")
    try:
        await backend.job(namespace, plural, name)
        pod = await backend.pod(namespace, pod_name)
    except (UnknownJob, errors.APIError) as e:
        return _failure(e, namespace, plural, name)
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(JOB_LABEL) != name:
        return _error(404, f"pod {pod_name} is not a replica of {namespace}/{name}")
    containers = [
        c.get("name") for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name")
    ]
    container = request.query.get("container") or (containers[0] if containers else "")
    if container not in containers:
        return _error(400, f"pod {pod_name} has no container {container!r}")
    if not follow:
        try:
            data = await backend.log(namespace, pod_name, container, tail)
        except errors.APIError as e:
            return _log_failure(e, pod_name)
        return web.Response(body=data, content_type="text/plain", charset="utf-8")
    return await _follow(request, namespace, pod_name, container, tail)


async def _follow(
    request: web.Request, namespace: str, pod: str, container: str, tail: int | None
) -> web.StreamResponse:
    lines = request.app[BACKEND].follow(namespace, pod, container, tail)
    iterator = aiter(lines)
    try:
        first = await anext(iterator)
    except StopAsyncIteration:
        first = None
    except errors.APIError as e:
        return _log_failure(e, pod)
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/plain; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    closing = request.app[STREAMS].closing
    ended: asyncio.Future[Any] = asyncio.ensure_future(closing.wait())
    pending: asyncio.Future[Any] | None = None
    try:
        await response.prepare(request)
        if first is None:
            return response
        await response.write(first + b"\n")
        while not closing.is_set() and not _gone(request):
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            await asyncio.wait({pending, ended}, timeout=_POLL)
            if not pending.done():
                continue
            done, pending = pending, None
            try:
                line = done.result()
            except StopAsyncIteration:
                break
            except errors.APIError as e:
                await response.write(f"\n[log stream ended: {e}]\n".encode())
                break
            await response.write(line + b"\n")
    except ConnectionError:
        pass
    finally:
        ended.cancel()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(lines, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
    return response


async def _set_paused(request: web.Request, paused: bool) -> web.Response:
    refusal = write_refusal(request)
    if refusal is not None:
        return refusal
    namespace, plural, name = _target(request)
    try:
        await request.app[BACKEND].set_paused(namespace, plural, name, paused)
    except (UnknownJob, errors.APIError) as e:
        return _failure(e, namespace, plural, name)
    what = "pause" if paused else "resume"
    log.info("dashboard: %s requested for %s %s/%s", what, plural, namespace, name)
    return _json({"status": f"{what} requested", "job": f"{namespace}/{name}"}, status=202)


def _tail(value: str | None) -> int | None:
    """`tailLines`: default DEFAULT_TAIL, `all` (or 0) for the whole log."""
    if value is None or value == "":
        return DEFAULT_TAIL
    if value.lower() == "all":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"tailLines must be a number or 'all', not {value!r}") from None
    if n < 0 or n > MAX_TAIL:
        raise ValueError(f"tailLines must be between 0 and {MAX_TAIL}")
    return n or None


def _failure(e: Exception, namespace: str, plural: str, name: str) -> web.Response:
    if isinstance(e, UnknownJob):
        return _error(404, f"{plural} is not a training job kind")
    if isinstance(e, errors.NotFound):
        return _error(404, f"{plural.removesuffix('s')} {namespace}/{name} not found")
    if isinstance(e, errors.APIError) and e.status in _PASSED:
        return _error(e.status, e.message or str(e))
    log.warning("dashboard: %s %s/%s: %s", plural, namespace, name, e)
    return _error(502, f"the API server did not answer: {e}")


def _log_failure(e: errors.APIError, pod: str) -> web.Response:
    if isinstance(e, errors.NotFound):
        return _error(404, f"pod {pod} not found")
    if e.status in _PASSED:  # e.g. 400: a container still waiting to start
        return _error(e.status, e.message or str(e))
    return _error(502, f"reading the log of {pod} failed: {e}")


def _target(request: web.Request) -> tuple[str, str, str]:
    info = request.match_info
    return info["namespace"], info["plural"], info["name"]


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status=status)
