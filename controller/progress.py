"""Training progress, pure: what a report may say, what `status.progress` says, the curves.

A training process reports its step, epoch, their totals and named metrics to the controller's
progress endpoint (docs/PROGRESS.md; the shell is `controller/progress_server.py`). Everything
here is a function of the reports and of `now` passed in, table-tested in
`tests/controller/test_progress.py`:

- `parse_report`: a request body to a `Report`, or the list of `FieldError`s naming each bad
  field (finite numbers only, bounded names and counts);
- `token_for` / `token_ok`: the per-job credential, an HMAC-SHA256 of the job's uid under a key
  the controller holds (one job's token is worthless for another job, or for a new job of the
  same name);
- `JobProgress`: one job's reports — the latest per replica, the lead replica's (step, time)
  samples for the rate, and a bounded history per replica and metric;
- `JobProgress.summary(now)`: `status.progress` — percent, step rate, ETA computed from that
  rate only, the lead replica's latest metrics, `updatedAt`;
- `append_point`: the history's bound (`MAX_POINTS` per series, thinned by halves, so the whole
  run stays in view at a coarser grain as it grows);
- `Bucket`: the per-job rate limit, a token bucket on the caller's clock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from controller.status import fmt_time
from policies.durations import human_duration

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_METRICS",
    "MAX_POINTS",
    "MAX_REPLICAS_IN_HISTORY",
    "Bucket",
    "FieldError",
    "JobProgress",
    "Report",
    "append_point",
    "parse_report",
    "thin",
    "token_for",
    "token_ok",
]

MAX_BODY_BYTES = 8192
MAX_METRICS = 16
MAX_NAME_LENGTH = 64
MAX_COUNT = 10**12
"""Steps and epochs above this are refused (no run has that many; a float past 2^53 is not exact)."""
MAX_POINTS = 128
"""Points kept per (replica, metric) series of the history; more are thinned by halves."""
MAX_REPLICAS_IN_HISTORY = 8
"""Replicas whose curves are kept (the first to report); the latest metrics are kept for all."""
RATE_WINDOW_SECONDS = 300.0
"""The ETA's step rate is measured over the reports of the last five minutes."""
MAX_SAMPLES = 64

METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
REPLICA_NAME = re.compile(r"^[a-z][a-z0-9]*-[0-9]{1,6}$")
_FIELDS = {"replica", "step", "totalSteps", "epoch", "totalEpochs", "metrics"}
_TOKEN_CONTEXT = b"trainops-progress/v1\x00"


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Report:
    replica: str
    step: int | None = None
    total_steps: int | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def token_for(key: bytes, uid: str) -> str:
    """The job's progress token: base64url(HMAC-SHA256(key, context ‖ uid)), unpadded."""
    digest = hmac.new(key, _TOKEN_CONTEXT + uid.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_ok(key: bytes, uid: str, given: str) -> bool:
    return bool(uid) and hmac.compare_digest(token_for(key, uid).encode(), given.encode())


def _count(body: dict[str, Any], name: str, errors: list[FieldError]) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.append(FieldError(name, f"must be a whole number, not {type(value).__name__}"))
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        errors.append(FieldError(name, f"must be a whole number, not {value!r}"))
        return None
    if not 0 <= value <= MAX_COUNT:
        errors.append(FieldError(name, f"must be between 0 and {MAX_COUNT}, not {int(value)}"))
        return None
    return int(value)


def parse_report(body: Any) -> Report | list[FieldError]:
    """A decoded JSON body as a `Report`, or every problem found, each naming its field."""
    if not isinstance(body, dict):
        return [FieldError("(body)", "must be a JSON object")]
    errors: list[FieldError] = []
    for unknown in sorted(set(body) - _FIELDS):
        errors.append(FieldError(str(unknown)[:MAX_NAME_LENGTH], "unknown field"))
    replica = body.get("replica")
    if not isinstance(replica, str) or not REPLICA_NAME.match(replica):
        errors.append(FieldError("replica", "must be '<type>-<index>', e.g. 'worker-0'"))
    step = _count(body, "step", errors)
    total_steps = _count(body, "totalSteps", errors)
    epoch = _count(body, "epoch", errors)
    total_epochs = _count(body, "totalEpochs", errors)
    if total_steps == 0:
        errors.append(FieldError("totalSteps", "must be at least 1"))
    if total_epochs == 0:
        errors.append(FieldError("totalEpochs", "must be at least 1"))
    metrics: dict[str, float] = {}
    raw = body.get("metrics")
    if raw is not None and not isinstance(raw, dict):
        errors.append(FieldError("metrics", "must be an object of name: number"))
    elif raw:
        if len(raw) > MAX_METRICS:
            errors.append(FieldError("metrics", f"at most {MAX_METRICS} metrics, not {len(raw)}"))
        for name, value in list(raw.items())[:MAX_METRICS]:
            where = f"metrics.{str(name)[:MAX_NAME_LENGTH]}"
            if len(name) > MAX_NAME_LENGTH or not METRIC_NAME.match(name):
                errors.append(
                    FieldError(
                        where,
                        f"a name is a letter or _ then letters, digits, _ . : / - "
                        f"(at most {MAX_NAME_LENGTH})",
                    )
                )
            elif isinstance(value, bool) or not isinstance(value, int | float):
                errors.append(FieldError(where, f"must be a number, not {type(value).__name__}"))
            elif not math.isfinite(value) or abs(value) > 1e300:
                errors.append(FieldError(where, f"must be a finite number, not {value!r}"))
            else:
                metrics[name] = float(value)
    if step is None and epoch is None and not metrics and not errors:
        errors.append(FieldError("(body)", "says nothing: give step, epoch or metrics"))
    if errors:
        return errors
    assert isinstance(replica, str)
    return Report(replica, step, total_steps, epoch, total_epochs, metrics)


def append_point(series: list[list[float]], x: float, y: float, limit: int = MAX_POINTS) -> None:
    """Add (x, y) to a series ordered by x, in place. The same x replaces the last point; an x
    below the last (a restart from a checkpoint) drops the points past it first. Past `limit`
    points every other one is dropped, the newest kept: a run of any length stays in view with
    at most `limit` points, coarser the further back."""
    while series and series[-1][0] > x:
        series.pop()
    if series and series[-1][0] == x:
        series[-1] = [x, y]
    else:
        series.append([x, y])
    series[:] = thin(series, limit)


def thin(series: list[list[float]], limit: int = MAX_POINTS) -> list[list[float]]:
    """Every other point, the newest kept, until at most `limit` are left."""
    while len(series) > limit:
        series = series[::-1][::2][::-1]
    return series


def _round(value: float) -> float:
    return float(f"{value:.4g}")


@dataclass
class Bucket:
    """`rate` requests a second on average, `burst` at once; `allow(now)` takes one or says no."""

    rate: float
    burst: float
    tokens: float = -1.0
    last: float | None = None

    def allow(self, now: float) -> bool:
        if self.last is None:
            self.tokens = self.burst
        else:
            self.tokens = min(self.burst, self.tokens + max(0.0, now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


@dataclass
class JobProgress:
    """One job's reports (the shell keeps one per job uid, while the job exists)."""

    latest: dict[str, Report] = field(default_factory=dict)
    reported: dict[str, datetime] = field(default_factory=dict)
    samples: list[tuple[datetime, int]] = field(default_factory=list)
    history: dict[str, dict[str, list[list[float]]]] = field(default_factory=dict)
    master: str | None = None
    """The replica whose metrics the status shows when it reports (chief-0, else worker-0 or master-0)."""

    def record(self, report: Report, now: datetime) -> None:
        self.latest[report.replica] = report
        self.reported[report.replica] = now
        lead = self.lead_step()
        if lead is not None:
            if self.samples and lead < self.samples[-1][1]:
                self.samples.clear()  # restarted from a checkpoint: the old rate says nothing
            self.samples.append((now, lead))
            cutoff = now - timedelta(seconds=RATE_WINDOW_SECONDS)
            # Keep the newest sample older than the window: the rate then spans the window.
            while len(self.samples) > 2 and self.samples[1][0] <= cutoff:
                self.samples.pop(0)
            del self.samples[: max(0, len(self.samples) - MAX_SAMPLES)]
        x = report.step if report.step is not None else report.epoch
        if x is None or not report.metrics:
            return
        if report.replica not in self.history and len(self.history) >= MAX_REPLICAS_IN_HISTORY:
            return
        curves = self.history.setdefault(report.replica, {})
        for name, value in report.metrics.items():
            append_point(curves.setdefault(name, []), float(x), value)

    def lead_step(self) -> int | None:
        steps = [r.step for r in self.latest.values() if r.step is not None]
        return max(steps) if steps else None

    def _lead(self) -> Report:
        if self.master is not None and self.master in self.latest:
            return self.latest[self.master]
        return max(
            self.latest.values(),
            key=lambda r: (r.step or 0, r.epoch or 0, -_index(r.replica), r.replica),
        )

    def steps_per_second(self) -> float | None:
        if len(self.samples) < 2:
            return None
        (t0, s0), (t1, s1) = self.samples[0], self.samples[-1]
        seconds = (t1 - t0).total_seconds()
        if seconds <= 0 or s1 <= s0:
            return None
        return (s1 - s0) / seconds

    def summary(self, now: datetime) -> dict[str, Any]:
        """`status.progress` as of `now` ({} before any report)."""
        if not self.latest:
            return {}
        lead = self._lead()
        out: dict[str, Any] = {}
        total_steps = max((r.total_steps or 0 for r in self.latest.values()), default=0) or None
        total_epochs = max((r.total_epochs or 0 for r in self.latest.values()), default=0) or None
        step = self.lead_step()
        epoch = max((r.epoch for r in self.latest.values() if r.epoch is not None), default=None)
        for key, value in (
            ("step", step),
            ("totalSteps", total_steps),
            ("epoch", epoch),
            ("totalEpochs", total_epochs),
        ):
            if value is not None:
                out[key] = value
        percent: float | None = None
        if step is not None and total_steps:
            percent = step / total_steps
        elif epoch is not None and total_epochs:
            percent = epoch / total_epochs
        if percent is not None:
            out["percent"] = min(100, int(percent * 100))
        rate = self.steps_per_second()
        if rate is not None:
            out["stepsPerSecond"] = _round(rate)
            if step is not None and total_steps and step < total_steps:
                last = self.samples[-1][0]
                done_at = last + timedelta(seconds=(total_steps - step) / rate)
                out["eta"] = human_duration(max(0.0, (done_at - now).total_seconds()))
                out["etaTime"] = fmt_time(done_at)
        if step is not None and total_steps and step >= total_steps:
            out["eta"] = "0s"
        if lead.metrics:
            out["metrics"] = {k: _round(v) for k, v in sorted(lead.metrics.items())}
            out["metricsFrom"] = lead.replica
        out["updatedAt"] = fmt_time(max(self.reported.values()))
        return out

    def curves(self) -> dict[str, Any]:
        """The history as stored (the ConfigMap's `progress.json`)."""
        return {"version": 1, "x": "step", "replicas": self.history}


def _index(replica: str) -> int:
    try:
        return int(replica.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return 0
