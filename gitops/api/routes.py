"""The GitOps HTTP API: JobRepositories, their diffs, training jobs, a change stream, push hooks.

Reads and actions go through the `gitops.runtime.hub.Hub` protocol (the reconciler implements it), so
this module is transport only. Routes (docs/GITOPS.md, "HTTP API and CLI"):

    GET  /api/v1/repositories                          {"items": [JobRepository]}
    GET  /api/v1/repositories/{namespace}/{name}       JobRepository (404 unknown)
    DELETE /api/v1/repositories/{namespace}/{name}     → 200 deleted (its jobs stay)
    POST /api/v1/repositories/{namespace}/{name}/sync  body {"revision"?: str} → 202 queued
    POST /api/v1/repositories/{namespace}/{name}/refresh                       → 202 queued
    GET  /api/v1/repositories/{namespace}/{name}/diff  {"items": [ResourceDiff]}
    GET  /api/v1/jobs                                  {"items": [job row]}
    GET  /api/v1/stream                                server-sent events, one per Hub.Change
    POST /api/v1/webhooks/git                          push hooks → 202 {"refreshed": N}

Every error is JSON, `{"error": "<message>"}`; an unexpected exception is logged with its
traceback and answered 500 `{"error": "internal error"}`. URL userinfo (a token in
`https://user:token@host/…`) is masked as `***` in every JobRepository shown.

Security (the rules themselves are `gitops.api.auth` and `gitops.api.rules`):
- Authentication and authorization (`access=`, what `trainops up` passes: `gitops.api.reviews.
  KubeAccess`): every request but the push hook (and routes another package declares PUBLIC:
  the dashboard's login page and static files, up's `/metrics`) needs a bearer token — the
  `Authorization` header, or the dashboard's login cookie — that the API server accepts
  (TokenReview; 401 with `WWW-Authenticate: Bearer` otherwise, a page is sent to the login
  page); each route's access reviews (`RULES` by route name; a route without one is refused)
  are asked as that user (SubjectAccessReview; 403 in the API server's words); lists and the
  stream hold only the namespaces the user may list. `gitops.api.access` applies it.
- Loopback (`allow_remote_writes=False`, what `trainops up` serves on 127.0.0.1): requests whose
  `Host` is not a loopback name are refused (403; DNS rebinding), except the push hook (a
  tunnel forwards Git hosts' pushes with its own Host). Writes — every request whose method is
  not GET, HEAD or OPTIONS, on any route of the app (sync, refresh, a repository's delete, and
  the routes the dashboard adds: pause, resume, a job's delete), the push hook excepted — are
  accepted from loopback peers only. Without `access`, a static `token` (if given) is required
  of writes as `Authorization: Bearer <token>`. One rule by method, so a route added later
  cannot forget it.
- Beyond loopback (`allow_remote_writes=True`): `access` or a token is mandatory (`create_app`
  raises without either). `serve` refuses a non-loopback address for an app built without
  `allow_remote_writes`.
- Every POST, the push hook included, is refused (403) when a browser says it comes from another
  site (`Sec-Fetch-Site`, or an `Origin` that is not this `Host`): a page elsewhere cannot
  trigger syncs even on loopback, even with the login cookie.
- The push hook needs no token: a JobRepository naming its own push secret
  (`spec.push.secretRef`) is refreshed only by a push that proves it; the others by one that
  proves the shared `--webhook-secret` when it is set (else by any). With a shared secret, a
  push that proves no secret is a 401. Nothing from a payload is applied: a push only refreshes
  the JobRepositories whose repoURL and branch match, which fetch what they already name.
- Bodies are read with a cap (`max_body_bytes`, 1 MiB; 413, whatever Content-Length says) and a
  deadline (`body_timeout`; 408). Event streams and log follows are capped per user
  (`max_streams_per_user`, 8) and in all (`max_streams`, 64): 429 beyond.

The stream is `gitops.api.stream`.

`serve(app, host, port)` starts it (port 0: any free one). `trainops up` records where in
`DATA_DIR/api.json` (`write_address`); `trainops repo` reads it (`read_address`); both live in
`gitops.api.address` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import orjson
from aiohttp import web

from gitops.api import floods, rules
from gitops.api.access import (
    authenticate,
    authorize,
    is_page,
    login_cookie,
    may_list,
    open_stream,
    served_securely,
    still_valid,
    user_of,
    visible_diffs,
    visible_jobs,
    visible_repositories,
)
from gitops.api.address import (
    API_FILE,
    ApiAddress,
    base_url,
    read_address,
    remove_address,
    write_address,
)
from gitops.api.auth import bearer_matches, cross_site, host_name, is_loopback
from gitops.api.reviews import Access
from gitops.api.serving import API_LIMITS, CONNECTIONS, serve
from gitops.api.show import job_row, shown_repository
from gitops.api.state import (
    ACCESS,
    HUB,
    LOGIN_PATH,
    PAGE_ERROR,
    PREFIX,
    PUSH_LIMITER,
    RULES,
    SETTINGS,
    STREAMS,
    ApiError,
    MiB,
    Settings,
    Streams,
)
from gitops.api.stream import end_streams, stream
from gitops.runtime.hub import Hub, UnknownRepository
from gitops.source.pushhooks import PushCheck, PushError, PushEvent, proof_of, read_push
from kube import resources
from kube.connlimits import ConnectionGuard, ConnectionLimits

__all__ = [
    "ACCESS",
    "API_FILE",
    "HUB",
    "LOGIN_PATH",
    "PAGE_ERROR",
    "RULES",
    "SAFE_METHODS",
    "SETTINGS",
    "STREAMS",
    "ApiAddress",
    "Settings",
    "Streams",
    "authenticate",
    "base_url",
    "create_app",
    "job_row",
    "login_cookie",
    "may_list",
    "open_stream",
    "read_address",
    "remove_address",
    "serve",
    "served_securely",
    "shown_repository",
    "still_valid",
    "user_of",
    "visible_jobs",
    "visible_repositories",
    "write_address",
]

log = logging.getLogger(__name__)

_PREFIX = PREFIX
_WEBHOOK_ROUTE = "git-webhook"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing; every other request to the app, on any route (the API's own
and those other packages add, e.g. the dashboard's job actions), is a write, except the push
hook (it has its own secret and changes nothing but when Git is read)."""


def create_app(
    hub: Hub,
    *,
    token: str | None,
    webhook_secret: bytes | None,
    allow_remote_writes: bool,
    max_body_bytes: int = MiB,
    body_timeout: float = 10.0,
    heartbeat: float = 15.0,
    write_timeout: float = 30.0,
    access: Access | None = None,
    max_streams: int = 64,
    max_streams_per_user: int = 8,
    trusted_proxies: Sequence[str] = (),
    stream_recheck: float = 30.0,
    stream_lifetime: float = 3600.0,
    limits: ConnectionLimits | None = None,
) -> web.Application:
    """The API application; raises ValueError for `allow_remote_writes` without a token or
    `access`, or a `trusted_proxies` entry that is no address or CIDR. With `access` every
    request but the push hook needs a bearer token the API server accepts, and each read and
    action is authorized as its user; `token` is then unused."""
    if token is not None and not token.strip():
        raise ValueError("the API token is empty")
    if allow_remote_writes and not token and access is None:
        raise ValueError("an API reachable beyond loopback needs a token")
    settings = Settings(
        token=token,
        webhook_secret=webhook_secret,
        allow_remote_writes=allow_remote_writes,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
        heartbeat=heartbeat,
        write_timeout=write_timeout,
        max_streams=max_streams,
        max_streams_per_user=max_streams_per_user,
        trusted_proxies=rules.proxy_networks(trusted_proxies),
        stream_recheck=stream_recheck,
        stream_lifetime=stream_lifetime,
    )
    # Every connection held to `limits` once `serve` listens (the guard counts its requests).
    guard = ConnectionGuard(limits or API_LIMITS, name="gitops-api")
    app = web.Application(
        middlewares=[guard.middleware, _errors, _guard], client_max_size=max_body_bytes
    )
    app[CONNECTIONS] = guard
    app[HUB] = hub
    app[SETTINGS] = settings
    app[STREAMS] = Streams()
    app[RULES] = dict(rules.API_RULES)
    app[PUSH_LIMITER] = floods.PushLimiter()
    if access is not None:
        app[ACCESS] = access
    app.on_shutdown.append(end_streams)
    repo = _PREFIX + "/repositories/{namespace}/{name}"
    app.router.add_get(_PREFIX + "/repositories", _list_repositories, name="repositories")
    app.router.add_get(repo, _get_repository, name="repository-get")
    app.router.add_delete(repo, _delete_repository, name="repository-delete")
    app.router.add_post(repo + "/sync", _sync, name="repository-sync")
    app.router.add_post(repo + "/refresh", _refresh, name="repository-refresh")
    app.router.add_get(repo + "/diff", _diff, name="repository-diff")
    app.router.add_get(_PREFIX + "/jobs", _jobs, name="jobs")
    app.router.add_get(_PREFIX + "/stream", stream, name="stream")
    app.router.add_post(_PREFIX + "/webhooks/git", _webhook, name=_WEBHOOK_ROUTE)
    return app


# --- middlewares ---------------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as e:
        page_error = request.app.get(PAGE_ERROR)
        if page_error is not None and e.status in (403, 503) and is_page(request):
            return page_error(request, e.status, e.message)
        response = _error(e.status, e.message, e.headers)
        if e.status in (408, 413):  # the rest of the body is unread: do not reuse the connection
            response.force_close()
        return response
    except web.HTTPException as e:
        if e.status < 400:
            raise
        headers = {"Allow": e.headers["Allow"]} if "Allow" in e.headers else {}
        if e.status == 404:
            message = f"no such endpoint: {request.method} {request.path}"
        elif e.status == 405:
            message = f"method {request.method} not allowed on {request.path}"
        else:
            message = e.reason
        return _error(e.status, message, headers)
    except (asyncio.CancelledError, ConnectionError):
        raise
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return _error(500, "internal error")


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    route = request.match_info.route.name
    if not settings.allow_remote_writes and route != _WEBHOOK_ROUTE:
        host = request.headers.get("Host")
        if host is not None and not is_loopback(host_name(host)):
            raise ApiError(403, f"host {host!r} refused: this API answers loopback names only")
    for param in ("namespace", "name"):  # `.`, `..`: a path step in the backend's URL
        value = request.match_info.get(param)
        problem = resources.name_problem(value) if value is not None else None
        if problem is not None:
            raise ApiError(404, f"no {param} {value!r}: {problem}")
    write = request.method not in SAFE_METHODS
    if write:
        reason = cross_site(request.headers)
        if reason is not None:
            raise ApiError(403, reason)
    if ACCESS in request.app:
        answer = await authorize(request)
        if answer is not None:
            return answer
    if not write:
        return await handler(request)
    if route != _WEBHOOK_ROUTE:
        if not settings.allow_remote_writes and not is_loopback(request.remote or ""):
            raise ApiError(403, "changes are accepted from this machine only")
        if (
            ACCESS not in request.app
            and settings.token is not None
            and not bearer_matches(request.headers.get("Authorization"), settings.token)
        ):
            given = "Authorization" in request.headers
            raise ApiError(
                401,
                "the token does not match" if given else "a bearer token is required",
                {"WWW-Authenticate": 'Bearer realm="trainops"'},
            )
    return await handler(request)


# --- handlers ------------------------------------------------------------------------------------


async def _list_repositories(request: web.Request) -> web.Response:
    visible = await visible_repositories(request, request.app[HUB].repositories())
    return _json({"items": [shown_repository(r) for r in visible]})


async def _get_repository(request: web.Request) -> web.Response:
    namespace, name = _target(request)
    try:
        obj = request.app[HUB].repository(namespace, name)
    except UnknownRepository:
        raise _not_found(namespace, name) from None
    return _json(shown_repository(obj))


async def _delete_repository(request: web.Request) -> web.Response:
    namespace, name = _target(request)
    await _read_body(request)  # capped, and ignored
    try:
        await request.app[HUB].delete(namespace, name)
    except UnknownRepository:
        raise _not_found(namespace, name) from None
    return _json({"status": "deleted", "repository": f"{namespace}/{name}"})


async def _sync(request: web.Request) -> web.Response:
    namespace, name = _target(request)
    revision = _revision(await _read_body(request))
    try:
        await request.app[HUB].sync(namespace, name, revision)
    except UnknownRepository:
        raise _not_found(namespace, name) from None
    except ValueError as e:
        raise ApiError(400, str(e) or "invalid revision") from None
    body = {"status": "queued", "repository": f"{namespace}/{name}", "revision": revision}
    return _json(body, status=202)


async def _refresh(request: web.Request) -> web.Response:
    namespace, name = _target(request)
    await _read_body(request)  # capped, and ignored
    try:
        await request.app[HUB].refresh(namespace, name)
    except UnknownRepository:
        raise _not_found(namespace, name) from None
    return _json({"status": "queued", "repository": f"{namespace}/{name}"}, status=202)


async def _diff(request: web.Request) -> web.Response:
    namespace, name = _target(request)
    try:
        diffs = request.app[HUB].diff(namespace, name)
        repo = request.app[HUB].repository(namespace, name)
    except UnknownRepository:
        raise _not_found(namespace, name) from None
    diffs = await visible_diffs(request, diffs)  # each shows a live object: its reader's right
    body: dict[str, Any] = {"items": [asdict(d) for d in diffs]}
    conditions = (repo.get("status") or {}).get("conditions") or []
    error = next((c for c in conditions if c.get("type") == "ComparisonError"), None)
    if error is not None:
        body["comparisonError"] = str(error.get("message") or "cannot compare with Git")
    return _json(body)


async def _jobs(request: web.Request) -> web.Response:
    rows = await visible_jobs(request, [job_row(job) for job in request.app[HUB].jobs()])
    rows.sort(key=lambda r: (r["namespace"] or "", r["name"] or "", r["kind"] or ""))
    return _json({"items": rows})


async def _webhook(request: web.Request) -> web.Response:
    wait = request.app[PUSH_LIMITER].admit(request.remote or "", asyncio.get_running_loop().time())
    if wait:  # before the body is read: a flood costs no more than its headers
        retry = {"Retry-After": str(max(1, round(wait + 0.49)))}
        raise ApiError(429, "too many pushes from this address or in all: retry later", retry)
    body = await _read_body(request)
    check = PushCheck(proof_of(request.headers), body, request.app[SETTINGS].webhook_secret)
    try:
        if check.by_shared:  # as before repositories had secrets: 401 ahead of a bad body
            event = read_push(request.headers, body)
        else:  # read to find the repositories whose own secret may prove it
            event = _unproved(request.headers, body, check)
    except PushError as e:
        raise ApiError(e.status, e.message) from None
    if event.ignored:
        return _json({"ignored": True})
    refreshed = await request.app[HUB].push(event, check)
    refused = check.refusal()
    if refused is not None:
        raise ApiError(refused.status, refused.message)
    log.info(
        "push from %s for %s (branch %s): refreshing %s",
        event.provider,
        ", ".join(event.repo_urls),
        event.branch or event.tag or "?",
        ", ".join(refreshed) or "nothing",
    )
    # A count, never names: the caller is anonymous (no secret) or knows a secret every
    # tenant's Git host shares (or one repository's); which repositories of which namespaces
    # follow a URL is not theirs to learn. The log above, the operator's, names them.
    return _json({"refreshed": len(refreshed)}, status=202)


def _unproved(headers: Mapping[str, str], body: bytes, check: PushCheck) -> PushEvent:
    """A request the shared secret does not prove is read all the same (a repository's own
    secret may prove it), but one that is not even a push answers as the shared secret would:
    401, not 400 — an unauthenticated caller learns nothing from the difference."""
    try:
        return read_push(headers, body)
    except PushError:
        refused = check.refusal()
        if refused is not None:
            raise refused from None
        raise


# --- helpers -------------------------------------------------------------------------------------


def _target(request: web.Request) -> tuple[str, str]:
    return request.match_info["namespace"], request.match_info["name"]


def _not_found(namespace: str, name: str) -> ApiError:
    return ApiError(404, f"jobrepository {namespace}/{name} not found")


def _revision(body: bytes) -> str | None:
    if not body.strip():
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(doc, dict):
        raise ApiError(400, 'the body must be a JSON object, e.g. {"revision": "main"}')
    unknown = sorted(set(doc) - {"revision"})
    if unknown:
        raise ApiError(400, f"unknown field {unknown[0]!r} (only 'revision' is accepted)")
    revision = doc.get("revision")
    if revision is None:
        return None
    if not isinstance(revision, str) or not revision.strip():
        raise ApiError(400, "revision must be a non-empty string")
    return revision.strip()


async def _read_body(request: web.Request) -> bytes:
    """The body, at most `max_body_bytes` (413, whatever Content-Length says), within
    `body_timeout` seconds (408)."""
    settings = request.app[SETTINGS]
    limit = settings.max_body_bytes
    too_large = ApiError(413, f"request body larger than the limit of {limit} bytes")
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(settings.body_timeout):
            while True:
                chunk = await request.content.read(64 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408, f"request body not received within {settings.body_timeout:g}s"
        ) from None
    except ConnectionResetError:  # the client went away mid-body: nobody to answer, no error
        log.debug("%s %s: the client closed the connection mid-body", request.method, request.path)
        raise ApiError(400, "connection closed mid-body") from None
    return b"".join(chunks)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    # A message may quote a header of bytes that are not UTF-8 (surrogates: orjson refuses).
    shown = message.encode("utf-8", "backslashreplace").decode("utf-8")
    response = _json({"error": shown}, status=status)
    response.headers.update(headers or {})
    return response
