"""The job routes the pages use, under `/api/v1` beside the GitOps API, with its rules.

    GET    /api/v1/jobs/{namespace}/{plural}/{name}          {"job", "pods", "events"}
    GET    /api/v1/jobs/{namespace}/{plural}/{name}/logs     ?pod=&container=&tailLines=&follow=&previous=
    POST   /api/v1/jobs/{namespace}/{plural}/{name}/pause    202 (server-side apply of
    POST   /api/v1/jobs/{namespace}/{plural}/{name}/resume   202  spec.runMode.pause.enabled;
                                                                 held by hand on a Git job)
    DELETE /api/v1/jobs/{namespace}/{plural}/{name}          202 (background propagation);
                                                             409 while a repository deploys it

Security: nothing here. The API's own middleware (`gitops.api.routes`, rules in `gitops.api.auth` and
`gitops.api.rules`) guards these routes as it guards sync and refresh: a non-loopback `Host` is
refused; every POST or DELETE is a write — refused cross-site, accepted from loopback peers only
unless the app allows remote writes; and with the API server's reviews (`trainops up`) each
route needs a token and its access review (`dashboard.app.RULES`: `get` on the job kind to
read, `patch` to pause or resume, `delete`, and `get pods/log` for logs). A follow counts
against the API's caps on open streams (per user and in all; 429 beyond). Errors are the API's
shape, `{"error": "<message>"}`.

Logs are read through the API server's `pods/log` (`kube.Client`), never from local files; a
pod must carry the job's label, so these routes cannot read any other pod of the namespace.
With `follow=true` the answer streams until the client leaves, the log ends, the app
shuts down (the API's `on_shutdown` event ends log streams as it ends event streams),
`FOLLOW_LIMIT` passes, or its token or access no longer holds: every `stream_recheck` seconds
the token is reviewed again (TokenReview) and the route's access (`get pods/log`) asked
again, as the event stream does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from aiohttp import web

from dashboard import jobviews
from dashboard.backend import JOB_LABEL, DeployedFromGit, UnknownJob
from dashboard.pages import BACKEND, readable_parts
from gitops.api.routes import SETTINGS, STREAMS, open_stream, still_valid
from kube import errors, resources

__all__ = ["DEFAULT_TAIL", "FOLLOW_LIMIT", "MAX_TAIL", "add_routes"]

log = logging.getLogger(__name__)

DEFAULT_TAIL = 500
MAX_TAIL = 100_000
FOLLOW_LIMIT = 4 * 3600.0
"""How long one follow lasts (seconds); the page says so and the user follows again."""
_POLL = 1.0
"""How often a follow checks that its reader is still there (seconds)."""
_FIRST_LINE_WAIT = 2.0
_WRITE_TIMEOUT = 30.0
_PASSED = frozenset({400, 404, 409, 422})
"""API server answers passed on as they are (the request's fault); others are 502."""
_JOB = "/api/v1/jobs/{namespace}/{plural}/{name}"
HELD_NOTE = (
    "the job is deployed from Git: spec.runMode.pause.enabled is now held by hand (annotation "
    "gitops.trainops.dev/held-fields), so self-heal and later commits leave it alone until the "
    "annotation is removed"
)


def add_routes(app: web.Application) -> None:
    app.router.add_get(_JOB, get_job, name="dashboard-job-api")
    app.router.add_delete(_JOB, delete_job, name="dashboard-job-delete")
    app.router.add_get(_JOB + "/logs", logs, name="dashboard-job-logs")
    app.router.add_post(_JOB + "/pause", pause, name="dashboard-job-pause")
    app.router.add_post(_JOB + "/resume", resume, name="dashboard-job-resume")


async def get_job(request: web.Request) -> web.Response:
    namespace, plural, name = _target(request)
    backend = request.app[BACKEND]
    try:
        obj = await backend.job(namespace, plural, name)
        pods, events = await readable_parts(request, backend, namespace, obj)
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
    namespace, plural, name = _target(request)
    try:
        await request.app[BACKEND].delete(namespace, plural, name)
    except DeployedFromGit as e:
        return _error(409, str(e))
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
    if resources.name_problem(pod_name) is not None:  # `..` would read another path
        return _error(404, f"pod {pod_name!r} is not a replica of {namespace}/{name}")
    try:
        tail = _tail(request.query.get("tailLines"))
    except ValueError as e:
        return _error(400, str(e))
    follow = request.query.get("follow", "").lower() in ("1", "true", "yes")
    previous = request.query.get("previous", "").lower() in ("1", "true", "yes")
    if previous and follow:
        return _error(400, "a previous run has ended: it cannot be followed")
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
            data = await backend.log(namespace, pod_name, container, tail, previous=previous)
        except errors.APIError as e:
            return _log_failure(e, pod_name)
        return web.Response(body=data, content_type="text/plain", charset="utf-8")
    async with open_stream(request):  # counted with the event streams, per user and in all
        return await _follow(request, namespace, pod_name, container, tail)


async def _follow(
    request: web.Request, namespace: str, pod: str, container: str, tail: int | None
) -> web.StreamResponse:
    """Stream the log. Waits at most `_FIRST_LINE_WAIT` for the first line or the API server's
    refusal (answered with its status); a quiet log starts the answer then and is followed
    until the reader leaves (noticed within `_POLL`), stops reading (`_WRITE_TIMEOUT`), the app
    shuts down, `FOLLOW_LIMIT` passes, or — asked every `stream_recheck` seconds, as the event
    stream asks — the token is no longer valid or its user may no longer `get pods/log`
    there (`still_valid`; the last line says which). However it ends, the upstream `pods/log` request is
    closed (cancelling the pending read closes the response inside `kube`)."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    recheck = request.app[SETTINGS].stream_recheck
    lines = request.app[BACKEND].follow(namespace, pod, container, tail, limit=FOLLOW_LIMIT)
    iterator = aiter(lines)
    closing = request.app[STREAMS].closing
    ended: asyncio.Future[Any] = asyncio.ensure_future(closing.wait())
    first: asyncio.Future[bytes] = asyncio.ensure_future(anext(iterator))
    pending: asyncio.Future[bytes] | None = first
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/plain; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    try:
        await asyncio.wait(
            {first, ended}, timeout=_FIRST_LINE_WAIT, return_when=asyncio.FIRST_COMPLETED
        )
        if first.done() and not first.cancelled():
            failure = first.exception()
            if isinstance(failure, errors.APIError):
                return _log_failure(failure, pod)
        await response.prepare(request)
        checked = loop.time()
        while not closing.is_set() and not _gone(request):
            if loop.time() - checked >= recheck:
                why = await still_valid(request)
                if why:
                    await _write(response, f"\n[log stream ended: {why}]\n".encode())
                    break
                checked = loop.time()
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            wait = max(0.0, min(_POLL, checked + recheck - loop.time()))
            await asyncio.wait({pending, ended}, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            if not pending.done():
                continue
            done, pending = pending, None
            try:
                line = done.result()
            except StopAsyncIteration:
                break
            except errors.APIError as e:
                if loop.time() - started >= FOLLOW_LIMIT:
                    note = f"following stopped after {FOLLOW_LIMIT / 3600:g}h: press Follow again"
                else:
                    note = f"log stream ended: {e}"
                await _write(response, f"\n[{note}]\n".encode())
                break
            await _write(response, line + b"\n")
    except ConnectionError:
        pass
    except TimeoutError:  # the reader stopped reading: drop the connection
        log.info("dashboard: log reader of %s/%s stalled; closing", namespace, pod)
        if request.transport is not None:
            request.transport.abort()
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


async def _write(response: web.StreamResponse, data: bytes) -> None:
    async with asyncio.timeout(_WRITE_TIMEOUT):
        await response.write(data)


async def _set_paused(request: web.Request, paused: bool) -> web.Response:
    namespace, plural, name = _target(request)
    try:
        held = await request.app[BACKEND].set_paused(namespace, plural, name, paused)
    except (UnknownJob, errors.APIError) as e:
        return _failure(e, namespace, plural, name)
    what = "pause" if paused else "resume"
    log.info("dashboard: %s requested for %s %s/%s", what, plural, namespace, name)
    answer = {"status": f"{what} requested", "job": f"{namespace}/{name}", "heldByHand": held}
    if held:
        answer["message"] = HELD_NOTE
    return _json(answer, status=202)


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
