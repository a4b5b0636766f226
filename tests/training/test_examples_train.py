"""The training examples (examples/training/) really train.

The scripts are taken from the examples' ConfigMaps, so what runs here is what a job mounts.
Fast checks run in the main suite: every example is admitted without a warning and its script
compiles. The training itself needs tensorflow-cpu and xgboost-cpu: `hack/training-tests`
installs them (pinned, cached) and points TRAINOPS_TRAINING_PYTHON at that interpreter; without
it these tests skip, saying so. They run the scripts as plain processes on loopback, given the
environment the controller writes (TF_CONFIG; MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "training"
TRAINING_PYTHON = os.environ.get("TRAINOPS_TRAINING_PYTHON")
needs_training_python = pytest.mark.skipif(
    not TRAINING_PYTHON,
    reason="TRAINOPS_TRAINING_PYTHON is not set (hack/training-tests installs tensorflow-cpu and "
    "xgboost-cpu and sets it)",
)


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _script(name: str, tmp_path: Path) -> Path:
    (config_map,) = [d for d in _documents(name) if d["kind"] == "ConfigMap"]
    path = tmp_path / name.replace(".yaml", ".py")
    path.write_text(config_map["data"]["train.py"])
    return path


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _run_all(
    script: Path, envs: list[dict[str, str]], timeout: float = 600
) -> list[subprocess.CompletedProcess[str]]:
    """Start one process per environment at once; wait for all (each bounded by `timeout`)."""
    assert TRAINING_PYTHON is not None
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "MASTER_"))}
    procs = [
        subprocess.Popen(
            [TRAINING_PYTHON, str(script)],
            env={**base, "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": "2", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for env in envs
    ]
    results = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, ""))
    return results


@pytest.mark.parametrize("name", ["tensorflow-mwms.yaml", "xgboost-dist.yaml"])
def test_each_example_is_admitted_without_a_warning_and_its_script_compiles(
    name: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainops", "check", str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning" not in done.stdout + done.stderr
    assert "1 job checked: 1 admitted, 0 denied" in done.stdout + done.stderr
    compile(_script(name, tmp_path).read_text(), name, "exec")


@needs_training_python
def test_two_tensorflow_workers_train_in_sync_and_the_loss_falls(tmp_path: Path) -> None:
    script = _script("tensorflow-mwms.yaml", tmp_path)
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    envs = [
        {
            "TF_CONFIG": json.dumps(
                {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
            )
        }
        for i in range(2)
    ]
    results = _run_all(script, envs)
    losses = []
    for i, result in enumerate(results):
        assert result.returncode == 0, result.stdout[-3000:]
        assert f"worker {i}: num_replicas_in_sync 2" in result.stdout
        assert "training done" in result.stdout
        losses.append(
            [float(x) for x in re.findall(r"^epoch \d+/\d+ loss (\S+)$", result.stdout, re.M)]
        )
    assert len(losses[0]) == 5
    assert losses[0] == losses[1]  # gradients are all-reduced: one model, one loss
    assert losses[0][-1] < losses[0][0] / 5


@needs_training_python
def test_an_xgboost_master_and_two_workers_train_one_model_and_the_logloss_falls(
    tmp_path: Path,
) -> None:
    script = _script("xgboost-dist.yaml", tmp_path)
    (port,) = _free_ports(1)
    common = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": "3"}
    results = _run_all(script, [{**common, "RANK": str(rank)} for rank in range(3)])
    for rank, result in enumerate(results):
        assert result.returncode == 0, result.stdout[-3000:]
        assert f"rank {rank} of 3" in result.stdout
        assert "training done" in result.stdout
    rounds = [float(x) for x in re.findall(r"\[\d+\]\teval-logloss:(\S+)", results[0].stdout)]
    assert len(rounds) == 10
    assert rounds == sorted(rounds, reverse=True)
    assert rounds[-1] < rounds[0] * 0.6
