"""trainops_progress.py, the reporter a training process imports, against a small local server:
what it sends, that it coalesces, retries a standby's 503, stops after a refusal, never raises,
and stays within its time budget; and that importing it imports no ML library."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import trainops_progress
from trainops_progress import Reporter

ROOT = Path(__file__).resolve().parents[2]


class Server:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answers: list[tuple[int, dict[str, Any]]] = []
        self.answer_headers: dict[str, str] = {}
        self.times: list[float] = []
        self.delay = 0.0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                server.bodies.append(json.loads(self.rfile.read(length)))
                server.headers.append(dict(self.headers))
                server.times.append(time.monotonic())
                time.sleep(server.delay)
                code, body = server.answers.pop(0) if server.answers else (202, {"accepted": True})
                data = json.dumps(body).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if code != 202:
                        for name, value in server.answer_headers.items():
                            self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the reporter gave up waiting (its timeout): what the test wants

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/progress/ns/tensorflowtrainingjobs/j"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    try:
        yield running
    finally:
        running.close()


def reporter(server: Server, **kwargs: Any) -> Reporter:
    return Reporter(server.url, "tok", "", "worker-1", **{"min_interval": 0.0, **kwargs})


def test_a_report_says_what_it_was_given_with_the_token(server: Server) -> None:
    r = reporter(server)
    metrics = {"loss": 0.5, "acc": 1, "nan": float("nan"), "text": "x"}
    assert r.report(step=3, total_steps=10, epoch=1, total_epochs=2, metrics=metrics) is True
    assert server.bodies == [
        {
            "replica": "worker-1",
            "step": 3,
            "totalSteps": 10,
            "epoch": 1,
            "totalEpochs": 2,
            "metrics": {"loss": 0.5, "acc": 1.0},  # not a finite number: dropped
        }
    ]
    assert server.headers[0]["Authorization"] == "Bearer tok"


def test_calls_closer_than_min_interval_are_coalesced_and_flush_sends_the_latest(
    server: Server,
) -> None:
    r = reporter(server, min_interval=60.0)
    assert r.report(step=1) is True
    assert r.report(step=2) is False
    assert r.report(step=3) is False
    assert [b["step"] for b in server.bodies] == [1]
    assert r.flush() is True
    assert [b["step"] for b in server.bodies] == [1, 3]
    assert r.flush() is False  # nothing kept back


def test_a_standbys_503_is_tried_again_within_the_budget(server: Server) -> None:
    server.answers = [(503, {"error": "does not lead"}), (503, {"error": "does not lead"})]
    assert reporter(server).report(step=1) is True
    assert len(server.bodies) == 3


def test_over_the_rate_the_report_is_kept_until_retry_after_and_flush_waits_for_it(
    server: Server,
) -> None:
    """The last report of a run says it is complete: a 429 must not lose it (the journey test
    saw a job end Succeeded at 99 %, its workers' last reports refused for the job's rate)."""
    server.answers = [(429, {"error": "more than 5 reports a second"})]
    server.answer_headers = {"Retry-After": "1"}
    r = reporter(server)
    assert r.report(step=1, total_steps=2) is False
    assert r.report(step=2, total_steps=2) is False  # before the Retry-After: kept, not sent
    assert len(server.bodies) == 1
    assert r.flush() is True  # waits out the Retry-After, within its 2 s budget
    assert [b["step"] for b in server.bodies] == [1, 2]
    assert server.times[1] - server.times[0] >= 0.9
    assert r.flush() is False  # nothing kept back


def test_flush_tries_a_429_again_within_its_budget_and_no_longer(server: Server) -> None:
    server.answers = [(429, {"error": "over the rate"})] * 2
    server.answer_headers = {"Retry-After": "0.2"}
    assert reporter(server).flush() is False  # nothing to send
    r = reporter(server, min_interval=60.0)
    r.report(step=1)  # 429: kept
    assert r.flush() is True
    assert [b["step"] for b in server.bodies] == [1, 1, 1]
    server.answers = [(429, {"error": "over the rate"})]
    server.answer_headers = {"Retry-After": "5"}
    r = reporter(server, min_interval=60.0, timeout=0.5)
    started = time.monotonic()
    r.report(step=7)
    assert r.flush() is False  # the Retry-After is past its budget: not waited for
    assert time.monotonic() - started < 1.5
    assert len(server.bodies) == 4


def test_a_report_a_transient_failure_kept_from_the_server_is_sent_later(
    server: Server,
) -> None:
    server.answers = [(500, {"error": "boom"})]
    r = reporter(server, min_interval=60.0)
    assert r.report(step=5, metrics={"loss": 0.5}) is False
    assert r.flush() is True
    assert (
        server.bodies[0]
        == server.bodies[1]
        == {
            "replica": "worker-1",
            "step": 5,
            "metrics": {"loss": 0.5},
        }
    )


def test_a_refusal_is_logged_once_and_turns_reporting_off(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server.answers = [(401, {"error": "the token is not valid for tensorflowtrainingjobs ns/j"})]
    r = reporter(server)
    with caplog.at_level(logging.WARNING, logger="trainops_progress"):
        assert r.report(step=1) is False
        assert r.report(step=2) is False
    assert len(server.bodies) == 1
    (record,) = caplog.records
    assert "refused (401): the token is not valid for tensorflowtrainingjobs ns/j" in record.message
    assert "reporting is off" in record.message


def test_failures_never_raise_and_a_slow_server_costs_at_most_the_timeout(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    server.delay = 3.0
    r = reporter(server, timeout=0.3)
    with caplog.at_level(logging.WARNING, logger="trainops_progress"):
        started = time.monotonic()
        assert r.report(step=1) is False
        assert time.monotonic() - started < 2.0
        gone = Reporter("https://127.0.0.1:9/none", "tok", "", "worker-0", min_interval=0.0)
        assert gone.report(step=1) is False
        assert gone.report(step=2) is False
    assert len([rec for rec in caplog.records if rec.name == "trainops_progress"]) == 2  # once each
    assert r.enabled and gone.enabled  # transient: it keeps trying


def test_without_the_env_nothing_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRAINOPS_PROGRESS_URL", "TRAINOPS_PROGRESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(trainops_progress, "_shared", None)
    assert trainops_progress.report(step=1, metrics={"loss": 1.0}) is False
    assert trainops_progress.flush() is False


@pytest.mark.parametrize(
    ("env", "replica"),
    [
        ({"TF_CONFIG": json.dumps({"task": {"type": "chief", "index": 0}})}, "chief-0"),
        ({"RANK": "0"}, "master-0"),
        ({"RANK": "3"}, "worker-2"),
        ({}, "worker-0"),
    ],
)
def test_the_replica_falls_back_to_the_training_env(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], replica: str
) -> None:
    for name in ("TRAINOPS_PROGRESS_REPLICA", "TF_CONFIG", "RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Reporter("u", "t").replica == replica


def test_importing_it_imports_no_ml_library_and_nothing_of_trainops() -> None:
    code = (
        "import sys, trainops_progress; "
        "bad = {'tensorflow', 'keras', 'xgboost', 'numpy', 'controller', 'kube'} & set(sys.modules); "
        "print(sorted(bad))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); {code}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_callbacks_subclass_the_installed_librarys_base_and_report(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With stand-ins for the two libraries' base classes (neither is installed here; the
    real-training tier runs the XGBoost callback for real, tests/training)."""
    import types

    class TrainingCallback:
        pass

    class Callback:
        def __init__(self) -> None:
            self.params: dict[str, Any] = {}

    xgboost = types.ModuleType("xgboost")
    xgboost.callback = types.SimpleNamespace(TrainingCallback=TrainingCallback)  # type: ignore[attr-defined]
    keras = types.ModuleType("keras")
    keras.callbacks = types.SimpleNamespace(Callback=Callback)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "xgboost", xgboost)
    monkeypatch.setitem(sys.modules, "keras", keras)

    xgb = trainops_progress.xgboost_callback(10, reporter=reporter(server))
    assert TrainingCallback in type(xgb).__mro__
    assert xgb.after_iteration(None, 2, {"eval": {"logloss": [0.6, 0.5]}}) is False
    assert server.bodies[-1] == {
        "replica": "worker-1",
        "step": 3,
        "totalSteps": 10,
        "metrics": {"eval-logloss": 0.5},
    }
    cb = trainops_progress.keras_callback(reporter=reporter(server))
    assert Callback in type(cb).__mro__
    cb.params = {"epochs": 2, "steps": 5}
    cb.on_train_batch_end(0, {"loss": 1.5})
    cb.on_epoch_end(0, {"loss": 1.25, "accuracy": 0.5})
    assert server.bodies[-2:] == [
        {
            "replica": "worker-1",
            "step": 1,
            "totalSteps": 10,
            "epoch": 0,
            "totalEpochs": 2,
            "metrics": {"loss": 1.5},
        },
        {
            "replica": "worker-1",
            "step": 1,
            "totalSteps": 10,
            "epoch": 1,
            "totalEpochs": 2,
            "metrics": {"loss": 1.25, "accuracy": 0.5},
        },
    ]
