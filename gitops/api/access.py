"""Who a request is and what they may see and do, as the API server says (the shell of
`gitops.api.rules`, with the `Access` in the app's `ACCESS`: `gitops.api.reviews.KubeAccess`).

`authorize(request)` runs in the API's guard middleware for every request: the route's rule
(`RULES`, by route name) decides — PUBLIC passes; otherwise a bearer token (the header, else the
login cookie) must name a user (401 with `WWW-Authenticate: Bearer`; a page is sent to
`LOGIN_PATH` instead, and a page's `?token=` — the login link — sets the cookie and redirects to
the same URL without it), and each of the rule's access reviews must allow it (403 in the API
server's words). LISTED routes filter what they show with `may_list`, `visible_repositories`,
`visible_jobs` and `may_see`. `open_stream` counts long-lived answers against the caps.
Without `ACCESS` (no reviews) nothing here refuses or filters anything.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from yarl import URL

from gitops.api import rules
from gitops.api.auth import cross_site
from gitops.api.reviews import AccessUnavailable
from gitops.api.rules import COOKIE, Check, User
from gitops.api.state import ACCESS, LOGIN_PATH, PREFIX, RULES, SETTINGS, STREAMS, USER, ApiError
from gitops.runtime.hub import Change, ResourceDiff

__all__ = [
    "authenticate",
    "authorize",
    "is_page",
    "login_cookie",
    "may_list",
    "may_see",
    "open_stream",
    "served_securely",
    "still_valid",
    "user_of",
    "visible_diffs",
    "visible_jobs",
    "visible_repositories",
]

log = logging.getLogger("gitops.api.routes")


async def authorize(request: web.Request) -> web.StreamResponse | None:
    """With `ACCESS`: who the request is (401 without a valid token; a page is sent to the
    login page instead) and whether they may do what the route does (403). A one-time login
    link (`/?token=…`) sets the login cookie and redirects to the same page without it."""
    if request.match_info.http_exception is not None:
        return None  # no such route (404) or method (405): the handler says so
    route = request.match_info.route.name
    rule = request.app[RULES].get(route) if route else None
    if rule == rules.PUBLIC:
        return None
    page = is_page(request)
    link_token = request.query.get("token") if page else None
    if link_token is not None:
        # Only a link opened by the user (typed, pasted, from a terminal: Sec-Fetch-Site none)
        # or from our own pages: another site's link must not log the browser in as whoever's
        # token it carries (login CSRF).
        if cross_site(request.headers) is not None:
            return _unauthenticated(request, given=False)
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
        login_cookie(response, link_token, secure=served_securely(request))
        return response
    token = rules.bearer_token(request.headers.get("Authorization"), request.cookies.get(COOKIE))
    user = await authenticate(request, token) if token is not None else None
    if user is None:
        return _unauthenticated(request, given=token is not None)
    request[USER] = user
    if rule is None:  # a route added without a rule is refused, never open
        raise ApiError(403, f"no access rule for {request.method} {request.path}")
    if rule == rules.LISTED:
        return None
    for check in rules.needs(rule, request.match_info):
        if not await _allowed(request, user, check):
            raise ApiError(403, rules.forbidden_message(user, check))
    return None


async def authenticate(request: web.Request, token: str) -> User | None:
    """The user of `token` (None: the API server does not accept it); 503 when it cannot be
    asked. Without `ACCESS` nobody is authenticated."""
    access = request.app.get(ACCESS)
    if access is None:
        return None
    if not (token.isascii() and token.isprintable()):
        return None  # no token is (bytes that are not UTF-8 came in as surrogates: a 500)
    try:
        return await access.authenticate(token)
    except AccessUnavailable as e:
        log.warning("authentication unavailable: %s", e)
        raise ApiError(503, "cannot check the token now: the API server did not answer") from None


async def still_valid(request: web.Request) -> str:
    """Why a long-lived answer (an event stream, a log follow) must end now ("": it goes on):
    its token is no longer accepted by the API server or names another user, the user may no
    longer do what its route does (the route's access rule asked again), or the API server
    cannot be asked. The reviews go through `ACCESS`'s cache (at most its `ttl` old). Without
    `ACCESS` (the API's own token) nothing is reviewed."""
    access = request.app.get(ACCESS)
    if access is None:
        return ""
    token = rules.bearer_token(request.headers.get("Authorization"), request.cookies.get(COOKIE))
    if token is None:
        return "the token is no longer valid"
    try:
        user = await authenticate(request, token)
    except ApiError:
        return "the token cannot be checked now: the API server did not answer"
    if user is None or user != user_of(request):
        return "the token is no longer valid"
    route = request.match_info.route.name
    rule = request.app[RULES].get(route) if route else None
    if rule is None or rule in (rules.PUBLIC, rules.LISTED):
        return ""
    for check in rules.needs(rule, request.match_info):
        try:
            if not await access.allowed(user, check):
                return rules.forbidden_message(user, check)
        except AccessUnavailable:
            return "access cannot be checked now: the API server did not answer"
    return ""


def user_of(request: web.Request) -> User | None:
    """The authenticated user of this request (None without `ACCESS`)."""
    user = request.get(USER)
    return user if isinstance(user, User) else None


def served_securely(request: web.Request) -> bool:
    """Whether the browser reached us over TLS (ours, or a trusted proxy's:
    `rules.served_securely`)."""
    return rules.served_securely(
        tls=request.secure,
        peer=request.remote,
        forwarded_proto=request.headers.get("X-Forwarded-Proto"),
        trusted=request.app[SETTINGS].trusted_proxies,
    )


def login_cookie(response: web.StreamResponse, token: str, *, secure: bool) -> None:
    """Keep `token` in the login cookie (HttpOnly: scripts cannot read it; SameSite=Strict:
    other sites' requests do not carry it; Secure when `secure`: `served_securely`)."""
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


async def visible_diffs(request: web.Request, diffs: list[ResourceDiff]) -> list[ResourceDiff]:
    """The diffs whose object this request's user may list (a diff shows the live object): a
    kind discovery has not named is withheld. All of them without `ACCESS`."""
    if ACCESS not in request.app:
        return diffs
    user = user_of(request)
    if user is None:
        return []
    out = []
    for d in diffs:
        if not d.resource:
            continue
        if d.namespace:
            allowed = await may_list(request, d.group, d.resource, d.namespace)
        else:
            allowed = await _allowed(request, user, Check("list", d.group, d.resource, ""))
        if allowed:
            out.append(d)
    return out


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
        raise ApiError(429, f"too many open streams ({settings.max_streams}); try again later")
    if user is not None and streams.by_user.get(name, 0) >= settings.max_streams_per_user:
        raise ApiError(
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
        raise ApiError(503, "cannot check access now: the API server did not answer") from None


def is_page(request: web.Request) -> bool:
    """A GET or HEAD of a page (outside `/api/v1/`): the dashboard's, answered in HTML."""
    return request.method in ("GET", "HEAD") and not request.path.startswith(PREFIX + "/")


def _unauthenticated(request: web.Request, *, given: bool) -> web.StreamResponse:
    login = request.app.get(LOGIN_PATH)
    if login is not None and is_page(request):
        query = [(k, v) for k, v in request.query.items() if k != "token"]
        back = str(request.rel_url.with_query(query))
        target = URL(login).with_query({"next": back} if back != "/" else {})
        response = web.Response(status=303, headers={"Location": str(target)})
        if given:
            response.del_cookie(COOKIE, path="/")
        return response
    raise ApiError(
        401,
        "the token is not valid" if given else "a bearer token is required",
        {"WWW-Authenticate": 'Bearer realm="trainops"'},
    )


async def may_see(request: web.Request, change: Change) -> bool:
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
    except ApiError:
        return False
    return True
