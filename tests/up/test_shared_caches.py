"""`trainops up`'s wiring caches each training-job kind once: the controller and GitOps are
added to ONE `kube.Manager` (`runtime.new_manager`, `up.add_controller`,
`up_gitops.start_gitops`, as `up.start_stack` does), so each job kind has one informer and one
watch, and a job created shows up in both components through that one cache."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.exposition import generate_latest

from controller.manager import Controller
from kube import Client, Manager, resources
from tests.controller.conftest import crds, kclient  # noqa: F401
from tests.gitops.conftest import repo_crd  # noqa: F401
from tests.support.cluster import aeventually
from tests.support.jobs import tf_job
from trainops.commands import runtime, up, up_gitops

JOB_KINDS = (resources.TFJOBS, resources.XGBJOBS)


@pytest.fixture
async def wired(
    kclient: Client,  # noqa: F811
    repo_crd: None,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[tuple[up.Stack, Manager, Controller]]:
    stack = up.Stack(tmp_path)
    # Leases off: the shared test cluster may hold this process's other tests' leases.
    manager = runtime.new_manager(kclient, leader_elect=False)
    controller = up.add_controller(stack, manager)
    await up_gitops.start_gitops(stack, manager, tmp_path, argparse.Namespace(repo=None))
    manager.start()
    try:
        await manager.wait_synced(timeout=20)
        yield stack, manager, controller
    finally:
        await manager.stop()


async def test_each_job_kind_is_cached_and_watched_once_for_controller_and_gitops(
    wired: tuple[up.Stack, Manager, Controller],
    kclient: Client,  # noqa: F811
    namespace: str,
) -> None:
    stack, manager, controller = wired
    gitops = stack.gitops
    job_caches = [i for i in manager.informers() if i.resource in JOB_KINDS]
    assert sorted(i.resource.kind for i in job_caches) == sorted(r.kind for r in JOB_KINDS)
    for informer in job_caches:
        kind = informer.resource.kind
        assert controller.jobs[kind] is informer is gitops.job_informers[kind]
    # Its watch starts right after the list: one watch request per kind, no relist.
    await aeventually(lambda: all(i.watches == 1 for i in job_caches), timeout=5)
    assert [i.relists for i in job_caches] == [0, 0]
    # Every cache of the process is one per key: no two informers list the same thing.
    keys = [(i.resource, i.namespace, i.label_selector) for i in manager.informers()]
    assert len(keys) == len(set(keys))

    job: dict[str, Any] = tf_job(name="shared")
    job["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, job)

    def seen_by_both() -> bool:
        by_gitops = [j for j in gitops.jobs() if j["metadata"]["namespace"] == namespace]
        by_controller = controller.jobs["TensorFlowTrainingJob"].get(namespace, "shared")
        return len(by_gitops) == 1 and by_gitops[0] is by_controller

    await aeventually(seen_by_both, timeout=10)
    text = b"".join(generate_latest(r) for r in stack.metrics_registries).decode()
    text += generate_latest(manager.metrics).decode()
    text += generate_latest(gitops.metrics.registry).decode()  # the component serves its own
    tf_cache = controller.jobs["TensorFlowTrainingJob"].name
    assert f'trainops_cache_watches_total{{cache="{tf_cache}"}} 1.0' in text
    assert "trainops_controller_jobs" in text and "trainops_gitops_syncs" in text
