"""Stopping `trainops up` with Ctrl-C while jobs run, and starting it again.

The node ends every pod process on a stop (SIGTERM, exit code 143) and marks those pods as
disrupted (`DisruptionTarget`, as a kubelet's graceful node shutdown does). A stop the user
asked for is not the job's failure: after the restart the replicas are recreated, no restart is
counted against `backoffLimit`, and the job runs on.
"""

from __future__ import annotations

import copy
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.up.conftest import Up, eventually

JOB = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "TensorFlowTrainingJob",
    "metadata": {"name": "survivor", "namespace": "default"},
    "spec": {
        "runPolicy": {"backoffLimit": 1},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 2,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "tensorflow", "image": "busybox", "command": ["sleep", "300"]}
                        ]
                    }
                },
            }
        ],
    },
}


def _kubectl(up: Up, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(up.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )


def _status(up: Up) -> dict[str, Any]:
    out = _kubectl(up, "get", "tfj", "survivor", "-o", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout).get("status") or {})


@pytest.mark.parametrize("policy", ["Never", "OnFailure"])
def test_a_job_running_when_up_is_stopped_runs_again_after_a_restart(
    up: Up, tmp_path: Path, policy: str
) -> None:
    """Never: the pods ended Failed and are recreated. OnFailure: the kubelet restarts their
    containers in place when `up` starts again; the controller recreates them as well (a
    disruption), and neither counts against the backoff limit."""
    job = copy.deepcopy(JOB)
    job["spec"]["replicaSpecs"][0]["restartPolicy"] = policy
    up.start()
    created = _kubectl(up, "create", "-f", "-", stdin=yaml.safe_dump(job))
    assert created.returncode == 0, created.stderr
    eventually(lambda: _status(up).get("phase") == "Running", timeout=30)
    assert up.stop(signal.SIGINT) == 0

    up.start()

    def running_again() -> dict[str, Any] | bool:
        # Both replicas' pods run their container again (not merely in phase Running: an
        # OnFailure pod stays Running while its container waits to be restarted)...
        out = _kubectl(up, "get", "pods", "-o", "json")
        pods = [p for p in json.loads(out.stdout or "{}").get("items", [])]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        running = [
            p
            for p in live
            if all(
                "running" in c.get("state", {}) for c in p["status"].get("containerStatuses", [{}])
            )
        ]
        # ...and the status says so for those very pods.
        status = _status(up)
        replicas = [r for t in status.get("tasks", []) for r in t.get("replicas", [])]
        uids = {p["metadata"]["uid"] for p in running}
        fresh = len(replicas) == 2 == len(running) and {r.get("uid") for r in replicas} == uids
        fresh = fresh and all(r.get("phase") == "Running" for r in replicas)
        return status if status.get("phase") == "Running" and fresh else False

    status = eventually(running_again, timeout=60)
    assert status.get("backoffCount", 0) == 0
    assert all(r["restartCount"] == 0 for t in status["tasks"] for r in t["replicas"])
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Failed"] == "False"
    assert conditions["ReplicaFailure"] == "False"
