"""A replica pod the API server refuses (422 Invalid) is reported as such: no SuccessfulCreate
for it, a FailedCreate warning, and ReplicaFailure True with the API server's reason — against
the real API server over loopback (no webhook here, as on a cluster where it was not yet
registered when the job was admitted)."""

from __future__ import annotations

from typing import Any

from controller.manager import Controller
from kube import resources
from kube.client import Client
from tests.controller.conftest import job_status, pods_of
from tests.support.cluster import aeventually
from tests.support.jobs import container, replica, tf_job

REASON = 'Invalid value: "2": must be less than or equal to cpu limit of 1'


async def _events(client: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    body = await client.list(resources.EVENTS, namespace)
    return [e for e in body["items"] if e["involvedObject"]["name"] == name]


async def test_a_refused_pod_is_named_in_the_status_and_not_reported_created(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    refused = container("tensorflow", limits={"cpu": "1"}, requests={"cpu": "2"})
    job = tf_job(replica("chief"), replica("worker", 1, containers=[refused]), name="cpu")
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)

    async def failed() -> dict[str, Any] | bool:
        status = await job_status(kclient, resources.TFJOBS, namespace, "cpu")
        conds = {c["type"]: c for c in status.get("conditions") or []}
        cond = conds.get("ReplicaFailure") or {}
        return status if cond.get("reason") == "FailedCreate" else False

    status = await aeventually(failed, timeout=15)
    cond = {c["type"]: c for c in status["conditions"]}["ReplicaFailure"]
    assert cond["status"] == "True"
    assert cond["message"].startswith("creating pod cpu-worker-0 was refused: ")
    assert REASON in cond["message"]
    assert status["phase"] == "Pending"

    async def both_events() -> list[dict[str, Any]] | bool:
        found = await _events(kclient, namespace, "cpu")
        reasons = {e["reason"] for e in found}
        return found if {"SuccessfulCreate", "FailedCreate"} <= reasons else False

    events = await aeventually(both_events, timeout=15)
    created = [e["message"] for e in events if e["reason"] == "SuccessfulCreate"]
    assert created == ["created pod cpu-chief-0"]
    refusals = [e for e in events if e["reason"] == "FailedCreate"]
    assert refusals[0]["type"] == "Warning"
    assert REASON in refusals[0]["message"]
    assert set(await pods_of(kclient, namespace, "cpu")) == {"cpu-chief-0"}

    # Another round (the job touched): the create is retried and refused again, and the
    # status keeps saying why instead of going back to "all pods are running normally".
    await kclient.patch(resources.TFJOBS, "cpu", {"metadata": {"labels": {"x": "1"}}}, namespace)

    async def retried() -> bool:
        found = await _events(kclient, namespace, "cpu")
        return any(e["reason"] == "FailedCreate" and e.get("count", 1) >= 2 for e in found)

    await aeventually(retried, timeout=15)
    again = await job_status(kclient, resources.TFJOBS, namespace, "cpu")
    assert {c["type"]: c for c in again["conditions"]}["ReplicaFailure"] == cond
    created_again = [
        e for e in await _events(kclient, namespace, "cpu") if e["reason"] == "SuccessfulCreate"
    ]
    assert [(e["message"], e.get("count", 1)) for e in created_again] == [
        ("created pod cpu-chief-0", 1)
    ]
