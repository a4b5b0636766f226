"""HTML rendering: the Jinja2 environment (autoescaping always on) and the response headers.

Why a module of its own: what makes the pages safe is decided here once — every value from
Git or the cluster is escaped by Jinja (no template marks such data `|safe`), and every
response carries a Content-Security-Policy that allows only our own script and style files,
so even a value that slipped through could not run. Handlers call `page(...)` and never build
HTML themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2
from aiohttp import web

__all__ = ["CSP", "SECURITY_HEADERS", "Renderer", "add_security_headers"]

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class Renderer:
    """Renders `templates/<name>.html` with `static(filename)` (a versioned asset URL)."""

    def __init__(self, static_url: Callable[[str], str]) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("dashboard", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals["static"] = static_url

    def render(self, template: str, context: Mapping[str, Any]) -> str:
        return self.env.get_template(template).render(context)

    def page(self, template: str, context: Mapping[str, Any], *, status: int = 200) -> web.Response:
        return web.Response(
            text=self.render(template, context),
            status=status,
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-store"},
        )


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """`on_response_prepare`: the CSP, nosniff and no-referrer on every answer of the app (the
    API's JSON too: harmless there, and a log or JSON opened in a tab cannot be sniffed into a
    page)."""
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
