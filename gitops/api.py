"""The GitOps HTTP API: JobRepositories, their diffs, training jobs, a change stream, push hooks.

Reads and actions go through the `gitops.hub.Hub` protocol (the reconciler implements it), so
this module is transport only. Routes (docs/GITOPS.md, "HTTP API and CLI"):

    GET  /api/v1/repositories                          {"items": [JobRepository]}
    GET  /api/v1/repositories/{namespace}/{name}       JobRepository (404 unknown)
    DELETE /api/v1/repositories/{namespace}/{name}     → 200 deleted (its jobs stay)
    POST /api/v1/repositories/{namespace}/{name}/sync  body {"revision"?: str} → 202 queued
    POST /api/v1/repositories/{namespace}/{name}/refresh                       → 202 queued
    GET  /api/v1/repositories/{namespace}/{name}/diff  {"items": [ResourceDiff]}
    GET  /api/v1/jobs                                  {"items": [job row]}
    GET  /api/v1/stream                                server-sent events, one per Hub.Change
    POST /api/v1/webhooks/git                          push hooks → 202 {"refreshed": [...]}

Every error is JSON, `{"error": "<message>"}`; an unexpected exception is logged with its
traceback and answered 500 `{"error": "internal error"}`. URL userinfo (a token in
`https://user:token@host/…`) is masked as `***` in every JobRepository shown.

Security (the rules themselves are `gitops.apiauth`):
- Loopback (`allow_remote_writes=False`, what `trainops up` serves on 127.0.0.1): requests whose
  `Host` is not a loopback name are refused (403; DNS rebinding), except the push hook (a
  tunnel forwards Git hosts' pushes with its own Host). Writes — every request whose method is
  not GET, HEAD or OPTIONS, on any route of the app (sync, refresh, a repository's delete, and
  the routes the dashboard adds: pause, resume, a job's delete), the push hook excepted — are
  accepted from loopback peers only; without a token they need no credentials; with one, they
  need `Authorization: Bearer <token>`. One rule by method, so a route added later cannot
  forget it.
- Beyond loopback (`allow_remote_writes=True`): a token is mandatory (`create_app` raises
  without one) and every write needs it. `serve` refuses a non-loopback address for an
  app built without `allow_remote_writes`.
- Every POST, the push hook included, is refused (403) when a browser says it comes from another
  site (`Sec-Fetch-Site`, or an `Origin` that is not this `Host`): a page elsewhere cannot
  trigger syncs even on loopback.
- The push hook needs no token: when a webhook secret is configured each provider's signature or
  token is required (401). Nothing from a payload is applied: a push only refreshes the
  JobRepositories whose repoURL and branch match, which fetch what they already name.
- Bodies are read with a cap (`max_body_bytes`, 1 MiB; 413, whatever Content-Length says) and a
  deadline (`body_timeout`; 408).

The stream (`text/event-stream`) starts with `retry: 2000`, then sends each change as
`event: <kind>` / `data: {"type": …, "object": …}` and a `: ping` comment after `heartbeat`
seconds (15) without one. It ends when the client goes away (noticed within a second), stops
reading (a write blocked `write_timeout`, 30 s: its connection is dropped) or the app shuts
down (`on_shutdown` ends every open stream at once).

`serve(app, host, port)` starts it (port 0: any free one). `trainops up` records where in
`DATA_DIR/api.json` (`write_address`); `trainops repo` reads it (`read_address`); both live in
`gitops.apiaddress` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from aiohttp import web
from yarl import URL

from gitops import access as rules
from gitops.access import COOKIE, Check, User
from gitops.apiaddress import (
    API_FILE,
    ApiAddress,
    base_url,
    read_address,
    remove_address,
    write_address,
)
from gitops.apiauth import bearer_matches, cross_site, host_name, is_loopback
from gitops.apishow import job_row, shown_repository
from gitops.hub import Change, Hub, UnknownRepository
from gitops.pushhooks import PushError, parse_push
from gitops.reviews import Access, AccessUnavailable

__all__ = [
    "ACCESS",
    "API_FILE",
    "HUB",
    "LOGIN_PATH",
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
    "shown_repository",
    "user_of",
    "write_address",
]

log = logging.getLogger(__name__)

MiB = 1024 * 1024


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
"""Present when requests are authenticated and authorized by the API server (`gitops.reviews`)."""
RULES = web.AppKey[dict[str, rules.Rule]]("gitops_api_rules")
"""Each route's access rule by route name (`gitops.access.API_RULES`, and the dashboard's)."""
LOGIN_PATH = web.AppKey("gitops_api_login_path", str)
"""Where a page request without a valid token is sent (the dashboard sets `/login`)."""
_USER: Any = (
    web.RequestKey("gitops_api_user", User) if hasattr(web, "RequestKey") else "gitops_api_user"
)
"""The request's authenticated user (a RequestKey where aiohttp has them: 3.12 and later)."""

_PREFIX = "/api/v1"
_WEBHOOK_ROUTE = "git-webhook"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing; every other request to the app, on any route (the API's own
and those other packages add, e.g. the dashboard's job actions), is a write, except the push
hook (it has its own secret and changes nothing but when Git is read)."""
_POLL = 1.0
"""How often an idle stream checks that its client is still there (seconds)."""


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
) -> web.Application:
    """The API application; raises ValueError for `allow_remote_writes` without a token or
    `access`. With `access` every request but the push hook needs a bearer token the API
    server accepts, and each read and action is authorized as its user; `token` is then
    unused."""
    if token is not None and not token.strip():
        raise ValueError("the API token is empty")
    if allow_remote_writes and not token and access is None:
        raise ValueError("an API reachable beyond loopback needs a token")
    if allow_remote_writes and webhook_secret is None:
        log.warning("the push webhook beyond loopback has no secret: anyone may trigger refreshes")
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
    )
    app = web.Application(middlewares=[_errors, _guard], client_max_size=max_body_bytes)
    app[HUB] = hub
    app[SETTINGS] = settings
    app[STREAMS] = Streams()
    app[RULES] = dict(rules.API_RULES)
    if access is not None:
        app[ACCESS] = access
    app.on_shutdown.append(_end_streams)
    repo = _PREFIX + "/repositories/{namespace}/{name}"
    app.router.add_get(_PREFIX + "/repositories", _list_repositories, name="repositories")
    app.router.add_get(repo, _get_repository, name="repository-get")
    app.router.add_delete(repo, _delete_repository, name="repository-delete")
    app.router.add_post(repo + "/sync", _sync, name="repository-sync")
    app.router.add_post(repo + "/refresh", _refresh, name="repository-refresh")
    app.router.add_get(repo + "/diff", _diff, name="repository-diff")
    app.router.add_get(_PREFIX + "/jobs", _jobs, name="jobs")
    app.router.add_get(_PREFIX + "/stream", _stream, name="stream")
    app.router.add_post(_PREFIX + "/webhooks/git", _webhook, name=_WEBHOOK_ROUTE)
    return app


async def serve(
    app: web.Application, host: str, port: int, *, shutdown_timeout: float = 5.0
) -> tuple[web.AppRunner, int]:
    """Listen on `host:port` (0: a free port); the runner (stop it with `runner.cleanup()`)
    and the port. A non-loopback `host` needs an app built with `allow_remote_writes`."""
    if not is_loopback(host) and not app[SETTINGS].allow_remote_writes:
        raise ValueError(
            f"the API would listen on {host or 'every interface'}, beyond loopback: that needs "
            "a token (allow_remote_writes)"
        )
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    actual = port
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            actual = int(address[1])
            break
    return runner, actual


# --- middlewares ---------------------------------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _ApiError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except _ApiError as e:
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
            raise _ApiError(403, f"host {host!r} refused: this API answers loopback names only")
    write = request.method not in SAFE_METHODS
    if write:
        reason = cross_site(request.headers)
        if reason is not None:
            raise _ApiError(403, reason)
    if ACCESS in request.app:
        answer = await _authorize(request)
        if answer is not None:
            return answer
    if not write:
        return await handler(request)
    if route != _WEBHOOK_ROUTE:
        if not settings.allow_remote_writes and not is_loopback(request.remote or ""):
            raise _ApiError(403, "changes are accepted from this machine only")
        if (
            ACCESS not in request.app
            and settings.token is not None
            and not bearer_matches(request.headers.get("Authorization"), settings.token)
        ):
            given = "Authorization" in request.headers
            raise _ApiError(
                401,
                "the token does not match" if given else "a bearer token is required",
                {"WWW-Authenticate": 'Bearer realm="trainops"'},
            )
    return await handler(request)


async def _authorize(request: web.Request) -> web.StreamResponse | None:
    """With `ACCESS`: who the request is (401 without a valid token; a page is sent to the
    login page instead) and whether they may do what the route does (403). A one-time login
    link (`/?token=…`) sets the login cookie and redirects to the same page without it."""
    if request.match_info.http_exception is not None:
        return None  # no such route (404) or method (405): the handler says so
    route = request.match_info.route.name
    rule = request.app[RULES].get(route) if route else None
    if rule == rules.PUBLIC:
        return None
    page = _is_page(request)
    link_token = request.query.get("token") if page else None
    if link_token is not None:
        user = await authenticate(request, link_token)
        if user is None:
            return _unauthenticated(request, given=True)
        query = [(k, v) for k, v in request.query.items() if k != "token"]
        response = web.Response(
            status=303,
            headers={
                "Location": str(request.rel_url.with_query(query)),
                "Cache-Control": "no-store",
            },
        )
        login_cookie(response, link_token, secure=request.secure)
        return response
    token = rules.bearer_token(request.headers.get("Authorization"), request.cookies.get(COOKIE))
    user = await authenticate(request, token) if token is not None else None
    if user is None:
        return _unauthenticated(request, given=token is not None)
    request[_USER] = user
    if rule is None:  # a route added without a rule is refused, never open
        raise _ApiError(403, f"no access rule for {request.method} {request.path}")
    if rule == rules.LISTED:
        return None
    for check in rules.needs(rule, request.match_info):
        if not await _allowed(request, user, check):
            raise _ApiError(403, rules.forbidden_message(user, check))
    return None


async def authenticate(request: web.Request, token: str) -> User | None:
    """The user of `token` (None: the API server does not accept it); 503 when it cannot be
    asked. Without `ACCESS` nobody is authenticated."""
    access = request.app.get(ACCESS)
    if access is None:
        return None
    try:
        return await access.authenticate(token)
    except AccessUnavailable as e:
        log.warning("authentication unavailable: %s", e)
        raise _ApiError(503, "cannot check the token now: the API server did not answer") from None


def user_of(request: web.Request) -> User | None:
    """The authenticated user of this request (None without `ACCESS`)."""
    user = request.get(_USER)
    return user if isinstance(user, User) else None


def login_cookie(response: web.StreamResponse, token: str, *, secure: bool) -> None:
    """Keep `token` in the login cookie (HttpOnly: scripts cannot read it; SameSite=Strict:
    other sites' requests do not carry it)."""
    response.set_cookie(
        COOKIE, token, httponly=True, samesite="Strict", path="/", secure=secure or None
    )


async def may_list(request: web.Request, group: str, resource: str, namespace: str) -> bool:
    """Whether this request's user may list `resource` in `namespace` (a cluster-wide list
    right answers first, and covers every namespace). Always, without `ACCESS`."""
    if ACCESS not in request.app:
        return True
    user = user_of(request)
    if user is None or not namespace:
        return False
    if await _allowed(request, user, Check("list", group, resource, "")):
        return True
    return await _allowed(request, user, Check("list", group, resource, namespace))


async def visible_repositories(
    request: web.Request, items: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The JobRepositories (API objects) whose namespace this request's user may list."""
    return [
        r
        for r in items
        if await may_list(
            request,
            rules.GROUP,
            rules.REPOSITORIES,
            str((r.get("metadata") or {}).get("namespace") or ""),
        )
    ]


async def visible_jobs(request: web.Request, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The job rows (`job_row`) whose kind and namespace this request's user may list."""
    if ACCESS not in request.app:
        return rows
    shown = []
    for row in rows:
        plural = rules.job_plural(row.get("kind"))
        if plural and await may_list(
            request, rules.JOB_GROUP, plural, str(row.get("namespace") or "")
        ):
            shown.append(row)
    return shown


@contextlib.asynccontextmanager
async def open_stream(request: web.Request) -> AsyncIterator[None]:
    """Count a long-lived answer (an event stream, a log follow) against the caps: at most
    `max_streams` open in all and `max_streams_per_user` per user (429 beyond)."""
    settings = request.app[SETTINGS]
    streams = request.app[STREAMS]
    user = user_of(request)
    name = user.name if user is not None else ""
    if streams.open >= settings.max_streams:
        raise _ApiError(429, f"too many open streams ({settings.max_streams}); try again later")
    if user is not None and streams.by_user.get(name, 0) >= settings.max_streams_per_user:
        raise _ApiError(
            429,
            f"user {name!r} has {settings.max_streams_per_user} streams open already; "
            "close one (another tab) first",
        )
    streams.open += 1
    streams.by_user[name] = streams.by_user.get(name, 0) + 1
    try:
        yield
    finally:
        streams.open -= 1
        streams.by_user[name] -= 1
        if streams.by_user[name] <= 0:
            del streams.by_user[name]


async def _allowed(request: web.Request, user: User, check: Check) -> bool:
    try:
        return await request.app[ACCESS].allowed(user, check)
    except AccessUnavailable as e:
        log.warning("authorization unavailable: %s", e)
        raise _ApiError(503, "cannot check access now: the API server did not answer") from None


def _is_page(request: web.Request) -> bool:
    return request.method in ("GET", "HEAD") and not request.path.startswith(_PREFIX + "/")


def _unauthenticated(request: web.Request, *, given: bool) -> web.StreamResponse:
    login = request.app.get(LOGIN_PATH)
    if login is not None and _is_page(request):
        query = [(k, v) for k, v in request.query.items() if k != "token"]
        back = str(request.rel_url.with_query(query))
        target = URL(login).with_query({"next": back} if back != "/" else {})
        response = web.Response(status=303, headers={"Location": str(target)})
        if given:
            response.del_cookie(COOKIE, path="/")
        return response
    raise _ApiError(
        401,
        "the token is not valid" if given else "a bearer token is required",
        {"WWW-Authenticate": 'Bearer realm="trainops"'},
    )


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
        raise _ApiError(400, str(e) or "invalid revision") from None
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
    body = await _read_body(request)
    try:
        event = parse_push(request.headers, body, request.app[SETTINGS].webhook_secret)
    except PushError as e:
        raise _ApiError(e.status, e.message) from None
    if event.ignored:
        return _json({"ignored": True})
    refreshed = await request.app[HUB].push(event)
    log.info(
        "push from %s for %s (branch %s): refreshing %s",
        event.provider,
        ", ".join(event.repo_urls),
        event.branch or event.tag or "?",
        ", ".join(refreshed) or "nothing",
    )
    return _json({"refreshed": list(refreshed)}, status=202)


async def _stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
        }
    )
    async with open_stream(request):
        return await _serve_stream(request, response)


async def _serve_stream(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
    settings = request.app[SETTINGS]
    streams = request.app[STREAMS]
    iterator = aiter(request.app[HUB].changes())
    pending: asyncio.Future[Any] | None = None
    closing: asyncio.Future[Any] = asyncio.ensure_future(streams.closing.wait())
    loop = asyncio.get_running_loop()
    try:
        await response.prepare(request)
        await response.write(f"retry: {settings.retry_ms}\n\n".encode())
        quiet_since = loop.time()
        while not streams.closing.is_set() and not _gone(request):
            if pending is None:
                pending = asyncio.ensure_future(anext(iterator))
            wait = max(0.0, min(_POLL, quiet_since + settings.heartbeat - loop.time()))
            await asyncio.wait(
                {pending, closing}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
            )
            if streams.closing.is_set() or _gone(request):
                break
            if pending.done():
                done, pending = pending, None
                try:
                    change = done.result()
                except StopAsyncIteration:
                    break
                if not await _may_see(request, change):
                    continue
                await _write(response, _event(change), settings.write_timeout)
                quiet_since = loop.time()
            elif loop.time() - quiet_since >= settings.heartbeat:
                await _write(response, b": ping\n\n", settings.write_timeout)
                quiet_since = loop.time()
    except ConnectionError:  # the client went away mid-write
        pass
    except TimeoutError:  # the client stopped reading: drop it rather than wait forever
        log.info("an event stream reader stalled for %gs; closing it", settings.write_timeout)
        if request.transport is not None:
            request.transport.abort()
    except Exception:
        log.exception("the change stream failed")
    finally:
        closing.cancel()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            try:
                await aclose()
            except Exception:
                log.exception("closing a change subscription failed")
    return response


async def _write(response: web.StreamResponse, data: bytes, timeout: float) -> None:
    async with asyncio.timeout(timeout):
        await response.write(data)


async def _end_streams(app: web.Application) -> None:
    app[STREAMS].closing.set()


# --- helpers -------------------------------------------------------------------------------------


def _event(change: Change) -> bytes:
    obj = shown_repository(change.object) if change.kind == "repository" else change.object
    data = orjson.dumps({"type": change.type, "object": obj})
    kind = re.sub(r"[\r\n]", "", change.kind) or "message"
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


async def _may_see(request: web.Request, change: Change) -> bool:
    """Whether the stream's user may list the changed object (a repository, a job); other
    notes (`resync`) go to everyone. When access cannot be checked the change is not sent."""
    if ACCESS not in request.app:
        return True
    meta = change.object.get("metadata") if isinstance(change.object, dict) else None
    namespace = str((meta or {}).get("namespace") or "")
    try:
        if change.kind == "repository":
            return await may_list(request, rules.GROUP, rules.REPOSITORIES, namespace)
        if change.kind == "job":
            plural = rules.job_plural(change.object.get("kind"))
            return plural is not None and await may_list(
                request, rules.JOB_GROUP, plural, namespace
            )
    except _ApiError:
        return False
    return True


def _gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


def _target(request: web.Request) -> tuple[str, str]:
    return request.match_info["namespace"], request.match_info["name"]


def _not_found(namespace: str, name: str) -> _ApiError:
    return _ApiError(404, f"jobrepository {namespace}/{name} not found")


def _revision(body: bytes) -> str | None:
    if not body.strip():
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise _ApiError(400, "the body is not valid JSON") from None
    if not isinstance(doc, dict):
        raise _ApiError(400, 'the body must be a JSON object, e.g. {"revision": "main"}')
    unknown = sorted(set(doc) - {"revision"})
    if unknown:
        raise _ApiError(400, f"unknown field {unknown[0]!r} (only 'revision' is accepted)")
    revision = doc.get("revision")
    if revision is None:
        return None
    if not isinstance(revision, str) or not revision.strip():
        raise _ApiError(400, "revision must be a non-empty string")
    return revision.strip()


async def _read_body(request: web.Request) -> bytes:
    """The body, at most `max_body_bytes` (413, whatever Content-Length says), within
    `body_timeout` seconds (408)."""
    settings = request.app[SETTINGS]
    limit = settings.max_body_bytes
    too_large = _ApiError(413, f"request body larger than the limit of {limit} bytes")
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
        raise _ApiError(
            408, f"request body not received within {settings.body_timeout:g}s"
        ) from None
    except ConnectionResetError:  # the client went away mid-body: nobody to answer, no error
        log.debug("%s %s: the client closed the connection mid-body", request.method, request.path)
        raise _ApiError(400, "connection closed mid-body") from None
    return b"".join(chunks)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    response = _json({"error": message}, status=status)
    response.headers.update(headers or {})
    return response
