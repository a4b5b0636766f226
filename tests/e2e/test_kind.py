"""The end-to-end tier: trainops as a platform team runs it, on the kind cluster of
hack/kind-cluster (real kubelets and containerd on three nodes, kube-proxy, CoreDNS), with
deploy/ applied from the image (hack/kind/deploy). Everything goes through kubectl, as a user's
commands do.

hack/e2e-tests brings the cluster up, loads the images, applies deploy/ and sets
TRAINOPS_E2E_KUBECONFIG; without it these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import eventually

REPO = Path(__file__).resolve().parents[2]
KUBECONFIG = os.environ.get("TRAINOPS_E2E_KUBECONFIG")
TRAINING_IMAGE = os.environ.get("TRAINOPS_E2E_TRAINING_IMAGE", "localhost/trainops-training:2.21.0")
LIMITS_CPU = "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"

pytestmark = pytest.mark.skipif(
    not KUBECONFIG,
    reason="TRAINOPS_E2E_KUBECONFIG is not set (hack/e2e-tests builds the kind cluster and sets it)",
)


def kubectl(
    *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["kubectl", f"--kubeconfig={KUBECONFIG}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return result


def get(*args: str) -> Any:
    return json.loads(kubectl("get", "-o", "json", *args).stdout)


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_webhook_refuses_a_job_through_its_service_naming_the_field(namespace: str) -> None:
    config = get("validatingwebhookconfiguration", "trainops-webhook")
    services = [w["clientConfig"].get("service") for w in config["webhooks"]]
    assert services and all(s and s["name"] == "trainops-webhook" for s in services), services

    denied = REPO / "examples" / "denied" / "limits-below-requests.yaml"
    result = kubectl("-n", namespace, "apply", "-f", str(denied), check=False)

    assert result.returncode == 1
    assert re.fullmatch(
        r'Error from server \(Forbidden\): error when creating "[^"]*limits-below-requests'
        r'\.yaml": admission webhook "validate\.trainingjobs\.batch\.tensorstack\.dev" '
        r"denied the request: " + re.escape(LIMITS_CPU) + r": .+",
        result.stderr.strip(),
        flags=re.DOTALL,
    ), result.stderr
    assert kubectl("-n", namespace, "get", "tensorflowtrainingjobs", "-o", "name").stdout == ""


def _tf_mwms(image: str) -> list[dict[str, Any]]:
    """examples/training/tensorflow-mwms.yaml with the training image built here, and its two
    workers kept on different nodes (a required anti-affinity, as a user asking for it writes)."""
    documents = [
        d
        for d in yaml.safe_load_all((REPO / "examples/training/tensorflow-mwms.yaml").read_text())
        if d
    ]
    (job,) = [d for d in documents if d["kind"] == "TensorFlowTrainingJob"]
    (worker,) = job["spec"]["replicaSpecs"]
    pod = worker["template"]
    pod.setdefault("metadata", {}).setdefault("labels", {})["e2e/spread"] = job["metadata"]["name"]
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"e2e/spread": job["metadata"]["name"]}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    for container in pod["spec"]["containers"]:
        container["image"] = image
    return documents


def _losses(log: str) -> list[float]:
    return [
        float(m) for m in re.findall(r"^epoch \d+/\d+ loss ([0-9.]+)$", log, flags=re.MULTILINE)
    ]


def test_tensorflow_multiworker_trains_across_two_nodes(namespace: str) -> None:
    manifests = _tf_mwms(TRAINING_IMAGE)
    kubectl("-n", namespace, "apply", "-f", "-", stdin=yaml.safe_dump_all(manifests))

    def succeeded() -> bool:
        status = get("-n", namespace, "tensorflowtrainingjobs", "tf-mwms").get("status", {})
        assert status.get("phase") != "Failed", status
        return status.get("phase") == "Succeeded"

    eventually(succeeded, timeout=900, interval=5)

    pods = get("-n", namespace, "pods")["items"]
    workers = [p for p in pods if p["metadata"]["name"].startswith("tf-mwms-worker-")]
    assert len(workers) == 2, [p["metadata"]["name"] for p in pods]
    nodes = {p["spec"]["nodeName"] for p in workers}
    assert len(nodes) == 2, nodes
    for pod in workers:
        assert pod["status"]["phase"] == "Succeeded", pod["status"]
        log = kubectl("-n", namespace, "logs", pod["metadata"]["name"]).stdout
        losses = _losses(log)
        assert len(losses) >= 2 and losses[-1] < losses[0], log
        assert "training done" in log
