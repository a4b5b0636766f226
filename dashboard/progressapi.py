"""Training progress on the job page: its data route, and the charting library's file.

    GET /api/v1/jobs/{namespace}/{plural}/{name}/progress   {"progress": summary | null,
                                                             "charts": [{metric, scale, traces}]}
    GET /static/vendor/plotly.min.js                        plotly.js, from the installed
                                                             PyPI package `plotly`

The data route needs what the job page needs (`get` on the job kind, `dashboard.app.RULES`):
the job is read as the page reads it, then its curves from the controller's ConfigMap
(`Backend.progress_curves`); `dashboard.progressviews` shapes both.

The chart library: plotly.js as the PyPI package `plotly` ships it
(`plotly/package_data/plotly.min.js`), served from the installed package — nothing vendored
here, no CDN (`dashboard.plotlyfile`, which also says how it runs under the strict CSP). Without
the package the route is a 404 saying what to install, and the page shows the curves' absence
in words (`progress.js`).
"""

from __future__ import annotations

import logging

from aiohttp import web

from dashboard import progressviews
from dashboard.backend import UnknownJob
from dashboard.pages import BACKEND
from dashboard.plotlyfile import plotly_file
from kube import errors

__all__ = ["add_routes"]

log = logging.getLogger(__name__)

PLOTLY_PATH = progressviews.PLOTLY_PATH


def add_routes(app: web.Application) -> None:
    app.router.add_get(
        "/api/v1/jobs/{namespace}/{plural}/{name}/progress", progress, name="dashboard-job-progress"
    )
    app.router.add_get(PLOTLY_PATH, plotly, name="dashboard-plotly")


async def progress(request: web.Request) -> web.Response:
    namespace = request.match_info["namespace"]
    plural, name = request.match_info["plural"], request.match_info["name"]
    backend = request.app[BACKEND]
    try:
        job = await backend.job(namespace, plural, name)
        uid = str((job.get("metadata") or {}).get("uid") or "")
        document = await backend.progress_curves(uid) if uid else None
    except UnknownJob:
        return web.json_response({"error": f"{plural} is not a training job kind"}, status=404)
    except errors.NotFound:
        return web.json_response({"error": f"no {plural} {namespace}/{name}"}, status=404)
    except errors.APIError as exc:
        log.warning("progress of %s %s/%s: %s", plural, namespace, name, exc)
        return web.json_response({"error": f"reading the progress failed: {exc}"}, status=502)
    return web.json_response(
        {
            "progress": progressviews.summary(job.get("status")),
            "charts": progressviews.charts(document) if document else [],
        },
        headers={"Cache-Control": "no-store"},
    )


async def plotly(request: web.Request) -> web.StreamResponse:
    path = plotly_file()
    if path is None:
        return web.Response(
            status=404,
            text="plotly.js is not installed: pip install plotly (trainops depends on it)",
        )
    return web.FileResponse(path, headers={"Cache-Control": "public, max-age=86400"})
