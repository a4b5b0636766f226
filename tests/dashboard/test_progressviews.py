"""The job page's progress line and curves, pure (dashboard/progressviews.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from dashboard.progressviews import MAX_POINTS, charts, progress_by_key, summary, y_scale


@pytest.mark.parametrize(
    ("progress", "text", "percent"),
    [
        (
            {
                "percent": 30,
                "step": 30,
                "totalSteps": 100,
                "eta": "5m50s",
                "metrics": {"loss": 1.0},
            },
            "30% · step 30/100 · ETA 5m50s",
            30,
        ),
        ({"epoch": 2, "totalEpochs": 5, "percent": 40}, "40% · epoch 2/5", 40),
        ({"step": 7}, "step 7", None),
        ({"percent": 101, "step": "x"}, "", None),  # malformed: left out, never an error
    ],
)
def test_the_summary_line(progress: dict[str, Any], text: str, percent: int | None) -> None:
    shown = summary({"progress": progress})
    assert shown is not None
    assert (shown["text"], shown["percent"]) == (text, percent)


def test_no_progress_no_summary_and_metrics_are_formatted() -> None:
    assert summary({}) is None
    assert summary({"progress": {}}) is None
    assert summary(None) is None
    shown = summary({"progress": {"metrics": {"loss": 0.123456, "acc": 1, "bad": "x"}}})
    assert shown is not None and shown["metrics"] == [("loss", "0.1235"), ("acc", "1")]


def test_replicas_in_sync_share_a_trace_and_those_that_differ_get_their_own() -> None:
    same = [[1, 2.0], [2, 1.0]]
    doc = {
        "replicas": {
            "worker-10": {"loss": same},
            "worker-2": {"loss": same, "lr": [[1, 0.1]]},
            "worker-1": {"loss": [[1, 3.0], [2, 2.5]]},
        }
    }
    assert charts(json.dumps(doc)) == [
        {
            "metric": "loss",
            "scale": "linear",
            "traces": [
                {"name": "worker-1", "x": [1.0, 2.0], "y": [3.0, 2.5]},
                {"name": "worker-2, worker-10", "x": [1.0, 2.0], "y": [2.0, 1.0]},
            ],
        },
        {
            "metric": "lr",
            "scale": "linear",
            "traces": [{"name": "worker-2", "x": [1.0], "y": [0.1]}],
        },
    ]


@pytest.mark.parametrize(
    ("values", "scale"),
    [
        ([24.0, 3.1, 0.01], "log"),  # the example's loss: a spike, then flat on a linear axis
        ([1.0, 100.0], "log"),  # two decades
        ([1.0, 99.0], "linear"),
        ([0.5, 0.87, 0.9], "linear"),  # accuracy
        ([24.0, 0.0, 0.01], "linear"),  # a zero has no log
        ([-1.0, 200.0], "linear"),
        ([], "linear"),
    ],
)
def test_a_metric_spanning_two_decades_of_positive_values_is_drawn_on_a_log_axis(
    values: list[float], scale: str
) -> None:
    assert y_scale(values) == scale


def test_the_scale_spans_every_replicas_values() -> None:
    doc = {"replicas": {"worker-0": {"loss": [[1, 24.0]]}, "worker-1": {"loss": [[9, 0.2]]}}}
    assert [c["scale"] for c in charts(doc)] == ["log"]


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        "[]",
        {"replicas": []},
        {"replicas": {"worker-0": []}},
        {"replicas": {"worker-0": {"loss": "x"}}},
    ],
)
def test_a_malformed_document_draws_nothing(document: Any) -> None:
    assert charts(document) == []


def test_bad_points_are_skipped_and_a_trace_is_bounded() -> None:
    points: list[Any] = [[i, float(i)] for i in range(MAX_POINTS + 10)]
    points += [[1, "x"], [True, 1], [1, float("nan")], [1]]
    (chart,) = charts({"replicas": {"worker-0": {"loss": points}}})
    (trace,) = chart["traces"]
    assert len(trace["x"]) == MAX_POINTS - 4
    assert trace["x"][-1] == MAX_POINTS + 9


def test_progress_by_key_names_jobs_as_the_repository_page_does() -> None:
    jobs = [
        {
            "kind": "TensorFlowTrainingJob",
            "metadata": {"namespace": "a", "name": "m"},
            "status": {"progress": {"percent": 5}},
        },
        {"kind": "XGBoostTrainingJob", "metadata": {"namespace": "a", "name": "x"}, "status": {}},
    ]
    assert list(progress_by_key(jobs)) == ["TensorFlowTrainingJob/a/m"]


def test_the_front_pages_jobs_table_shows_each_jobs_progress_and_eta() -> None:
    from dashboard import views
    from dashboard.render import Renderer
    from gitops.api.show import job_row

    progress = {"percent": 30, "step": 300, "totalSteps": 1000, "eta": "5m50s"}
    jobs = [
        {
            "kind": "TensorFlowTrainingJob",
            "metadata": {"namespace": "a", "name": "m"},
            "status": {"phase": "Running", "progress": progress},
        },
        {
            "kind": "XGBoostTrainingJob",
            "metadata": {"namespace": "a", "name": "m"},
            "status": {"phase": "Running"},
        },
    ]
    rows = views.job_rows([job_row(j) for j in jobs], datetime(2026, 12, 5, tzinfo=UTC))
    html = Renderer(lambda name: f"/static/{name}").render(
        "_jobs.html",
        {"jobs": rows, "jobs_total": 2, "progress": progress_by_key(jobs)},
    )
    tf, xgb = html.split('<tr data-job="a/m">')[1:]
    assert '<td class="job-progress" data-label="Progress" data-percent="30">' in tf
    assert "30% · step 300/1000 · ETA 5m50s</td>" in tf
    assert '<td class="job-progress" data-label="Progress"></td>' in xgb  # none reported
