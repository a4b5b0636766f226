"""The training examples train for real under `trainops up`, unchanged: their images mapped to
the training venv (`up --image`), each pod in its own network namespace, the replicas finding
each other by the Service names the controller writes into TF_CONFIG and MASTER_ADDR.

Runs in the real-training tier (hack/training-tests sets TRAINOPS_TRAINING_PYTHON). Needs pod
networks (root and the CNI plugins): without them replicas share 127.0.0.1 and cannot train,
so the test skips, saying which. With TRAINOPS_TEST_KUBECONFIG the same manifests run on that
cluster through `up --kubeconfig --node`.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.training.test_examples_train import EXAMPLES, TRAINING_PYTHON, needs_training_python
from tests.up.conftest import Up, eventually, finish

pytestmark = [needs_training_python, pytest.mark.slow]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    assert TRAINING_PYTHON is not None
    venv = Path(TRAINING_PYTHON).parent.parent
    up = Up(tmp_path_factory.mktemp("training") / "data")
    up.start(
        timeout=90,
        args=(
            *("--image", f"tensorflow/tensorflow:*={venv}"),
            *("--image", f"trainops-examples/*={venv}"),
        ),
    )
    banner = "".join(up.output)
    if "pod network none:" in banner:
        reason = banner.split("pod network none:", 1)[1].splitlines()[0].strip()
        finish(up)
        pytest.skip(f"pods share the host's network here, so replicas cannot train: {reason}")
    try:
        # The reporter the examples import (docs/PROGRESS.md), as their comments say to make it.
        reporter = EXAMPLES.parents[1] / "trainops_progress.py"
        _kubectl(up, "create", "configmap", "trainops-progress", f"--from-file={reporter}")
        for name in ("tensorflow-mwms.yaml", "xgboost-dist.yaml"):
            _kubectl(up, "apply", "-f", str(EXAMPLES / name))
        yield up
    finally:
        finish(up)


def _kubectl(up: Up, *args: str) -> str:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(up.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _job(up: Up, kind: str, name: str) -> dict[str, Any]:
    return dict(json.loads(_kubectl(up, "get", kind, name, "-o", "json")))


def _progress(up: Up, kind: str, name: str) -> dict[str, Any]:
    """The job's progress once complete (it is written at most every 5 s: may trail the end)."""

    def done() -> dict[str, Any]:
        progress: dict[str, Any] = _job(up, kind, name).get("status", {}).get("progress") or {}
        assert progress.get("percent") == 100, progress
        return progress

    found: dict[str, Any] = eventually(done, timeout=30, interval=1)
    return found


def _succeeded(up: Up, kind: str, name: str) -> bool:
    phase = (_job(up, kind, name).get("status") or {}).get("phase")
    assert phase != "Failed", _kubectl(up, "get", "pods", "-o", "wide")
    return phase == "Succeeded"


def test_the_tensorflow_example_trains_on_two_workers_in_sync(trained: Up) -> None:
    eventually(lambda: _succeeded(trained, "tfj", "tf-mwms"), timeout=600, interval=2)
    losses = []
    for i in range(2):
        logs = _kubectl(trained, "logs", f"tf-mwms-worker-{i}")
        assert f"worker {i}: num_replicas_in_sync 2" in logs
        losses.append([float(x) for x in re.findall(r"^epoch \d+/\d+ loss (\S+)$", logs, re.M)])
    assert len(losses[0]) == 5 and losses[0] == losses[1]
    assert losses[0][-1] < losses[0][0] / 5
    events = _kubectl(
        trained, "get", "events", "--field-selector", "involvedObject.name=tf-mwms-worker-0"
    )
    assert str(Path(TRAINING_PYTHON or "").parent.parent) in events  # the environment that ran
    # The workers reported: the job's progress is complete, with the last epoch's loss.
    progress = _progress(trained, "tfj", "tf-mwms")
    assert (progress["percent"], progress["step"], progress["totalSteps"]) == (100, 100, 100)
    assert progress["epoch"] == 5
    assert progress["metrics"]["loss"] == pytest.approx(losses[0][-1], abs=2e-4)


def test_the_xgboost_example_trains_master_and_two_workers(trained: Up) -> None:
    eventually(lambda: _succeeded(trained, "xgbj", "xgb-dist"), timeout=600, interval=2)
    master = _kubectl(trained, "logs", "xgb-dist-master-0")
    assert "rank 0 of 3" in master
    rounds = [float(x) for x in re.findall(r"\[\d+\]\teval-logloss:(\S+)", master)]
    assert len(rounds) == 10 and rounds[-1] < rounds[0] * 0.6
    for i in range(2):
        assert "training done" in _kubectl(trained, "logs", f"xgb-dist-worker-{i}")
    progress = _progress(trained, "xgbj", "xgb-dist")
    assert (progress["percent"], progress["step"], progress["totalSteps"]) == (100, 10, 10)
    assert progress["metricsFrom"] == "master-0"
    assert progress["metrics"]["eval-logloss"] == pytest.approx(rounds[-1], rel=1e-3)
