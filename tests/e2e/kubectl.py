"""kubectl against the kind cluster of the end-to-end tier (TRAINOPS_E2E_KUBECONFIG), and the
skip every tests/e2e module carries when it is not set."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import pytest

KUBECONFIG = os.environ.get("TRAINOPS_E2E_KUBECONFIG")
TRAINING_IMAGE = os.environ.get("TRAINOPS_E2E_TRAINING_IMAGE", "localhost/trainops-training:2.21.0")
# What hack/kind/deploy sets deploy/'s image to; on every node, so tiny jobs use it too.
PRODUCT_IMAGE = "localhost/trainops:kind"

needs_cluster = pytest.mark.skipif(
    not KUBECONFIG,
    reason="TRAINOPS_E2E_KUBECONFIG is not set (hack/e2e-tests builds the kind cluster and sets it)",
)


def kubectl(
    *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", f"--kubeconfig={KUBECONFIG}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def get(*args: str) -> Any:
    return json.loads(kubectl("get", "-o", "json", *args).stdout)
