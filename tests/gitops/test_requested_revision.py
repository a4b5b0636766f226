"""A `sync-revision` annotation written with kubectl is held to the API's rule: an automated
repository syncs only what its targetRevision resolves to. The API answers 400 to another
revision; the leader refuses it too, so someone who may patch the JobRepository cannot have a
pull request's head (`refs/pull/7/head`) applied, even once, behind the API's back.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gitops.engine import triggers
from gitops.runtime.manager import GitOpsReconciler
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from tests.gitops.conftest import (
    Remote,
    create_repository,
    repository,
    tf_job_yaml,
    wait_status,
)

pytestmark = pytest.mark.usefixtures("repo_crd")


async def _ask(kclient: Client, namespace: str, revision: str) -> str:
    """A sync request to `revision` as `kubectl annotate` writes it; its token."""
    patch = triggers.request_patch("sync", datetime.now(UTC), revision)
    await kclient.patch(JOB_REPOSITORIES, "jobs", patch, namespace, patch_type="merge")
    token: str = patch["metadata"]["annotations"][triggers.SYNC_REQUESTED_AT]
    return token


async def _paused(kclient: Client, namespace: str) -> bool:
    job = await kclient.get(resources.TFJOBS, "a", namespace)
    return bool(job["spec"]["runMode"]["pause"]["enabled"])


async def test_a_pull_request_head_asked_by_annotation_is_not_synced_on_an_automated_repository(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    main = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    # A pull request's head: a commit on refs/pull/7/head only (main is put back).
    remote.commit("pr", {"a.yaml": tf_job_yaml("a").replace("enabled: false", "enabled: true")})
    remote.git(remote.work, "push", "-q", "origin", "HEAD:refs/pull/7/head")
    remote.git(remote.work, "push", "-q", "-f", "origin", f"{main}:refs/heads/main")
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    await wait_status(kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == main)
    assert not await _paused(kclient, namespace)

    token = await _ask(kclient, namespace, "refs/pull/7/head")
    st = await wait_status(
        kclient,
        namespace,
        lambda s: (s.get(triggers.HANDLED) or {}).get("syncRequestedAt") == token,
    )
    operation = st["operationState"]
    assert operation["phase"] == "Error"
    assert operation["message"] == (
        "revision refs/pull/7/head: not the target: the repository has an automated sync "
        "policy and follows HEAD; change spec.targetRevision, or turn automated sync off, to "
        "sync another revision"
    )
    assert st["sync"]["revision"] == main
    assert not await _paused(kclient, namespace)  # the pull request's pause was not applied

    # The target itself, by branch name or sha, is still a request the leader carries out.
    for revision in ("main", main[:8]):
        token = await _ask(kclient, namespace, revision)
        st = await wait_status(
            kclient,
            namespace,
            lambda s, t=token: (s.get(triggers.HANDLED) or {}).get("syncRequestedAt") == t,
        )
        assert st["operationState"]["phase"] == "Succeeded", st["operationState"]
