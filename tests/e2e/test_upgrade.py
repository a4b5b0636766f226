"""An upgrade on the kind cluster (issue #28): deploy/ of a previous release with its own image
(`hack/kind-cluster previous REF`, whose overlay TRAINOPS_E2E_PREVIOUS names), a job training
under it, then the current deploy/ applied with the current image, as a platform team upgrades:
the running job's pods are not restarted, it Succeeds, no job is lost.

It uninstalls the current deploy/ first (the CRDs too, so every training job of the cluster
goes): it runs last in tests/e2e (by name) and leaves the current deploy/ installed.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.kubectl import PRODUCT_IMAGE, get, kubectl, needs_cluster
from tests.support.cluster import eventually

REPO = Path(__file__).resolve().parents[2]
PREVIOUS = os.environ.get("TRAINOPS_E2E_PREVIOUS")
SYSTEM = "trainops-system"
DEPLOYMENTS = ("trainops-webhook", "trainops-controller", "trainops-gitops")
TF = "tensorflowtrainingjobs"
TRAINING_SECONDS = 120

pytestmark = [
    needs_cluster,
    pytest.mark.skipif(
        not PREVIOUS,
        reason="TRAINOPS_E2E_PREVIOUS is not set (hack/e2e-tests runs hack/kind-cluster previous)",
    ),
]

TRAIN = f"""
import time
for step in range({TRAINING_SECONDS}):
    print("step", step, flush=True)
    time.sleep(1)
print("training done")
"""


def _job(name: str, replicas: int, script: str) -> dict[str, Any]:
    container = {
        "name": "tensorflow",
        "image": PRODUCT_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", script],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"cpu": "500m", "memory": "128Mi"},
        },
    }
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name},
        "spec": {
            # None: the job Succeeds with worker 0, and worker 1 is left to finish (TensorFlow's
            # default, Unfinished, would delete it then).
            "runPolicy": {
                "backoffLimit": 2,
                "activeDeadlineSeconds": 900,
                "cleanUpPolicy": "None",
            },
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": replicas,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            ],
        },
    }


def _install(overlay: str) -> float:
    started = time.monotonic()
    kubectl("apply", "--server-side", "-k", overlay, timeout=300)
    for deployment in DEPLOYMENTS:
        kubectl(
            "-n",
            SYSTEM,
            "rollout",
            "status",
            f"deployment/{deployment}",
            "--timeout=300s",
            timeout=320,
        )
    return time.monotonic() - started


def _images() -> set[str]:
    pods = get("-n", SYSTEM, "pods")["items"]
    return {c["image"] for p in pods for c in p["spec"]["containers"]}  # terminating ones too


def _phase(namespace: str, name: str) -> str:
    return str(get("-n", namespace, TF, name).get("status", {}).get("phase", ""))


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"e2e-upgrade-{uuid.uuid4().hex[:6]}"
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_an_upgrade_from_the_previous_release_keeps_running_training_and_every_job(
    namespace: str,
) -> None:
    current = str(REPO / "hack" / "kind" / "deploy")
    assert PREVIOUS is not None
    started = time.monotonic()
    kubectl("delete", "-k", current, "--ignore-not-found", "--wait=true", timeout=300)
    installed = _install(PREVIOUS)
    assert _images() == {"localhost/trainops:previous"}, _images()

    kubectl("create", "namespace", namespace)
    finished, training = _job("finished", 1, "print('done')"), _job("long", 2, TRAIN)
    manifests = yaml.safe_dump_all([finished, training])
    # Rolled out is not yet reachable: until kube-proxy routes the Service to the new webhook
    # pods, admission is refused ("connection refused", failurePolicy Fail; seen once in CI).
    # A server-side dry run goes through admission; a user would retry the same way.
    eventually(
        lambda: (
            kubectl(
                "-n",
                namespace,
                "apply",
                "--dry-run=server",
                "-f",
                "-",
                stdin=manifests,
                check=False,
            ).returncode
            == 0
        ),
        timeout=60,
        interval=1,
    )
    kubectl("-n", namespace, "apply", "-f", "-", stdin=manifests)
    eventually(lambda: _phase(namespace, "finished") == "Succeeded", timeout=180, interval=2)

    def workers_running() -> list[dict[str, Any]] | None:
        pods = get("-n", namespace, "pods")["items"]
        long = [p for p in pods if p["metadata"]["name"].startswith("long-worker-")]
        running = [p for p in long if p["status"].get("phase") == "Running"]
        return running if len(running) == 2 else None

    before = eventually(workers_running, timeout=180, interval=2)
    assert before is not None
    uids_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in before}
    jobs_before = {
        j["metadata"]["name"]: j["metadata"]["uid"] for j in get("-n", namespace, TF)["items"]
    }

    upgraded_at = time.monotonic()
    upgrade = _install(current)
    # The previous release's pods end (their grace period) after the rollout is complete.
    eventually(lambda: _images() == {PRODUCT_IMAGE}, timeout=120, interval=2)
    # The upgrade is over while the job still trains.
    assert _phase(namespace, "long") == "Running", get("-n", namespace, TF, "long").get("status")

    eventually(
        lambda: _phase(namespace, "long") == "Succeeded",
        timeout=TRAINING_SECONDS + 240,
        interval=3,
    )

    def workers_done() -> dict[str, dict[str, Any]] | None:
        pods = {p["metadata"]["name"]: p for p in get("-n", namespace, "pods")["items"]}
        done = all(pods[n]["status"]["phase"] == "Succeeded" for n in uids_before if n in pods)
        return pods if done else None

    pods = eventually(workers_done, timeout=120, interval=2)
    assert pods is not None
    assert {n: pods[n]["metadata"]["uid"] for n in uids_before} == uids_before
    for name in uids_before:
        (status,) = pods[name]["status"]["containerStatuses"]
        assert status["restartCount"] == 0, status
        assert status["state"]["terminated"]["exitCode"] == 0, status
        log = kubectl("-n", namespace, "logs", name).stdout
        assert log.splitlines()[-1] == "training done", log[-500:]
        assert log.count("step 0\n") == 1, log[:500]
    jobs = get("-n", namespace, TF)["items"]
    assert {j["metadata"]["name"]: j["metadata"]["uid"] for j in jobs} == jobs_before
    assert {j["metadata"]["name"]: j["status"]["phase"] for j in jobs} == {
        "finished": "Succeeded",
        "long": "Succeeded",
    }
    assert [j["status"].get("backoffCount", 0) for j in jobs] == [0, 0], [j["status"] for j in jobs]
    print(
        f"\nupgrade: previous deploy/ installed in {installed:.0f} s, current applied and rolled "
        f"out in {upgrade:.0f} s while training; job done {time.monotonic() - upgraded_at:.0f} s "
        f"after the upgrade began; test {time.monotonic() - started:.0f} s",
        file=sys.stderr,
    )
