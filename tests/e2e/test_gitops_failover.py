"""The GitOps leader killed in the middle of a sync of 200 jobs, on the kind cluster (issue #28):
the other replica takes the Lease and finishes, and every job is created once (a watch started
before the sync records every ADDED and DELETED)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.gitops_cluster import (
    MANY,
    SYSTEM,
    TF,
    apply,
    drop_namespace,
    make_tenant,
    new_namespace,
    repo_status,
    repository,
    synced,
)
from tests.e2e.kubectl import KUBECONFIG, get, kubectl, needs_cluster
from tests.support.cluster import eventually

pytestmark = needs_cluster


class Watch:
    """`kubectl get -w --output-watch-events -o json` of a namespace's TensorFlowTrainingJobs,
    started before anything is created there (its first list is empty): every ADDED and
    DELETED as the API server streamed them."""

    def __init__(self, namespace: str) -> None:
        self.events: list[tuple[str, str, str]] = []  # (type, name, uid)
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [
                "kubectl",
                f"--kubeconfig={KUBECONFIG}",
                "-n",
                namespace,
                "get",
                TF,
                "-w",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # with --output-watch-events: one event a line
            event = json.loads(line)
            if event["type"] not in ("ADDED", "DELETED"):
                continue  # status writes (MODIFIED) are not what is counted
            meta = event["object"]["metadata"]
            with self._lock:
                self.events.append((event["type"], meta["name"], meta["uid"]))

    def added(self) -> int:
        with self._lock:
            return sum(1 for kind, _, _ in self.events if kind == "ADDED")

    def stop(self) -> list[tuple[str, str, str]]:
        self.process.terminate()
        self.process.wait(timeout=10)
        with self._lock:
            return list(self.events)


REFRESH = "gitops.trainops.dev/refresh-requested-at"


def _handled(namespace: str, name: str) -> str | None:
    handled = repo_status(namespace, name).get("lastHandledRequest") or {}
    return handled.get("refreshRequestedAt")


def _failed(namespace: str, name: str) -> bool:
    """Raises with the status when the repository cannot sync (a ComparisonError, say)."""
    status = repo_status(namespace, name)
    problems = [c for c in status.get("conditions") or [] if c.get("type", "").endswith("Error")]
    assert not problems, status
    return False


def _refreshed(namespace: str, name: str, token: str) -> Callable[[], bool]:
    return lambda: _handled(namespace, name) == token


def _lease_holder() -> str:
    lease = get("-n", SYSTEM, "lease", "trainops-gitops")
    return str(lease["spec"].get("holderIdentity") or "")


def _kill_container(pod: dict[str, Any]) -> None:
    """SIGKILL the pod's container in its node's containerd, as a crash does (no SIGTERM, so
    the Lease is not released)."""
    (container,) = pod["status"]["containerStatuses"]
    cid = container["containerID"].removeprefix("containerd://")
    env = {
        **os.environ,
        "CONTAINERS_CONF": str(Path.home() / ".cache/trainops/kind/containers.conf"),
    }
    subprocess.run(
        [
            "podman",
            "exec",
            pod["spec"]["nodeName"],
            "ctr",
            "-n",
            "k8s.io",
            "task",
            "kill",
            "-s",
            "SIGKILL",
            cid,
        ],
        check=True,
        capture_output=True,
        timeout=30,
        env=env,
    )


def test_the_leader_killed_mid_sync_of_200_jobs_is_replaced_and_each_job_created_once(
    git_url: str,
) -> None:
    namespace = new_namespace("e2e-many")
    watch: Watch | None = None
    try:
        make_tenant(namespace)
        leader = eventually(_lease_holder, timeout=60, interval=1)
        leader_pod = get("-n", SYSTEM, "pod", leader.split("_")[0])
        # Started before the repository: what it lists first (nothing yet) it would report as
        # ADDED too, so no creation goes unseen.
        watch = Watch(namespace)
        apply(repository(namespace, "many", f"{git_url}/many.git", automated=True))

        def started() -> bool:
            assert watch is not None and watch.process.poll() is None, "kubectl get -w ended"
            return watch.added() >= 5 or _failed(namespace, "many")

        eventually(started, timeout=120, interval=0.05)
        _kill_container(leader_pod)
        killed_at, created_before = time.monotonic(), watch.added()
        assert created_before < MANY, "the sync was over before the leader was killed"

        new_leader = eventually(
            lambda: (h := _lease_holder()) != leader and h, timeout=60, interval=0.5
        )
        taken_over = time.monotonic() - killed_at
        status = eventually(lambda: synced(namespace, "many"), timeout=300, interval=2)
        assert status is not None
        eventually(lambda: watch is not None and watch.added() >= MANY, timeout=60, interval=0.5)
        # Nothing more comes: three refresh rounds of the new leader, each handled, change
        # nothing (a job created twice would show as DELETED + ADDED).
        for round_ in range(3):
            token = f"e2e-{round_}-{uuid.uuid4().hex[:6]}"
            kubectl(
                "-n",
                namespace,
                "annotate",
                "--overwrite",
                "jobrepository",
                "many",
                f"{REFRESH}={token}",
            )
            eventually(_refreshed(namespace, "many", token), timeout=120, interval=1)
        events = watch.stop()
        watch = None

        kinds = Counter(kind for kind, _, _ in events)
        assert kinds == {"ADDED": MANY}, kinds  # nothing deleted, modified jobs not counted
        added = Counter(name for _, name, _ in events)
        assert set(added) == {f"job-{i:03d}" for i in range(MANY)}, added
        assert max(added.values()) == 1, [n for n, c in added.items() if c > 1]
        live = get("-n", namespace, TF)["items"]
        assert {j["metadata"]["name"]: j["metadata"]["uid"] for j in live} == {
            name: uid for _, name, uid in events
        }
        assert {j["metadata"]["generation"] for j in live} == {1}
        assert status["summary"]["total"] == MANY, status["summary"]
        print(
            f"\nfailover: {created_before} of {MANY} jobs created when {leader} was killed; "
            f"{new_leader} took the Lease {taken_over:.1f} s later",
            file=sys.stderr,
        )
    finally:
        if watch is not None:
            watch.stop()
        drop_namespace(namespace)
