"""Where a reconcile reads its job (`controller.reconciler.JobReads`): the informer's cache, but
never older than this process's own last status write, and from the API server when the cache
may hold what another writer has overtaken. And its children (`Created`): the informers' caches
plus what this process created that they have not delivered yet.

The informer here lists once and stops, so its cache stays exactly as old as the test wants; the
writes are real ones to the API server.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controller.manager import Controller, ControllerSettings
from controller.reconciler import CHILD_BATCH_SECONDS, Created, JobReads, job_key
from kube import resources
from kube.client import Client
from kube.informer import Informer
from kube.manager import LeaderElection, Manager
from tests.support.cluster import aeventually
from tests.support.jobs import replica, tf_job

TF = resources.TFJOBS


def _pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


async def _frozen_pods(client: Client, namespace: str) -> Informer:
    informer = Informer(client, resources.PODS, namespace)
    task = asyncio.create_task(informer.run())
    assert await informer.wait_synced(timeout=15)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return informer


async def _job(client: Client, namespace: str, name: str) -> dict[str, Any]:
    job = copy.deepcopy(tf_job(replica("chief"), name=name))
    job["metadata"]["namespace"] = namespace
    return await client.create(TF, job)


async def _frozen_cache(client: Client, namespace: str) -> Informer:
    """An informer that listed once and watches no more."""
    informer = Informer(client, TF, namespace)
    task = asyncio.create_task(informer.run())
    assert await informer.wait_synced(timeout=15)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return informer


async def _set_status(client: Client, job: dict[str, Any], phase: str) -> dict[str, Any]:
    body = copy.deepcopy(job)
    body["status"] = {"phase": phase}
    return await client.replace(TF, body, subresource="status")


async def test_a_job_without_status_is_read_from_the_cache(kclient: Client, namespace: str) -> None:
    created = await _job(kclient, namespace, "cached")
    cache = await _frozen_cache(kclient, namespace)
    reads = JobReads(kclient, {"TensorFlowTrainingJob": cache})

    job = await reads.read(TF, namespace, "cached")

    assert job is cache.get(namespace, "cached")
    assert job is not None and job["metadata"]["uid"] == created["metadata"]["uid"]


async def test_the_reads_after_a_status_write_are_never_older_than_the_write(
    kclient: Client, namespace: str
) -> None:
    created = await _job(kclient, namespace, "written")
    cache = await _frozen_cache(kclient, namespace)
    reads = JobReads(kclient, {"TensorFlowTrainingJob": cache})
    assert await reads.read(TF, namespace, "written") is cache.get(namespace, "written")

    written = await _set_status(kclient, created, "Running")
    reads.remember(job_key("TensorFlowTrainingJob", namespace, "written"), written)
    job = await reads.read(TF, namespace, "written")

    stale = cache.get(namespace, "written")
    assert stale is not None and "status" not in stale  # the cache is one write behind
    assert job is not None and job["status"] == {"phase": "Running"}
    assert job["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]

    # The informer catches up: the cache is read again.
    fresh = await _frozen_cache(kclient, namespace)
    reads.informers["TensorFlowTrainingJob"] = fresh
    assert await reads.read(TF, namespace, "written") is fresh.get(namespace, "written")


async def test_a_job_with_a_status_first_seen_this_term_is_read_from_the_api_server(
    kclient: Client, namespace: str
) -> None:
    created = await _job(kclient, namespace, "other-leader")
    first = await _set_status(kclient, created, "Pending")
    cache = await _frozen_cache(kclient, namespace)
    # Another leader writes after this replica's cache saw the job.
    await _set_status(kclient, first, "Running")
    reads = JobReads(kclient, {"TensorFlowTrainingJob": cache})

    job = await reads.read(TF, namespace, "other-leader")

    assert job is not None and job["status"] == {"phase": "Running"}
    cached = cache.get(namespace, "other-leader")
    assert cached is not None and cached["status"] == {"phase": "Pending"}


async def test_after_forget_the_next_read_goes_to_the_api_server(
    kclient: Client, namespace: str
) -> None:
    created = await _job(kclient, namespace, "conflicted")
    cache = await _frozen_cache(kclient, namespace)
    reads = JobReads(kclient, {"TensorFlowTrainingJob": cache})
    key = job_key("TensorFlowTrainingJob", namespace, "conflicted")
    assert await reads.read(TF, namespace, "conflicted") is cache.get(namespace, "conflicted")
    await _set_status(kclient, created, "Running")  # someone else: a Conflict for us

    reads.forget(key)
    job = await reads.read(TF, namespace, "conflicted")

    assert job is not None and job["status"] == {"phase": "Running"}


async def test_a_job_neither_cached_nor_on_the_api_server_reads_as_none(
    kclient: Client, namespace: str
) -> None:
    await _job(kclient, namespace, "gone")
    await kclient.delete(TF, "gone", namespace)
    cache = await _frozen_cache(kclient, namespace)
    reads = JobReads(kclient, {"TensorFlowTrainingJob": cache})

    assert cache.get(namespace, "gone") is None
    assert await reads.read(TF, namespace, "gone") is None


async def test_a_child_created_a_moment_ago_is_seen_until_its_informer_has_it(
    kclient: Client, namespace: str
) -> None:
    await kclient.create(resources.PODS, _pod(namespace, "other"))
    behind = await _frozen_pods(kclient, namespace)
    created = Created()
    pod = await kclient.create(resources.PODS, _pod(namespace, "mine"))
    created.add("owner-uid", "Pod", pod)

    seen = created.with_cached("owner-uid", "Pod", behind, behind.list())
    assert sorted(p["metadata"]["name"] for p in seen) == ["mine", "other"]
    assert created.with_cached("owner-uid", "Service", behind, []) == []

    caught_up = await _frozen_pods(kclient, namespace)
    seen = created.with_cached("owner-uid", "Pod", caught_up, caught_up.list())
    assert sorted(p["metadata"]["name"] for p in seen) == ["mine", "other"]
    assert seen[0] is caught_up.get(namespace, seen[0]["metadata"]["name"])
    # Forgotten once seen: even a cache that never had it no longer gets it added.
    assert created.with_cached("owner-uid", "Pod", caught_up, []) == []


async def test_a_child_created_then_deleted_before_its_informer_looked_is_not_kept(
    kclient: Client, namespace: str
) -> None:
    created = Created()
    pod = await kclient.create(resources.PODS, _pod(namespace, "short-lived"))
    created.add("owner-uid", "Pod", pod)
    await kclient.delete(resources.PODS, "short-lived", namespace, grace_period_seconds=0)
    after = await _frozen_pods(kclient, namespace)

    assert after.get(namespace, "short-lived") is None
    assert created.with_cached("owner-uid", "Pod", after, after.list()) == []


async def test_the_controllers_pod_and_service_caches_keep_metadata_status_and_restart_policy(
    controller: Controller, kclient: Client, namespace: str
) -> None:
    job = copy.deepcopy(tf_job(replica("chief"), replica("worker", 2), name="lean"))
    job["metadata"]["namespace"] = namespace
    await kclient.create(TF, job)

    def in_namespace(informer: Informer) -> list[dict[str, Any]]:
        return [o for o in informer.list() if o["metadata"]["namespace"] == namespace]

    async def cached() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | bool:
        # (the two informers' watches deliver independently: wait for both)
        pods, services = (
            in_namespace(controller.children.pods),
            in_namespace(controller.children.services),
        )
        return (pods, services) if len(pods) == 3 and len(services) == 3 else False

    pods, services = await aeventually(cached, timeout=15)
    for obj in [*pods, *services]:
        assert "managedFields" not in obj["metadata"]
        assert obj["metadata"]["ownerReferences"][0]["name"] == "lean"
    # Of a pod's spec only its restartPolicy (whether the kubelet restarts it in place).
    assert [p["spec"] for p in pods] == [{"restartPolicy": "Never"}] * 3
    assert all("spec" not in s for s in services)
    # The API server still has the whole pod: only the cache is lean.
    live = await kclient.get(resources.PODS, pods[0]["metadata"]["name"], namespace)
    assert live["spec"]["containers"]


async def test_a_jobs_first_status_is_written_once_with_the_pods_it_created(
    kclient: Client, controller: Controller, namespace: str
) -> None:
    """The first reconcile creates and leaves the status to the reconcile the pods' events bring
    0.5 s later: one status, planned with what was created; no "Creating" status without pod
    uids is ever stored (each status write costs the API server every CEL rule of the CRD;
    docs/CONTROLLER.md)."""
    listed = await kclient.list(TF, namespace)
    version = listed["metadata"]["resourceVersion"]
    job = copy.deepcopy(tf_job(replica("chief"), replica("worker", 2), name="first-write"))
    job["metadata"]["namespace"] = namespace
    await kclient.create(TF, job)
    statuses: list[dict[str, Any]] = []

    async def first_status() -> None:
        async for kind, obj in kclient.watch(TF, namespace, resource_version=version):
            if kind == "MODIFIED" and obj.get("status"):
                statuses.append(obj["status"])
                return

    await asyncio.wait_for(first_status(), timeout=30)
    (status,) = statuses
    replicas = [r for task in status["tasks"] for r in task["replicas"]]
    assert len(replicas) == 3
    assert all(r.get("uid") and r["phase"] == "Pending" for r in replicas), replicas
    assert status["aggregate"].get("creating", 0) == 0
    initialized = [c for c in status["conditions"] if c["type"] == "Initialized"]
    assert initialized and initialized[0]["status"] == "True"


async def test_a_version_this_process_wrote_or_read_is_known_and_no_other(
    kclient: Client, namespace: str
) -> None:
    created = await _job(kclient, namespace, "known")
    reads = JobReads(kclient)  # no informer: every read is a GET
    key = job_key("TensorFlowTrainingJob", namespace, "known")
    assert not reads.is_known(key, created)

    read = await reads.read(TF, namespace, "known")
    assert read is not None and reads.is_known(key, read)

    written = await _set_status(kclient, read, "Pending")
    assert not reads.is_known(key, written)  # someone else's write

    reads.remember(key, written)  # as the reconciler does with what its write returned
    assert reads.is_known(key, written)
    assert not reads.is_known(key, read)
    reads.drop(key)
    assert not reads.is_known(key, written)


async def test_the_echo_of_the_controllers_own_status_write_does_not_queue_its_job(
    kclient: Client, namespace: str
) -> None:
    """Every status write comes back as a watch event; reconciling for it saw whatever children
    had moved meanwhile and wrote again at once, so their 0.5 s batching bought nothing and a
    chief's exit waited behind that write. Anyone else's change still queues the job."""
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    controller = Controller(manager, ControllerSettings())  # not started: its queue only fills
    on_job = controller._on_job("TensorFlowTrainingJob")
    created = await _job(kclient, namespace, "echo")
    key = job_key("TensorFlowTrainingJob", namespace, "echo")
    written = await _set_status(kclient, created, "Pending")
    controller.reads.remember(key, written)

    on_job("MODIFIED", written, None)
    assert len(controller.queue) == 0

    edited = await _set_status(kclient, written, "Running")
    on_job("MODIFIED", edited, None)
    assert len(controller.queue) == 1


async def test_a_first_reconcile_creates_the_children_and_leaves_the_status_to_their_events(
    kclient: Client, namespace: str
) -> None:
    manager = Manager(kclient, leader_election=LeaderElection(enabled=False))
    controller = Controller(manager, ControllerSettings())  # not started: we reconcile by hand
    job = copy.deepcopy(tf_job(replica("chief"), replica("worker", 2), name="deferred"))
    job["metadata"]["namespace"] = namespace
    await kclient.create(TF, job)

    requeue = await controller.reconciler.reconcile(job_key(TF.kind, namespace, "deferred"))

    assert requeue == CHILD_BATCH_SECONDS
    pods = (await kclient.list(resources.PODS, namespace))["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == [
        "deferred-chief-0",
        "deferred-worker-0",
        "deferred-worker-1",
    ]
    stored = await kclient.get(TF, "deferred", namespace)
    assert not stored.get("status")
