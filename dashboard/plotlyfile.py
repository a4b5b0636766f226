"""Where the installed PyPI package `plotly` keeps plotly.js, and what its bundle needs to run
under the dashboard's strict Content-Security-Policy (`style-src 'self'`, no inline style).

plotly.js injects `<style>` elements in two ways, and skips each when the page already has an
element of the id it looks for (that is its own way of running under a strict CSP):
`plotly.js-style-global` with the class `no-inline-styles` (its rules for the mode bar and
hover labels: the dashboard hides the mode bar), and, when the bundle loads, a stylesheet of
the map library it bundles, under a 64-hex-digit id that changes with the version. The page
renders an empty, hidden element for each (`style_guard_ids`), found in the installed bundle,
so a newer plotly needs no change here; the browser test fails on any CSP violation.

Found without importing `plotly` (its Python side is large and unused here).
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

__all__ = ["GLOBAL_STYLE_ID", "plotly_file", "style_guard_ids"]

GLOBAL_STYLE_ID = "plotly.js-style-global"
_INJECTED = re.compile(
    rb'getElementById\("([0-9a-f]{64})"\)\)\{var [A-Za-z_$][\w$]*=document\.createElement\("style"\)'
)


@functools.cache
def plotly_file() -> Path | None:
    """plotly.min.js of the installed `plotly` package, or None."""
    try:
        spec = importlib.util.find_spec("plotly")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        path = Path(location) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    return None


@functools.cache
def style_guard_ids() -> tuple[str, ...]:
    """The ids of the stylesheets the installed bundle injects when it loads (none without it)."""
    path = plotly_file()
    if path is None:
        return ()
    try:
        data = path.read_bytes()
    except OSError:
        return ()
    return tuple(dict.fromkeys(m.decode() for m in _INJECTED.findall(data)))
