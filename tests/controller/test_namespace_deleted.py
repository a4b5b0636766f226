"""A job whose namespace is deleted: the controller's work for it ends (issue #19's review saw
Service creates retried in a deleted namespace). While the namespace terminates, its creates
are refused (retried after the refusal back-off, at least 1 s); once the namespace and the job
are gone, nothing of the job's is queued, processed or waiting on a timer, so nothing brings
it back: no object of that namespace is left to send an event."""

from __future__ import annotations

from controller.manager import Controller
from controller.reconciler import job_key
from kube import errors, resources
from kube.client import Client
from tests.controller.conftest import pods_of
from tests.support.cluster import aeventually
from tests.support.jobs import replica, tf_job


async def test_deleting_a_jobs_namespace_ends_the_controllers_work_for_the_job(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = tf_job(replica("worker", 2), name="doomed")
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)

    async def running() -> bool:
        return len(await pods_of(kclient, namespace, "doomed")) == 2

    await aeventually(running, timeout=20)
    key = job_key("TensorFlowTrainingJob", namespace, "doomed")
    await kclient.delete(resources.NAMESPACES, namespace)

    async def gone() -> bool:
        try:
            await kclient.get(resources.NAMESPACES, namespace)
        except errors.NotFound:
            return True
        return False

    # kube-controller-manager's namespace controller takes a few seconds; the embedded one less.
    await aeventually(gone, timeout=120, interval=0.2)
    # A refused create's retry may still be due (1 s, then 2 s, …): it finds no job and ends.
    await aeventually(lambda: not controller.queue.pending(key), timeout=15)
    assert controller.problems() == {}
