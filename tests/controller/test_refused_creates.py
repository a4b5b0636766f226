"""Replica creates the API server refuses with 403 — a policy engine's admission webhook, a
ResourceQuota — are surfaced and retried (docs/CONTROLLER.md, "Refused creates"):

- a Warning FailedCreate event and ReplicaFailure=True/FailedCreate with the API server's
  message, the job staying Pending, while the create is retried on its own (no change to the
  job) with a back-off bounded to 5 minutes;
- a change to a ResourceQuota of the job's namespace retries it at once, not at the next
  back-off step.

The policy engine is a validating webhook on loopback that denies the job's pods: the embedded
API server and kube-apiserver both call it. The quota test needs an API server that enforces
quotas (kube-apiserver's ResourceQuota admission with the quota controller: the reference tier).
"""

from __future__ import annotations

import base64
import contextlib
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from certs import pki
from controller.manager import Controller
from controller.status import parse_time
from kube import errors, resources
from kube.client import Client
from tests.controller.conftest import job_status, pods_of
from tests.support.cluster import Cluster, aeventually
from tests.support.jobs import replica, tf_job

POLICY = "no training pods on fridays"
HOOK = "deny.policy.trainops.test"


class DenyingPolicy:
    """A TLS validating webhook on loopback that denies every pod it is asked about."""

    def __init__(self) -> None:
        self.ca = pki.new_ca("refusal-test-ca")
        self.serving = pki.new_serving_cert(self.ca, ["127.0.0.1"])
        self.port = 0
        self.asked = 0

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.asked += 1
        response = {
            "uid": review["request"]["uid"],
            "allowed": False,
            "status": {"code": 403, "reason": "Forbidden", "message": POLICY},
        }
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        return web.json_response({**body, "response": response})

    def configuration(
        self, name: str, job: str, *, resource: str = "pods", operation: str = "CREATE"
    ) -> dict[str, Any]:
        group = "apps" if resource == "deployments" else ""
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [
                {
                    "name": HOOK,
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{self.port}/validate",
                        "caBundle": base64.b64encode(self.ca.cert_pem).decode(),
                    },
                    "rules": [
                        {
                            "apiGroups": [group],
                            "apiVersions": ["v1"],
                            "operations": [operation],
                            "resources": [resource],
                            "scope": "Namespaced",
                        }
                    ],
                    "objectSelector": {"matchLabels": {"batch.tensorstack.dev/job-name": job}},
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 5,
                }
            ],
        }


@pytest.fixture
async def policy() -> AsyncIterator[DenyingPolicy]:
    hook = DenyingPolicy()
    app = web.Application()
    app.router.add_post("/validate", hook.handle)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(hook.serving.cert_pem)
        key.write_bytes(hook.serving.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    hook.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield hook
    finally:
        await runner.cleanup()


async def _events(client: Client, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    body = await client.list(resources.EVENTS, namespace)
    return [
        e
        for e in body["items"]
        if e["involvedObject"]["name"] == name and e.get("reason") == reason
    ]


async def _refused(client: Client, namespace: str, name: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | bool:
        status = await job_status(client, resources.TFJOBS, namespace, name)
        cond = {c["type"]: c for c in status.get("conditions") or []}.get("ReplicaFailure") or {}
        return cond if cond.get("reason") == "FailedCreate" else False

    cond: dict[str, Any] = await aeventually(check, timeout=20)
    return cond


def _age(cond: dict[str, Any]) -> float:
    since = parse_time(cond["lastTransitionTime"])
    assert since is not None
    return (datetime.now(UTC) - since).total_seconds()


async def test_a_pod_a_policy_webhook_refuses_is_surfaced_retried_and_created_once_allowed(
    controller: Controller, kclient: Client, namespace: str, policy: DenyingPolicy
) -> None:
    name = f"policy-{namespace}"[:40].rstrip("-")
    config = policy.configuration(f"trainops-test-{namespace}", name)
    await kclient.create(resources.VALIDATING_WEBHOOK_CONFIGURATIONS, config)
    try:
        job = tf_job(replica("worker", 1), name=name)
        job["metadata"]["namespace"] = namespace
        await kclient.create(resources.TFJOBS, job)

        cond = await _refused(kclient, namespace, name)
        assert cond["status"] == "True"
        assert cond["message"].startswith(f"creating pod {name}-worker-0 was refused: ")
        assert f'admission webhook "{HOOK}" denied the request: {POLICY}' in cond["message"]
        status = await job_status(kclient, resources.TFJOBS, namespace, name)
        assert status["phase"] == "Pending"
        assert await pods_of(kclient, namespace, name) == {}

        # Retried with nothing changed on the job: the recorder folds the repeats into one
        # Warning whose count grows, and the condition keeps its first transition time.
        async def retried() -> list[dict[str, Any]] | bool:
            found = await _events(kclient, namespace, name, "FailedCreate")
            return found if found and found[0].get("count", 1) >= 3 else False

        [event] = await aeventually(retried, timeout=30)
        assert event["type"] == "Warning"
        assert POLICY in event["message"]
        assert (await _refused(kclient, namespace, name)) == cond

        # Once the refusal has lasted 9 s, the back-off waits until it has lasted ~16 s. A
        # quota of the namespace changing (here: created) retries at once instead.
        await aeventually(lambda: _age(cond) >= 9, timeout=30)
        await kclient.delete(
            resources.VALIDATING_WEBHOOK_CONFIGURATIONS, config["metadata"]["name"]
        )
        quota = {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "roomy", "namespace": namespace},
            "spec": {"hard": {"pods": "100"}},
        }
        changed = time.monotonic()
        await kclient.create(resources.RESOURCEQUOTAS, quota)

        async def created() -> bool:
            return f"{name}-worker-0" in await pods_of(kclient, namespace, name)

        await aeventually(created, timeout=5)
        assert _age(cond) < 16, "created by the back-off's retry, not by the quota change"
        assert time.monotonic() - changed < 5
    finally:
        with contextlib.suppress(errors.NotFound):
            await kclient.delete(
                resources.VALIDATING_WEBHOOK_CONFIGURATIONS, config["metadata"]["name"]
            )

    # Created: reported, and the condition clears once the pod exists.
    async def healthy() -> bool:
        status = await job_status(kclient, resources.TFJOBS, namespace, name)
        cond = {c["type"]: c for c in status.get("conditions") or []}.get("ReplicaFailure") or {}
        return cond.get("status") == "False"

    await aeventually(healthy, timeout=15)

    # Events go out through the controller's own buffered loop: they may follow the status.
    async def created_events() -> list[str] | bool:
        events = await _events(kclient, namespace, name, "SuccessfulCreate")
        return [e["message"] for e in events] or False

    assert await aeventually(created_events, timeout=15) == [f"created pod {name}-worker-0"]


async def test_a_pod_over_the_namespaces_quota_is_surfaced_and_created_when_the_quota_grows(
    cluster: Cluster, controller: Controller, kclient: Client, namespace: str
) -> None:
    if cluster.is_embedded:
        pytest.skip(
            "the embedded API server stores ResourceQuotas but does not enforce them; "
            "runs on the reference tier (hack/reference-tests)"
        )
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "one-pod", "namespace": namespace},
        "spec": {"hard": {"pods": "1"}},
    }
    await kclient.create(resources.RESOURCEQUOTAS, quota)

    async def enforced() -> bool:
        live = await kclient.get(resources.RESOURCEQUOTAS, "one-pod", namespace)
        return (live.get("status") or {}).get("hard", {}).get("pods") == "1"

    await aeventually(enforced, timeout=30)  # the quota controller has filled in its status
    job = tf_job(replica("worker", 2), name="quota")
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)

    cond = await _refused(kclient, namespace, "quota")
    assert cond["status"] == "True"
    assert "was refused: " in cond["message"]
    assert (
        "is forbidden: exceeded quota: one-pod, requested: pods=1, used: pods=1, limited: pods=1"
        in (cond["message"])
    )
    assert len(await pods_of(kclient, namespace, "quota")) == 1

    async def warned() -> list[dict[str, Any]] | bool:
        return await _events(kclient, namespace, "quota", "FailedCreate") or False

    [event] = await aeventually(warned, timeout=15)
    assert event["type"] == "Warning"
    assert "exceeded quota: one-pod" in event["message"]

    await kclient.patch(
        resources.RESOURCEQUOTAS, "one-pod", {"spec": {"hard": {"pods": "2"}}}, namespace
    )

    async def both() -> bool:
        return len(await pods_of(kclient, namespace, "quota")) == 2

    await aeventually(both, timeout=15)

    async def healthy() -> bool:
        status = await job_status(kclient, resources.TFJOBS, namespace, "quota")
        conds = {c["type"]: c for c in status.get("conditions") or []}
        return (conds.get("ReplicaFailure") or {}).get("status") == "False"

    await aeventually(healthy, timeout=15)


async def test_a_refused_tensorboard_update_is_a_warning_not_a_failing_reconcile(
    controller: Controller, kclient: Client, namespace: str, policy: DenyingPolicy
) -> None:
    name = f"tbpolicy-{namespace}"[:40].rstrip("-")
    board = {"image": "t9kpublic/tensorboard:2.11.0", "trainingLogFilesets": ["t9k://pvc/logs"]}
    job = tf_job(replica("worker", 1), name=name, tensorboardSpec=board)
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)

    async def deployed() -> bool:
        body = await kclient.list(resources.DEPLOYMENTS, namespace)
        return any(d["metadata"]["name"] == f"{name}-tensorboard" for d in body["items"])

    await aeventually(deployed, timeout=15)
    config = policy.configuration(
        f"trainops-test-tb-{namespace}", name, resource="deployments", operation="UPDATE"
    )
    await kclient.create(resources.VALIDATING_WEBHOOK_CONFIGURATIONS, config)
    try:
        change = {"spec": {"tensorboardSpec": {**board, "image": "t9kpublic/tensorboard:2.12.0"}}}
        await kclient.patch(resources.TFJOBS, name, change, namespace)

        async def warned() -> list[dict[str, Any]] | bool:
            return await _events(kclient, namespace, name, "FailedUpdate") or False

        [event] = await aeventually(warned, timeout=15)
        assert event["type"] == "Warning"
        assert event["message"].startswith(f"updating Deployment {name}-tensorboard: ")
        assert POLICY in event["message"]
        status = await job_status(kclient, resources.TFJOBS, namespace, name)
        assert status["tensorboard"]["action"] == "UPDATE"
        assert controller.problems() == {}
    finally:
        with contextlib.suppress(errors.NotFound):
            await kclient.delete(
                resources.VALIDATING_WEBHOOK_CONFIGURATIONS, config["metadata"]["name"]
            )
