"""Training curves in a real browser, under `trainops up --repo`: a job from Git whose chief
reports its loss and accuracy with trainops_progress.py (the env the controller injects, the
HTTPS endpoint of `up`'s controller), and the job page draws them with plotly.js — served
from the installed `plotly` package under the dashboard's strict CSP (the `page` fixture fails
on any CSP violation or uncaught error). The repository page shows the job's progress.

Needs the PyPI package `plotly` where `trainops up` runs (a dependency of trainops); skips,
saying so, without it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import Dashboard, api_url, require_chromium
from tests.gitops.conftest import Remote
from tests.up.conftest import Up, finish

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LIVE = 45_000  # ms
STEPS = 12

TRAIN = f"""
import time, trainops_progress as p
r = p.Reporter(min_interval=0)
for step in range(1, {STEPS} + 1):
    r.report(step=step, total_steps={STEPS}, metrics={{"loss": 2.0 / step, "accuracy": step / {STEPS}}})
    time.sleep(0.4)
print("reported", r.sent)
time.sleep(12)  # stay running while the curves reach the page
"""


def _job(name: str) -> str:
    return f"""\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - type: chief
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.11.0
              command: ["python3", "-c", {json.dumps(TRAIN)}]
              env:
                - name: PYTHONPATH
                  value: {json.dumps(str(ROOT))}
"""


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    require_chromium()
    import importlib.util

    if importlib.util.find_spec("plotly") is None:
        pytest.skip("the plotly package is not installed (pip install plotly: the chart library)")
    root = tmp_path_factory.mktemp("progress")
    remote = Remote(root / "remote")
    first = remote.commit("Add a job that reports", {"jobs/curves.yaml": _job("curves")})
    up = Up(root / "data")
    up.start(timeout=60, args=("--repo", remote.url, "--path", "jobs"))
    try:
        yield Dashboard(up, remote, api_url(up), first)
    finally:
        finish(up)


def test_the_job_page_draws_each_metric_over_steps_as_it_comes(
    dashboard: Dashboard, page: Page
) -> None:
    page.goto(f"{dashboard.url}/jobs/default/tensorflowtrainingjobs/curves")
    loss = page.locator('#progress-charts .progress-chart[data-metric="loss"]')
    expect(loss).to_be_visible(timeout=LIVE)
    # Live: more points arrive without a reload, up to every step reported.
    expect(loss).to_have_attribute("data-points", str(STEPS), timeout=LIVE)
    # plotly drew them: one marker per point, and a line through them.
    expect(loss.locator("g.trace.scatter path.point")).to_have_count(STEPS)
    assert loss.locator("g.trace.scatter path.js-line").count() == 1
    accuracy = page.locator('#progress-charts .progress-chart[data-metric="accuracy"]')
    expect(accuracy.locator("g.trace.scatter path.point")).to_have_count(STEPS)
    expect(accuracy.locator(".gtitle")).to_have_text("accuracy")
    # The layers stack (titles over the plot, not below it): dashboard.css does what plotly's
    # own stylesheet, not injected under the CSP, would.
    box, title = accuracy.bounding_box(), accuracy.locator(".gtitle").bounding_box()
    assert box is not None and title is not None
    assert box["y"] <= title["y"] <= box["y"] + box["height"] / 4, (box, title)
    assert page.evaluate("typeof window.Plotly") == "object"
    expect(page.locator("#progress-empty")).to_be_hidden()
    # The summary in the job fragment: percent, steps, the latest metrics.
    summary = page.locator("#job-progress")
    expect(summary).to_have_attribute("data-percent", "100", timeout=LIVE)
    expect(summary).to_contain_text(f"step {STEPS}/{STEPS}")
    expect(summary).to_contain_text(re.compile(r"loss\s+0\.1667"))


def test_the_repository_page_shows_the_jobs_progress(dashboard: Dashboard, page: Page) -> None:
    page.goto(f"{dashboard.url}/repositories/default/origin")
    progress = page.locator(
        'tr[data-resource="TensorFlowTrainingJob/default/curves"] .job-progress'
    )
    expect(progress).to_contain_text("100%", timeout=LIVE)
    expect(progress).to_have_attribute("data-percent", "100")


def test_plotly_is_served_from_the_installed_package_not_from_the_repository(
    dashboard: Dashboard, page: Page
) -> None:
    response = page.request.get(f"{dashboard.url}/static/vendor/plotly.min.js")
    assert response.status == 200
    assert response.headers["content-type"].startswith(
        ("application/javascript", "text/javascript")
    )
    assert b"plotly.js" in response.body()[:400]
    assert not list((ROOT / "dashboard").rglob("plotly*.js"))
