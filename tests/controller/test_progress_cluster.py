"""Training progress end to end against an API server: the controller's progress endpoint, the
env it injects into replica pods, a process reporting with that env (trainops_progress.py, as
a pod would), `status.progress`, the `kubectl get` columns, the curves' ConfigMap, and the
refusals (another job's token, no token, bad fields, too big, too fast).

No kubelet: the test reads each pod's env from the API server and runs the reporting process
itself, with exactly that env. Works the same on the reference tier (nothing here reads the
embedded server's internals).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from controller.manager import Controller, ControllerSettings
from controller.progress_server import (
    CURVES_OF,
    ENV_CA,
    ENV_REPLICA,
    ENV_TOKEN,
    ENV_URL,
    ProgressService,
    ProgressSettings,
    curves_name,
)
from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.controller.conftest import job_status, pods_of
from tests.support.cluster import Cluster, aeventually
from tests.support.jobs import replica, tf_job

TF = resources.TFJOBS
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def progress_controller(kclient: Client, namespace: str) -> AsyncIterator[Controller]:
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    settings = ProgressSettings(
        bind="127.0.0.1",
        port=0,
        namespace=namespace,
        write_seconds=1.0,
        history_seconds=0.5,
        rate=5.0,
        burst=10.0,
    )
    running = Controller(manager, ControllerSettings(workers=2, progress=settings))
    assert running.progress is not None
    await running.progress.start()
    manager.start()
    try:
        await running.wait_synced(timeout=20)
        yield running
    finally:
        await manager.stop()
        await running.progress.stop()


def _in(namespace: str, job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["metadata"]["namespace"] = namespace
    return job


async def _env_of(client: Client, namespace: str, job: str, pod: str) -> dict[str, str]:
    async def check() -> dict[str, Any] | bool:
        return (await pods_of(client, namespace, job)).get(pod) or False

    found: dict[str, Any] = await aeventually(check, timeout=15)
    (main,) = [c for c in found["spec"]["containers"] if c["name"] == "tensorflow"]
    return {e["name"]: e.get("value", "") for e in main.get("env") or []}


def _post(url: str, token: str | None, ca: str, body: bytes) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    context = ssl.create_default_context(cadata=ca)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


REPORTER = """
import sys, time
import trainops_progress as p
r = p.Reporter(min_interval=0)
ok1 = r.report(step=10, total_steps=100, metrics={"loss": 2.0})
time.sleep(0.5)  # the training loop's next steps
ok2 = r.report(step=30, total_steps=100, epoch=1, metrics={"loss": 1.0, "accuracy": 0.5})
print(ok1, ok2, r.sent)
"""


async def test_a_pod_process_reports_and_status_kubectl_and_curves_show_it(
    progress_controller: Controller, kclient: Client, namespace: str, cluster: Cluster
) -> None:
    await kclient.create(TF, _in(namespace, tf_job(replica("worker", 2), name="trained")))
    env = await _env_of(kclient, namespace, "trained", "trained-worker-0")
    uid = (await kclient.get(TF, "trained", namespace))["metadata"]["uid"]
    assert env[ENV_URL].endswith(f"/v1/progress/{namespace}/tensorflowtrainingjobs/trained")
    assert env[ENV_URL].startswith("https://127.0.0.1:")
    assert env[ENV_REPLICA] == "worker-0"
    assert env[ENV_CA].startswith("-----BEGIN CERTIFICATE-----")
    assert len(env[ENV_TOKEN]) == 43
    assert "TF_CONFIG" in env  # the controller's own env is still there
    other = await _env_of(kclient, namespace, "trained", "trained-worker-1")
    assert other[ENV_REPLICA] == "worker-1" and other[ENV_TOKEN] == env[ENV_TOKEN]

    pod_env = {k: v for k, v in env.items() if k.startswith("TRAINOPS_PROGRESS_")}
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", REPORTER],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT), **pod_env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "2"], done.stderr

    async def progress() -> dict[str, Any] | bool:
        status = await job_status(kclient, TF, namespace, "trained")
        got = status.get("progress") or {}
        return got if got.get("step") == 30 else False

    shown = await aeventually(progress, timeout=15)
    assert shown["percent"] == 30
    assert shown["totalSteps"] == 100
    assert shown["metrics"] == {"accuracy": 0.5, "loss": 1.0}
    assert shown["metricsFrom"] == "worker-0"
    assert shown["stepsPerSecond"] > 0
    assert shown["eta"].endswith("s") and shown["etaTime"] and shown["updatedAt"]

    table = cluster.kubectl("get", "tfj", "trained", "-n", namespace).stdout.splitlines()
    header = table[0].split()
    assert header[4:6] == ["PROGRESS", "ETA"]
    row = table[1].split()
    assert row[header.index("PROGRESS")] == "30"
    assert row[header.index("ETA")] == shown["eta"]

    async def curves() -> dict[str, Any] | bool:
        try:
            cm = await kclient.get(resources.CONFIGMAPS, curves_name(uid), namespace)
        except errors.NotFound:
            return False
        doc = json.loads(cm["data"]["progress.json"])
        loss = doc["replicas"].get("worker-0", {}).get("loss")
        return cm if loss == [[10.0, 2.0], [30.0, 1.0]] else False

    cm = await aeventually(curves, timeout=15)
    assert cm["metadata"]["labels"][CURVES_OF] == uid
    doc = json.loads(cm["data"]["progress.json"])
    assert doc["replicas"]["worker-0"]["accuracy"] == [[30.0, 0.5]]

    # The job deleted: its curves go with the next sweep (no ownerReference across namespaces).
    await kclient.delete(TF, "trained", namespace)

    async def swept() -> bool:
        await progress_controller.progress.sweep()  # type: ignore[union-attr]
        try:
            await kclient.get(resources.CONFIGMAPS, curves_name(uid), namespace)
        except errors.NotFound:
            return True
        return False

    await aeventually(swept, timeout=15)


async def test_a_token_writes_its_own_jobs_progress_only_and_bad_reports_are_refused(
    progress_controller: Controller, kclient: Client, namespace: str
) -> None:
    await kclient.create(TF, _in(namespace, tf_job(replica("worker"), name="mine")))
    await kclient.create(TF, _in(namespace, tf_job(replica("worker"), name="theirs")))
    mine = await _env_of(kclient, namespace, "mine", "mine-worker-0")
    theirs = await _env_of(kclient, namespace, "theirs", "theirs-worker-0")
    ca, token = mine[ENV_CA], mine[ENV_TOKEN]
    good = json.dumps({"replica": "worker-0", "step": 5, "totalSteps": 10}).encode()

    async def post(url: str, tok: str | None, body: bytes) -> tuple[int, dict[str, Any]]:
        return await asyncio.to_thread(_post, url, tok, ca, body)

    # Another job's token on this job's URL: refused, and that job's status stays untouched.
    code, answer = await post(theirs[ENV_URL], token, good)
    assert code == 401
    assert answer["error"] == (
        f"the token is not valid for tensorflowtrainingjobs {namespace}/theirs (or the job is gone)"
    )
    code, answer = await post(mine[ENV_URL], None, good)
    assert (code, answer["error"]) == (
        401,
        "no token: send Authorization: Bearer ${TRAINOPS_PROGRESS_TOKEN}",
    )
    base = mine[ENV_URL].split("/v1/")[0]
    code, answer = await post(f"{base}/v1/progress/{namespace}/pods/mine", token, good)
    assert code == 404 and "not a training job kind" in answer["error"]
    code, answer = await post(mine[ENV_URL], token, b"{not json")
    assert code == 400 and answer["error"].startswith("the body is not JSON")
    bad = {"replica": "worker-0", "step": -1, "metrics": {"loss": "NaN?"}}
    code, answer = await post(mine[ENV_URL], token, json.dumps(bad).encode())
    assert code == 422
    assert [f["field"] for f in answer["fields"]] == ["step", "metrics.loss"]
    code, answer = await post(mine[ENV_URL], token, b" " * 9000)
    assert code == 413
    stranger = json.dumps({"replica": "worker-7", "step": 1}).encode()  # the job has worker-0
    code, answer = await post(mine[ENV_URL], token, stranger)
    assert (code, answer["fields"]) == (
        422,
        [{"field": "replica", "message": "not a replica of this job"}],
    )

    # Its own URL: accepted, then the job's rate (burst 10, 5 a second) says 429.
    codes = [(await post(mine[ENV_URL], token, good))[0] for _ in range(14)]
    assert codes[0] == 202 and 429 in codes

    async def progress() -> dict[str, Any] | bool:
        got = (await job_status(kclient, TF, namespace, "mine")).get("progress") or {}
        return got if got.get("step") == 5 else False

    await aeventually(progress, timeout=15)
    # "theirs" was reconciled meanwhile (its pods were created) and has no progress.
    for _ in range(3):
        await progress_controller.reconciler.reconcile(f"TensorFlowTrainingJob/{namespace}/theirs")
    assert "progress" not in await job_status(kclient, TF, namespace, "theirs")


async def test_a_standby_answers_503_and_a_new_leader_continues_the_curves(
    progress_controller: Controller, kclient: Client, namespace: str
) -> None:
    await kclient.create(TF, _in(namespace, tf_job(replica("worker"), name="ha")))
    env = await _env_of(kclient, namespace, "ha", "ha-worker-0")
    uid = (await kclient.get(TF, "ha", namespace))["metadata"]["uid"]
    ca, token, url = env[ENV_CA], env[ENV_TOKEN], env[ENV_URL]

    def body(step: int, loss: float) -> bytes:
        return json.dumps({"replica": "worker-0", "step": step, "metrics": {"loss": loss}}).encode()

    assert (await asyncio.to_thread(_post, url, token, ca, body(1, 3.0)))[0] == 202

    async def curve(points: list[list[float]]) -> bool:
        try:
            cm = await kclient.get(resources.CONFIGMAPS, curves_name(uid), namespace)
        except errors.NotFound:
            return False
        doc = json.loads(cm["data"]["progress.json"])
        return bool(doc["replicas"]["worker-0"]["loss"] == points)

    await aeventually(lambda: curve([[1.0, 3.0]]), timeout=15)

    # Another replica of the controller: the same Secret (so the same CA and token key).
    assert progress_controller.progress is not None
    leading = False
    other = ProgressService(
        kclient,
        progress_controller.jobs,
        progress_controller.progress.settings,
        enqueue=lambda key, delay: None,
        is_leader=lambda: leading,
    )
    await other.start()
    try:
        assert other.keys == progress_controller.progress.keys
        other_url = url.replace(progress_controller.progress.base_url, other.base_url)
        code, answer = await asyncio.to_thread(_post, other_url, token, ca, body(2, 2.0))
        assert (code, answer) == (
            503,
            {"error": "this controller replica does not lead: try again"},
        )
        leading = True  # it took over: it knows nothing yet, and continues what is stored
        code, _ = await asyncio.to_thread(_post, other_url, token, ca, body(2, 2.0))
        assert code == 202
        await other.flush_history()
        assert await curve([[1.0, 3.0], [2.0, 2.0]])
    finally:
        await other.stop()


async def test_reports_reach_the_status_in_batches_not_one_write_each(
    progress_controller: Controller, kclient: Client, namespace: str
) -> None:
    """16 reports in 4 s, with summaries at most every second (the fixture's write_seconds):
    at most one status write a second, not one per report."""
    await kclient.create(TF, _in(namespace, tf_job(replica("worker"), name="batched")))
    env = await _env_of(kclient, namespace, "batched", "batched-worker-0")

    async def settled() -> dict[str, Any] | bool:
        job = await kclient.get(TF, "batched", namespace)
        return job if (job.get("status") or {}).get("phase") else False

    job = await aeventually(settled, timeout=15)  # the first status, before any report
    writes: list[int] = []

    async def count() -> None:
        async for kind, obj in kclient.watch(
            TF,
            namespace,
            resource_version=job["metadata"]["resourceVersion"],
            field_selector="metadata.name=batched",
        ):
            if kind == "MODIFIED":
                writes.append(((obj.get("status") or {}).get("progress") or {}).get("step", 0))

    watching = asyncio.create_task(count())
    try:
        for step in range(1, 17):
            body = json.dumps({"replica": "worker-0", "step": step, "totalSteps": 16}).encode()
            code, _ = await asyncio.to_thread(
                _post, env[ENV_URL], env[ENV_TOKEN], env[ENV_CA], body
            )
            assert code == 202
            await asyncio.sleep(0.25)  # the training loop's pace, not a wait for an outcome
        await aeventually(lambda: bool(writes) and writes[-1] == 16, timeout=10)
    finally:
        watching.cancel()
    assert 2 <= len(writes) <= 6, writes  # 4 s of reports, at most one summary a second
    assert writes == sorted(writes)
