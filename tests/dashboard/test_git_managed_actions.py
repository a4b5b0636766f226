"""Pause, resume and delete of a job a repository deploys, through the HTTP API: never silently
undone (issue 16, item 3). A pause or resume holds — the field is the person's while the
annotation gitops.trainops.dev/held-fields names it — and a delete is refused while the
repository exists. The real reconciler with self-heal, real git (tests/gitops/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

import dashboard
from gitops.api import routes as api
from gitops.runtime.manager import GitOpsReconciler
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from tests.dashboard.dom import parse
from tests.gitops import conftest as gitops_fixtures
from tests.gitops.conftest import (
    Remote,
    create_repository,
    repository,
    resource_entry,
    tf_job_yaml,
    wait_status,
)

crds = gitops_fixtures.crds
kclient = gitops_fixtures.kclient
repo_crd = gitops_fixtures.repo_crd
gitops = gitops_fixtures.gitops
remote = gitops_fixtures.remote

TF = resources.TFJOBS
HELD = "gitops.trainops.dev/held-fields"


@pytest.fixture
async def site(gitops: GitOpsReconciler, kclient: Client) -> AsyncIterator[TestClient[Any, Any]]:
    app = api.create_app(gitops, token=None, webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=gitops, client=kclient)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


def synced(revision: str) -> Any:
    return lambda st: (
        (st.get("sync") or {}).get("revision") == revision
        and (st.get("operationState") or {}).get("syncResult", {}).get("revision") == revision
        and (st.get("sync") or {}).get("status") == "Synced"
    )


async def test_a_pause_of_a_git_job_holds_against_self_heal_and_new_commits(
    site: TestClient[Any, Any], kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one", {"a.yaml": tf_job_yaml("a")})  # pause.enabled: false in Git
    await create_repository(
        kclient, repository(namespace, remote.url, automated={"prune": True, "selfHeal": True})
    )
    await wait_status(kclient, namespace, synced(first))
    uid = (await kclient.get(TF, "a", namespace))["metadata"]["uid"]
    path = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/a"

    answer = await site.post(path + "/pause")
    assert answer.status == 202, await answer.text()
    body = await answer.json()
    assert body["status"] == "pause requested" and body["heldByHand"] is True
    assert "held by hand" in body["message"] and HELD in body["message"]
    job = await kclient.get(TF, "a", namespace)
    assert job["spec"]["runMode"]["pause"]["enabled"] is True
    assert job["metadata"]["annotations"][HELD] == "/spec/runMode/pause/enabled"

    # Self-heal compares again (the job changed): Synced, and it says the field is held.
    st = await wait_status(
        kclient,
        namespace,
        lambda s: resource_entry(s, "a").get("message", "").startswith("held by hand"),
    )
    assert resource_entry(st, "a")["status"] == "Synced"
    assert st["sync"]["status"] == "Synced"
    # A new commit that changes the job otherwise: applied, and the pause still holds.
    second = remote.commit(
        "label", {"a.yaml": tf_job_yaml("a", extra_meta="\n  labels: {team: vision}")}
    )
    await wait_status(kclient, namespace, synced(second))
    job = await kclient.get(TF, "a", namespace)
    assert job["metadata"]["labels"]["team"] == "vision"
    assert job["spec"]["runMode"]["pause"]["enabled"] is True
    assert job["metadata"]["uid"] == uid

    # The job page says so; the repository page's resource says so.
    doc = parse(await (await site.get(f"/jobs/{namespace}/tensorflowtrainingjobs/a")).text())
    assert doc.by_id("held-fields").text().startswith("spec.runMode.pause.enabled (Git does")
    assert doc.one("button", data_action="pause").attrs["data-repository"] == f"{namespace}/jobs"
    repo_page = await (await site.get(f"/repositories/{namespace}/jobs")).text()
    assert "held by hand: /spec/runMode/pause/enabled" in repo_page

    # Resume holds as well (the field stays the person's).
    resumed = await site.post(path + "/resume")
    assert resumed.status == 202 and (await resumed.json())["heldByHand"] is True
    job = await kclient.get(TF, "a", namespace)
    assert job["spec"]["runMode"]["pause"]["enabled"] is False
    assert job["metadata"]["annotations"][HELD] == "/spec/runMode/pause/enabled"

    # Removing the annotation hands the field back to Git: pause again by hand, drop the
    # annotation, and self-heal puts Git's `false` back.
    await site.post(path + "/pause")
    await kclient.patch(
        TF, "a", {"metadata": {"annotations": {HELD: None}}}, namespace, patch_type="merge"
    )

    async def unpaused() -> bool:
        job = await kclient.get(TF, "a", namespace)
        return job["spec"]["runMode"]["pause"]["enabled"] is False

    from tests.support.cluster import aeventually

    await aeventually(unpaused, timeout=15)


async def test_deleting_a_git_job_is_refused_while_its_repository_exists(
    site: TestClient[Any, Any], kclient: Client, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit("one", {"jobs/a.yaml": tf_job_yaml("a")})
    await create_repository(
        kclient, repository(namespace, remote.url, automated={"prune": True, "selfHeal": True})
    )
    await wait_status(kclient, namespace, synced(sha))
    path = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/a"
    refused = await site.delete(path)
    assert refused.status == 409
    assert (await refused.json())["error"] == (
        f"tensorflowtrainingjob {namespace}/a is deployed from Git by JobRepository "
        f"{namespace}/jobs (jobs/a.yaml): deleting it here would be undone by its next sync; "
        "remove it from Git instead (a pause from here holds)"
    )
    assert (await kclient.get(TF, "a", namespace))["metadata"].get("deletionTimestamp") is None
    # Once the repository is gone, the job is anybody's to delete.
    await kclient.delete(JOB_REPOSITORIES, "jobs", namespace)

    async def deleted() -> bool:
        answer = await site.delete(path)
        return answer.status == 202

    from tests.support.cluster import aeventually

    await aeventually(deleted, timeout=10)
