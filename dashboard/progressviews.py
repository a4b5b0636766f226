"""Training progress as the dashboard shows it (pure): a job's summary line, and its curves as
chart traces — one chart per metric, one trace per replica where the replicas differ.

Inputs are what the controller writes (docs/PROGRESS.md): `status.progress` on the job, and
the curves document `progress.json` of the ConfigMap `trainops-progress-<job uid>` in the
controller's namespace: `{"version": 1, "x": "step", "replicas": {replica: {metric:
[[x, y], …]}}}`. Anything malformed is skipped, never an error: the page must render.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MAX_POINTS", "PLOTLY_PATH", "charts", "progress_by_key", "summary"]

PLOTLY_PATH = "/static/vendor/plotly.min.js"
"""Where the dashboard serves plotly.js from the installed `plotly` package (progressapi)."""

MAX_POINTS = 512
"""Points drawn per trace at most (the controller keeps 128; a hand-made document may not)."""


def summary(status: Any) -> dict[str, Any] | None:
    """`{percent, text, eta, metrics: [(name, value)], updated}` from `status.progress`."""
    progress = status.get("progress") if isinstance(status, Mapping) else None
    if not isinstance(progress, Mapping) or not progress:
        return None
    percent = progress.get("percent")
    percent = percent if isinstance(percent, int) and 0 <= percent <= 100 else None
    parts: list[str] = []
    if percent is not None:
        parts.append(f"{percent}%")
    step, total = progress.get("step"), progress.get("totalSteps")
    if isinstance(step, int):
        parts.append(f"step {step}/{total}" if isinstance(total, int) else f"step {step}")
    epoch, epochs = progress.get("epoch"), progress.get("totalEpochs")
    if isinstance(epoch, int):
        parts.append(f"epoch {epoch}/{epochs}" if isinstance(epochs, int) else f"epoch {epoch}")
    eta = progress.get("eta") if isinstance(progress.get("eta"), str) else None
    if eta:
        parts.append(f"ETA {eta}")
    metrics = progress.get("metrics")
    shown = [
        (str(k), _fmt(v))
        for k, v in (metrics.items() if isinstance(metrics, Mapping) else [])
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    return {
        "percent": percent,
        "eta": eta,
        "text": " · ".join(parts),
        "metrics": shown,
        "from": str(progress.get("metricsFrom") or ""),
        "updated": str(progress.get("updatedAt") or ""),
    }


def progress_by_key(jobs: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`Kind/namespace/name` → `summary` for the jobs that report progress."""
    out: dict[str, dict[str, Any]] = {}
    for job in jobs:
        meta = job.get("metadata") if isinstance(job.get("metadata"), Mapping) else {}
        assert isinstance(meta, Mapping)
        shown = summary(job.get("status"))
        if shown is not None:
            out[f"{job.get('kind')}/{meta.get('namespace')}/{meta.get('name')}"] = shown
    return out


def charts(document: Any) -> list[dict[str, Any]]:
    """`[{metric, scale, traces: [{name, x, y}]}]`, metrics in name order. Replicas whose
    series of a metric are equal share one trace (`worker-0, worker-1`): replicas in sync
    report the same loss, and two lines on top of each other would hide one. `scale` is the
    y axis's (`y_scale`)."""
    if isinstance(document, str):
        try:
            document = json.loads(document)
        except ValueError:
            return []
    replicas = document.get("replicas") if isinstance(document, Mapping) else None
    if not isinstance(replicas, Mapping):
        return []
    by_metric: dict[str, list[tuple[str, tuple[tuple[float, float], ...]]]] = {}
    for replica in sorted(replicas, key=_replica_order):
        curves = replicas[replica]
        if not isinstance(curves, Mapping):
            continue
        for metric, points in curves.items():
            series = _points(points)
            if series:
                by_metric.setdefault(str(metric), []).append((str(replica), series))
    out = []
    for metric in sorted(by_metric):
        groups: dict[tuple[tuple[float, float], ...], list[str]] = {}
        for replica, series in by_metric[metric]:
            groups.setdefault(series, []).append(replica)
        traces = [
            {
                "name": ", ".join(names),
                "x": [x for x, _ in series],
                "y": [y for _, y in series],
            }
            for series, names in groups.items()
        ]
        ys = [y for _, series in by_metric[metric] for _, y in series]
        out.append({"metric": metric, "scale": y_scale(ys), "traces": traces})
    return out


LOG_SPAN = 100.0
"""A metric whose positive values span this factor or more is drawn on a log axis."""


def y_scale(values: list[float]) -> str:
    """`log` when every value is positive and the largest is at least `LOG_SPAN` times the
    smallest, else `linear`: a loss that falls from 24 to 0.01 on a linear axis is one spike
    then a flat line at zero, the whole of training invisible."""
    if not values or min(values) <= 0:
        return "linear"
    return "log" if max(values) / min(values) >= LOG_SPAN else "linear"


def _points(points: Any) -> tuple[tuple[float, float], ...]:
    if not isinstance(points, list):
        return ()
    kept = []
    for p in points[-MAX_POINTS:]:
        if (
            isinstance(p, list)
            and len(p) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in p)
            and all(math.isfinite(v) for v in p)
        ):
            kept.append((float(p[0]), float(p[1])))
    return tuple(kept)


def _replica_order(name: str) -> tuple[str, int]:
    kind, _, index = str(name).rpartition("-")
    return (kind, int(index)) if index.isdigit() else (str(name), 0)


def _fmt(value: float) -> str:
    return f"{value:.4g}"
