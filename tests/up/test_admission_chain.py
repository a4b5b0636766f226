"""A bad training job is refused by the webhook through the whole chain:
kubectl → embedded API server → admission chain → in-process webhook (TLS) → policies."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.up.conftest import Up

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_kubectl_apply_of_a_bad_job_is_denied_by_the_webhook(up: Up) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    up.start()
    result = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(up.kubeconfig),
            "apply",
            "--server-side",
            "-f",
            str(EXAMPLES / "denied" / "limits-below-requests.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert (
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request'
        in result.stderr
    )
    assert "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu" in result.stderr

    good = subprocess.run(
        [
            kubectl,
            "--kubeconfig",
            str(up.kubeconfig),
            "create",
            "-f",
            str(EXAMPLES / "tensorflow-mnist.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert good.returncode == 0, good.stderr
