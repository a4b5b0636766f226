"""The login page, its form and logout: the bearer token kept in the login cookie.

    GET  /login     the form (a Kubernetes bearer token)
    POST /login     token=…&next=/path → 303 to `next` with the cookie set; 401 and the form
                    again when the API server does not accept the token
    POST /logout    → 303 to /login with the cookie cleared

The token is checked as every request's is (`gitops.api.routes.authenticate`: a TokenReview), then
kept in an HttpOnly, SameSite=Strict, Path=/ cookie (`gitops.api.routes.login_cookie`; Secure
over TLS, ours or a trusted proxy's: `served_securely`), which the
pages, their fragments, the event stream and the job actions carry from then on. Both POSTs
pass the API's write rules (cross-site refused, loopback peers only on loopback). `next` is
followed only when it is a path of this server (`/…`, never `//host`).
"""

from __future__ import annotations

from aiohttp import web

from dashboard.render import Renderer
from gitops.api import routes as api
from gitops.api.rules import COOKIE

__all__ = ["LOGIN_PATH", "add_routes", "safe_next"]

LOGIN_PATH = "/login"
_MAX_TOKEN = 16 * 1024


def add_routes(app: web.Application, renderer: Renderer) -> None:
    async def form(request: web.Request) -> web.Response:
        return _form(renderer, safe_next(request.query.get("next")), None)

    async def submit(request: web.Request) -> web.Response:
        data = await request.post()  # within the app's client_max_size
        token = str(data.get("token") or "").strip()
        target = safe_next(str(data.get("next") or ""))
        if not token or len(token) > _MAX_TOKEN:
            return _form(renderer, target, "Paste a token.", status=401)
        user = await api.authenticate(request, token)
        if user is None:
            return _form(renderer, target, "The cluster does not accept this token.", status=401)
        response = web.Response(status=303, headers={"Location": target})
        api.login_cookie(response, token, secure=api.served_securely(request))
        return response

    async def logout(request: web.Request) -> web.Response:
        response = web.Response(status=303, headers={"Location": LOGIN_PATH})
        response.del_cookie(COOKIE, path="/")
        return response

    app.router.add_get(LOGIN_PATH, form, name="dashboard-login")
    app.router.add_post(LOGIN_PATH, submit, name="dashboard-login-submit")
    app.router.add_post("/logout", logout, name="dashboard-logout")


def safe_next(value: str | None) -> str:
    """Where to go after logging in: a path of this server, else `/`.

    Browsers drop tabs and newlines from a `Location` before parsing it, so `/<TAB>/evil.example`
    would lead to `//evil.example`, another host; and aiohttp refuses to send a header holding
    CR or LF (the login answered nothing, with a traceback in the log). A value with any control
    character or a backslash is therefore refused as `//…` is."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    if any(c < " " or c == "\x7f" for c in value):
        return "/"
    return value


def _form(renderer: Renderer, target: str, error: str | None, *, status: int = 200) -> web.Response:
    return renderer.page("login.html", {"next": target, "error": error}, status=status)
