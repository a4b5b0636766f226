"""A changed `tensorboardSpec` updates the TensorBoard Deployment in place (image, log paths,
resources), against an API server (docs/CONTROLLER.md, TensorBoard)."""

from __future__ import annotations

from typing import Any

from controller.manager import Controller
from controller.tensorboard import SPEC_HASH
from kube import resources
from kube.client import Client
from tests.support.cluster import aeventually
from tests.support.jobs import replica, tf_job

BEFORE = {"image": "t9kpublic/tensorboard:2.11.0", "trainingLogFilesets": ["t9k://pvc/logs/a"]}
AFTER = {
    "image": "t9kpublic/tensorboard:2.12.0",
    "trainingLogFilesets": ["t9k://pvc/logs/a", "t9k://pvc/other/b"],
    "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}},
}


async def _deployment(client: Client, namespace: str, name: str) -> dict[str, Any] | bool:
    body = await client.list(resources.DEPLOYMENTS, namespace)
    found = [d for d in body["items"] if d["metadata"]["name"] == f"{name}-tensorboard"]
    return found[0] if found else False


async def test_a_changed_tensorboard_spec_updates_the_deployment(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = tf_job(replica("worker", 1), name="tb", tensorboardSpec=BEFORE)
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)
    first = await aeventually(lambda: _deployment(kclient, namespace, "tb"), timeout=15)
    container = first["spec"]["template"]["spec"]["containers"][0]
    assert (container["image"], container["args"][0]) == (
        BEFORE["image"],
        "--logdir=/t9k/pvc/logs/a",
    )

    await kclient.patch(resources.TFJOBS, "tb", {"spec": {"tensorboardSpec": AFTER}}, namespace)

    async def updated() -> dict[str, Any] | bool:
        found = await _deployment(kclient, namespace, "tb")
        if not isinstance(found, dict):
            return False
        hash_now = found["metadata"].get("annotations", {}).get(SPEC_HASH)
        return found if hash_now != first["metadata"]["annotations"][SPEC_HASH] else False

    after = await aeventually(updated, timeout=15)
    assert after["metadata"]["uid"] == first["metadata"]["uid"]  # the same Deployment
    assert after["metadata"]["generation"] > first["metadata"]["generation"]
    pod = after["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == AFTER["image"]
    assert container["args"][0] == "--logdir_spec=logs/a:/t9k/pvc/logs/a,other/b:/t9k/pvc/other/b"
    assert container["resources"] == AFTER["resources"]
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]] == ["logs", "other"]

    async def settled() -> bool:
        job_now = await kclient.get(resources.TFJOBS, "tb", namespace)
        tb = (job_now.get("status") or {}).get("tensorboard") or {}
        return tb.get("action") == "NOP"

    await aeventually(settled, timeout=15)
    body = await kclient.list(resources.EVENTS, namespace)
    reasons = [e["reason"] for e in body["items"] if e["involvedObject"]["name"] == "tb"]
    assert "TensorBoardUpdated" in reasons
