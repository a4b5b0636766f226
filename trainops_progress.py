"""Report training progress to the trainops controller: one file, the standard library only.

Copy this file into a training image, mount it from a ConfigMap (examples/training), or
`pip install trainops` (it ships as the top-level module `trainops_progress`). It reads the
environment the controller gives every replica pod (docs/PROGRESS.md):

    TRAINOPS_PROGRESS_URL      https://…/v1/progress/<namespace>/<plural>/<job>
    TRAINOPS_PROGRESS_TOKEN    this job's token (Authorization: Bearer …)
    TRAINOPS_PROGRESS_CA       the PEM of the CA that signed the endpoint's certificate
    TRAINOPS_PROGRESS_REPLICA  this replica, e.g. worker-0

Without them (a run outside trainops) every call does nothing. Use:

    from trainops_progress import report
    report(step=120, total_steps=1000, epoch=2, total_epochs=10, metrics={"loss": 0.42})

    model.fit(..., callbacks=[trainops_progress.keras_callback()])
    xgboost.train(..., num_boost_round=N, callbacks=[trainops_progress.xgboost_callback(N)])

Promises to the training loop: `report` never raises; each call takes at most about
`timeout` seconds (2 s by default; a 503 from a standby controller is retried within that
budget); calls closer together than `min_interval` (1 s) are coalesced — the latest values are
kept and sent by a later call or by `flush()` (the callbacks flush at the end of training); a
non-finite metric is dropped. A report that could not be sent for now (over the job's rate:
429, no leader, no connection) stays kept back, so the latest values still arrive; after a 429
nothing is sent before its `Retry-After`, and `flush()` waits for it within its budget (the
last report of a run is the one that says it is complete). The first failure is logged once
at WARNING (a refusal with the server's message); later ones are dropped silently, and a
refusal that cannot pass later (a wrong token: 401, a bad report: 422) turns reporting off for
the process.

Nothing here imports TensorFlow, Keras or XGBoost at import time: `keras_callback()` and
`xgboost_callback()` subclass the installed library's callback base when called (XGBoost
checks `isinstance(cb, TrainingCallback)`; Keras 2 calls private methods of its base class).
"""

from __future__ import annotations

import json
import logging
import math
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

__all__ = ["Reporter", "flush", "keras_callback", "report", "xgboost_callback"]

log = logging.getLogger("trainops_progress")

_PERMANENT = (400, 401, 404, 413, 422)
_MAX_RETRY_AFTER = 60.0


class Reporter:
    """One process's reporter (`report()` uses a shared one built from the environment)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        ca: str | None = None,
        replica: str | None = None,
        *,
        timeout: float = 2.0,
        min_interval: float = 1.0,
    ) -> None:
        env = os.environ
        self.url = url if url is not None else env.get("TRAINOPS_PROGRESS_URL", "")
        self.token = token if token is not None else env.get("TRAINOPS_PROGRESS_TOKEN", "")
        self.ca = ca if ca is not None else env.get("TRAINOPS_PROGRESS_CA", "")
        self.replica = replica or env.get("TRAINOPS_PROGRESS_REPLICA") or _replica_from_env()
        self.timeout = timeout
        self.min_interval = min_interval
        self.enabled = bool(self.url and self.token)
        self.sent = 0
        self._context: ssl.SSLContext | None = None
        self._pending: dict[str, Any] | None = None
        self._last = -math.inf
        self._not_before = -math.inf  # a 429's Retry-After
        self._warned = False

    def report(
        self,
        step: int | None = None,
        total_steps: int | None = None,
        epoch: int | None = None,
        total_epochs: int | None = None,
        metrics: dict[str, Any] | None = None,
    ) -> bool:
        """Send (or keep for the next call) one report; True if one was sent and accepted."""
        if not self.enabled:
            return False
        try:
            body = _body(self.replica, step, total_steps, epoch, total_epochs, metrics)
            self._pending = body
            now = time.monotonic()
            if now - self._last < self.min_interval or now < self._not_before:
                return False
            return self._flush(wait=False)
        except Exception as exc:  # never into the training loop
            self._fail(f"progress report failed: {exc!r}")
            return False

    def flush(self) -> bool:
        """Send the report kept back, if any; over the job's rate, wait for the server's
        `Retry-After` and try again, within `timeout`."""
        return self._flush(wait=True)

    def _flush(self, wait: bool) -> bool:
        if not self.enabled or self._pending is None:
            return False
        if not wait and time.monotonic() < self._not_before:
            return False  # kept back until the Retry-After has passed
        body, self._pending = self._pending, None
        self._last = time.monotonic()
        try:
            sent = self._send(json.dumps(body).encode(), wait)
        except Exception as exc:
            self._fail(f"progress report failed: {exc!r}")
            sent = False
        if not sent and self.enabled and self._pending is None:
            self._pending = body  # not sent for now: the latest values, for a later call
        return sent

    def _send(self, data: bytes, wait: bool) -> bool:
        deadline = time.monotonic() + self.timeout
        if wait and self._not_before > time.monotonic():
            if self._not_before >= deadline:
                self._fail("progress report over the job's rate: not sent within the timeout")
                return False
            time.sleep(self._not_before - time.monotonic())
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail("progress report timed out")
                return False
            request = urllib.request.Request(
                self.url,
                data=data,
                method="POST",
                headers={
                    "Authorization": f"Bearer {self.token}",
                    "Content-Type": "application/json",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=left, context=self._ssl()) as answer:
                    answer.read(4096)
                self.sent += 1
                return True
            except urllib.error.HTTPError as exc:
                message = _message(exc)
                if exc.code == 503 and deadline - time.monotonic() > 0.2:
                    time.sleep(0.1)  # a standby controller: another connection may reach the leader
                    continue
                if exc.code == 429:
                    pause = _retry_after(exc)
                    self._not_before = time.monotonic() + pause
                    if wait and deadline - time.monotonic() > pause:
                        time.sleep(pause)
                        continue
                if exc.code in _PERMANENT:
                    self.enabled = False
                    self._warned = False  # always say why reporting stops
                self._fail(f"progress report refused ({exc.code}): {message}")
                return False
            except (urllib.error.URLError, OSError) as exc:
                self._fail(f"progress report failed: {getattr(exc, 'reason', exc)}")
                return False

    def _ssl(self) -> ssl.SSLContext:
        if self._context is None:
            context = ssl.create_default_context()
            if self.ca.strip().startswith("-----BEGIN"):
                context = ssl.create_default_context(cadata=self.ca)
            elif self.ca:
                context = ssl.create_default_context(cafile=self.ca)
            self._context = context
        return self._context

    def _fail(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            suffix = "" if self.enabled else "; reporting is off"
            log.warning("%s (further failures are not logged)%s", message, suffix)


def _replica_from_env() -> str:
    task = os.environ.get("TF_CONFIG")
    if task:
        try:
            t = json.loads(task)["task"]
            return f"{t['type']}-{int(t['index'])}"
        except (ValueError, KeyError, TypeError):
            pass
    rank = os.environ.get("RANK")
    if rank and rank.isdigit():
        return "master-0" if rank == "0" else f"worker-{int(rank) - 1}"
    return "worker-0"


def _number(value: Any) -> float | None:
    try:
        number = float(value)  # numpy and tensor scalars too
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _body(
    replica: str,
    step: Any,
    total_steps: Any,
    epoch: Any,
    total_epochs: Any,
    metrics: dict[str, Any] | None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"replica": replica}
    for key, value in (
        ("step", step),
        ("totalSteps", total_steps),
        ("epoch", epoch),
        ("totalEpochs", total_epochs),
    ):
        if value is not None:
            body[key] = int(value)
    kept: dict[str, float] = {}
    for name, value in (metrics or {}).items():
        number = _number(value)
        if number is not None and len(kept) < 16:
            kept[str(name)[:64]] = number
    if kept:
        body["metrics"] = kept
    return body


def _retry_after(exc: urllib.error.HTTPError) -> float:
    """The seconds a 429 asks to wait (`Retry-After`, in seconds; 1 when absent or a date)."""
    try:
        value = float(exc.headers.get("Retry-After") or 1.0)
    except (TypeError, ValueError):
        return 1.0
    return min(max(value, 0.0), _MAX_RETRY_AFTER) if math.isfinite(value) else 1.0


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read(4096) or b"{}").get("error") or exc.reason)
    except (ValueError, OSError):
        return str(exc.reason)


_shared: Reporter | None = None


def _reporter() -> Reporter:
    global _shared
    if _shared is None:
        _shared = Reporter()
    return _shared


def report(
    step: int | None = None,
    total_steps: int | None = None,
    epoch: int | None = None,
    total_epochs: int | None = None,
    metrics: dict[str, Any] | None = None,
) -> bool:
    """Report this replica's progress (see the module's docstring); never raises."""
    try:
        return _reporter().report(step, total_steps, epoch, total_epochs, metrics)
    except Exception:
        return False


def flush() -> bool:
    """Send what `report` kept back (call it once training is done)."""
    try:
        return _reporter().flush()
    except Exception:
        return False


def keras_callback(reporter: Reporter | None = None) -> Any:
    """A Keras callback reporting each batch's step (coalesced) and each epoch's logs.

    Total steps are `epochs × steps` from `model.fit`'s params when Keras knows them."""
    try:
        import keras

        base: type = keras.callbacks.Callback
    except ImportError:
        from tensorflow import keras as tf_keras  # Keras 2 inside TensorFlow

        base = tf_keras.callbacks.Callback

    class _Keras(base):
        def __init__(self) -> None:
            super().__init__()
            self.reporter = reporter or _reporter()
            self.step = 0
            self.epoch = 0

        def _totals(self) -> tuple[int | None, int | None]:
            params = getattr(self, "params", None) or {}
            epochs, steps = params.get("epochs"), params.get("steps")
            return (epochs * steps if epochs and steps else None), epochs

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            self.step += 1
            total_steps, epochs = self._totals()
            self.reporter.report(self.step, total_steps, self.epoch, epochs, logs)

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.epoch = epoch + 1
            total_steps, epochs = self._totals()
            self.reporter.report(self.step, total_steps, self.epoch, epochs, logs)
            self.reporter._flush(wait=False)  # the epoch's logs now, unless over the rate

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            self.reporter.flush()

    return _Keras()


def xgboost_callback(total_rounds: int | None = None, reporter: Reporter | None = None) -> Any:
    """An XGBoost `TrainingCallback` reporting each boosting round and the last value of each
    evaluation metric (`train-logloss`, `eval-auc`, …). Pass `num_boost_round` as
    `total_rounds` for the percentage and ETA."""
    import xgboost

    class _XGBoost(xgboost.callback.TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.reporter = reporter or _reporter()

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            metrics = {}
            for data, entries in (evals_log or {}).items():
                for metric, values in entries.items():
                    if values:
                        last = values[-1]
                        metrics[f"{data}-{metric}"] = last[0] if isinstance(last, tuple) else last
            self.reporter.report(epoch + 1, total_rounds, metrics=metrics)
            return False

        def after_training(self, model: Any) -> Any:
            self.reporter.flush()
            return model

    return _XGBoost()
