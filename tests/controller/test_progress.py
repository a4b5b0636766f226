"""The pure parts of training progress (controller/progress.py): what a report may say, the
status summary with its ETA from the step rate, the bounded curves, the rate limit, the token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.progress import (
    MAX_METRICS,
    MAX_POINTS,
    MAX_REPLICAS_IN_HISTORY,
    Bucket,
    FieldError,
    JobProgress,
    Report,
    append_point,
    parse_report,
    thin,
    token_for,
    token_ok,
)

T0 = datetime(2026, 12, 5, 1, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (
            {"replica": "worker-0", "step": 10, "totalSteps": 100, "metrics": {"loss": 0.5}},
            Report("worker-0", 10, 100, None, None, {"loss": 0.5}),
        ),
        ({"replica": "chief-0", "epoch": 2, "totalEpochs": 5}, Report("chief-0", None, None, 2, 5)),
        ({"replica": "master-0", "step": 3.0}, Report("master-0", 3)),
        (
            {"replica": "worker-12", "metrics": {"val/acc": 1, "train.loss_2": -0.25}},
            Report("worker-12", metrics={"val/acc": 1.0, "train.loss_2": -0.25}),
        ),
    ],
)
def test_a_good_report_is_parsed(body: dict[str, Any], want: Report) -> None:
    assert parse_report(body) == want


NAN = float("nan")


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ([], ["(body): must be a JSON object"]),
        ({"replica": "worker-0"}, ["(body): says nothing: give step, epoch or metrics"]),
        ({"step": 1}, ["replica: must be '<type>-<index>', e.g. 'worker-0'"]),
        ({"replica": "../x", "step": 1}, ["replica: must be '<type>-<index>', e.g. 'worker-0'"]),
        (
            {"replica": "worker-0", "step": -1},
            ["step: must be between 0 and 1000000000000, not -1"],
        ),
        ({"replica": "worker-0", "step": 1.5}, ["step: must be a whole number, not 1.5"]),
        ({"replica": "worker-0", "step": True}, ["step: must be a whole number, not bool"]),
        ({"replica": "worker-0", "step": "3"}, ["step: must be a whole number, not str"]),
        ({"replica": "worker-0", "step": 1, "totalSteps": 0}, ["totalSteps: must be at least 1"]),
        (
            {"replica": "worker-0", "epoch": 1, "totalEpochs": 0},
            ["totalEpochs: must be at least 1"],
        ),
        (
            {"replica": "worker-0", "metrics": {"loss": NAN}},
            ["metrics.loss: must be a finite number, not nan"],
        ),
        (
            {"replica": "worker-0", "metrics": {"loss": float("inf")}},
            ["metrics.loss: must be a finite number, not inf"],
        ),
        (
            {"replica": "worker-0", "metrics": {"loss": "low"}},
            ["metrics.loss: must be a number, not str"],
        ),
        ({"replica": "worker-0", "metrics": [1]}, ["metrics: must be an object of name: number"]),
        (
            {"replica": "worker-0", "metrics": {"1st": 1}},
            ["metrics.1st: a name is a letter or _ then letters, digits, _ . : / - (at most 64)"],
        ),
        (
            {"replica": "worker-0", "metrics": {"a" * 65: 1}},
            [
                f"metrics.{'a' * 64}: a name is a letter or _ then letters, digits, _ . : / - (at most 64)"
            ],
        ),
        (
            {"replica": "worker-0", "metrics": {f"m{i}": i for i in range(MAX_METRICS + 1)}},
            [f"metrics: at most {MAX_METRICS} metrics, not {MAX_METRICS + 1}"],
        ),
        ({"replica": "worker-0", "step": 1, "loss": 2}, ["loss: unknown field"]),
    ],
)
def test_a_bad_report_names_each_field(body: Any, errors: list[str]) -> None:
    got = parse_report(body)
    assert isinstance(got, list)
    assert all(isinstance(e, FieldError) for e in got)
    assert [str(e) for e in got] == errors


# -- the summary --------------------------------------------------------------------------------


def test_eta_comes_from_the_step_rate_and_now() -> None:
    p = JobProgress(master="worker-0")
    p.record(Report("worker-0", 100, 1000, metrics={"loss": 2.0}), at(0))
    p.record(Report("worker-0", 300, 1000, metrics={"loss": 1.0}), at(100))  # 2 steps/s
    assert p.summary(at(100)) == {
        "step": 300,
        "totalSteps": 1000,
        "percent": 30,
        "stepsPerSecond": 2.0,
        "eta": "5m50s",  # 700 steps at 2/s
        "etaTime": "2026-12-05T01:07:30Z",
        "metrics": {"loss": 1.0},
        "metricsFrom": "worker-0",
        "updatedAt": "2026-12-05T01:01:40Z",
    }
    # Later, with no new report, the ETA counts down from the same finishing time.
    assert p.summary(at(160))["eta"] == "4m50s"
    assert p.summary(at(1000))["eta"] == "0s"


@pytest.mark.parametrize(
    ("reports", "want"),
    [
        # one report: no rate, no ETA
        ([(0, Report("worker-0", 5, 10))], {"step": 5, "totalSteps": 10, "percent": 50}),
        # epochs only: percent from epochs, no step rate
        (
            [
                (0, Report("worker-0", epoch=1, total_epochs=4)),
                (9, Report("worker-0", epoch=2, total_epochs=4)),
            ],
            {"epoch": 2, "totalEpochs": 4, "percent": 50},
        ),
        # done: 100 %, ETA 0s
        (
            [(0, Report("worker-0", 50, 100)), (10, Report("worker-0", 100, 100))],
            {"step": 100, "totalSteps": 100, "percent": 100, "stepsPerSecond": 5.0, "eta": "0s"},
        ),
        # a restart from a checkpoint (the step went back): the old rate is dropped
        (
            [
                (0, Report("worker-0", 0, 100)),
                (10, Report("worker-0", 50, 100)),
                (20, Report("worker-0", 40, 100)),
            ],
            {"step": 40, "totalSteps": 100, "percent": 40},
        ),
        # without a total: steps and rate, neither percent nor ETA
        (
            [(0, Report("worker-0", 0)), (4, Report("worker-0", 8))],
            {"step": 8, "stepsPerSecond": 2.0},
        ),
    ],
)
def test_summary_table(reports: list[tuple[float, Report]], want: dict[str, Any]) -> None:
    p = JobProgress()
    for seconds, report in reports:
        p.record(report, at(seconds))
    got = p.summary(at(reports[-1][0]))
    got.pop("updatedAt")
    got.pop("etaTime", None)
    assert got == want


def test_the_metrics_shown_are_the_masters_else_the_most_advanced_replicas() -> None:
    p = JobProgress(master="chief-0")
    p.record(Report("worker-1", 20, metrics={"loss": 3.0}), at(0))
    p.record(Report("worker-0", 10, metrics={"loss": 4.0}), at(0))
    assert p.summary(at(0))["metricsFrom"] == "worker-1"
    p.record(Report("chief-0", 5, metrics={"loss": 5.0}), at(1))
    assert p.summary(at(1))["metrics"] == {"loss": 5.0}
    assert p.summary(at(1))["step"] == 20  # progress is the furthest replica's


def test_the_rate_window_keeps_the_last_five_minutes() -> None:
    p = JobProgress()
    p.record(Report("worker-0", 0, 10_000), at(0))
    p.record(Report("worker-0", 100, 10_000), at(10))  # 10 steps/s early on
    for i in range(1, 61):  # then 1 step/s for ten minutes
        p.record(Report("worker-0", 100 + 10 * i, 10_000), at(10 + 10 * i))
    assert p.summary(at(610))["stepsPerSecond"] == 1.0


# -- the curves ---------------------------------------------------------------------------------


def test_a_series_keeps_at_most_max_points_newest_included_oldest_coarser() -> None:
    series: list[list[float]] = []
    for step in range(1, 1001):
        append_point(series, step, step / 10)
    assert len(series) <= MAX_POINTS
    assert series[-1] == [1000, 100.0]
    assert series[0][0] < 20  # the start of the run is still in view
    xs = [x for x, _ in series]
    assert xs == sorted(xs)


@pytest.mark.parametrize(
    ("before", "point", "after"),
    [
        ([[1, 1.0], [2, 2.0]], (3, 3.0), [[1, 1.0], [2, 2.0], [3, 3.0]]),
        ([[1, 1.0], [2, 2.0]], (2, 9.0), [[1, 1.0], [2, 9.0]]),  # same step: replaced
        ([[1, 1.0], [2, 2.0], [3, 3.0]], (2, 5.0), [[1, 1.0], [2, 5.0]]),  # back to a checkpoint
    ],
)
def test_append_point_table(
    before: list[list[float]], point: tuple[float, float], after: list[list[float]]
) -> None:
    append_point(before, *point)
    assert before == after


def test_thin_halves_keeping_the_newest() -> None:
    assert thin([[i, i] for i in range(6)], 4) == [[1, 1], [3, 3], [5, 5]]
    assert thin([[i, i] for i in range(3)], 4) == [[0, 0], [1, 1], [2, 2]]


def test_history_is_per_replica_bounded_in_replicas() -> None:
    p = JobProgress()
    for i in range(MAX_REPLICAS_IN_HISTORY + 3):
        p.record(Report(f"worker-{i}", 1, metrics={"loss": float(i)}), at(0))
    assert len(p.history) == MAX_REPLICAS_IN_HISTORY
    assert p.history["worker-0"] == {"loss": [[1.0, 0.0]]}
    assert len(p.latest) == MAX_REPLICAS_IN_HISTORY + 3
    p.record(Report("worker-0", epoch=2, metrics={"loss": 0.5}), at(1))  # epochs when no step
    assert p.history["worker-0"]["loss"] == [[1.0, 0.0], [2.0, 0.5]]


# -- rate limit and token -----------------------------------------------------------------------


def test_the_bucket_allows_a_burst_then_the_rate() -> None:
    b = Bucket(rate=2, burst=3)
    assert [b.allow(0.0) for _ in range(4)] == [True, True, True, False]
    assert b.allow(0.4) is False  # 0.8 of a token
    assert b.allow(0.5) is True
    assert b.allow(0.5) is False
    assert [b.allow(100.0) for _ in range(4)] == [True, True, True, False]  # never above burst


def test_a_token_is_one_jobs_only() -> None:
    key = b"k" * 32
    token = token_for(key, "uid-a")
    assert token_ok(key, "uid-a", token)
    assert not token_ok(key, "uid-b", token)  # another job, or a new job of the same name
    assert not token_ok(b"x" * 32, "uid-a", token)  # another controller's key
    assert not token_ok(key, "", token_for(key, ""))
    assert len(token) == 43 and "=" not in token


# -- the endpoint's certificate -------------------------------------------------------------


def test_a_serving_certificate_is_issued_again_for_another_host_or_near_its_end() -> None:
    from cryptography import x509

    from controller.progress_keys import issue, needs_new_serving

    data = issue("trainops-controller.trainops-system.svc", T0)
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "trainops-controller.trainops-system.svc" in names.get_values_for_type(x509.DNSName)
    assert not needs_new_serving(data, "trainops-controller.trainops-system.svc", T0)
    assert needs_new_serving(data, "10.244.0.1", T0)  # `up` moved to a pod network's bridge
    assert needs_new_serving(data, "trainops-controller.trainops-system.svc", at(340 * 86400))
    assert needs_new_serving({k: v for k, v in data.items() if k != "tls.host"}, "x", T0)
    again = issue("10.244.0.1", T0, ca=_pair(data))
    assert again["ca.crt"] == data["ca.crt"]  # the same CA: pods keep trusting it


def _pair(data: dict[str, bytes]) -> Any:
    from certs import pki

    return pki.KeyPair(data["ca.crt"], data["ca.key"])
