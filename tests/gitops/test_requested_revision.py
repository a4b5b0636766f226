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


# --- without automated sync: only a commit of targetRevision's history ---------------------------


def _handled(token: str) -> object:
    return lambda s: (s.get(triggers.HANDLED) or {}).get("syncRequestedAt") == token


def _refusal(sha: str) -> str:
    return (
        f"refused (annotation {triggers.SYNC_REVISION}): commit {sha[:12]} is not in the history "
        "of HEAD (spec.targetRevision), so it is not synced; set "
        "spec.syncPolicy.allowAnyRevision: true to sync any revision on request"
    )


async def test_without_automated_sync_an_annotation_may_pick_only_a_commit_of_the_targets_history(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """Patching the annotation needs only `patch`; changing what the repository follows needs
    `impersonate` on its account. So a pull request's head, another branch, or a commit that
    another repository of the same URL fetched into the shared clone is refused, named in the
    operation (and its Event) with the annotation; an earlier commit of the target's branch is
    synced; `allowAnyRevision` (a spec field) lifts the rule."""
    first = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    main = remote.commit("two", {"b.yaml": tf_job_yaml("b")})
    pull = remote.commit(
        "pr", {"a.yaml": tf_job_yaml("a").replace("enabled: false", "enabled: true")}
    )
    remote.git(remote.work, "push", "-q", "origin", "HEAD:refs/pull/7/head")
    remote.git(remote.work, "reset", "-q", "--hard", main)
    remote.git(remote.work, "push", "-q", "-f", "origin", f"{main}:refs/heads/main")
    dev = remote.commit("dev", {"dev/c.yaml": tf_job_yaml("c")})
    remote.git(remote.work, "push", "-q", "origin", "HEAD:refs/heads/dev")
    remote.git(remote.work, "reset", "-q", "--hard", main)
    remote.git(remote.work, "push", "-q", "-f", "origin", f"{main}:refs/heads/main")
    # Another repository of the same URL follows dev: its commit is in the shared clone.
    other = repository(namespace, remote.url, name="other", revision="dev", automated={})
    other["spec"]["path"] = "dev"
    await create_repository(kclient, other)
    await wait_status(
        kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == dev, name="other"
    )
    manual = repository(namespace, remote.url)
    manual["spec"]["syncPolicy"] = {}  # no automated sync: only requests apply anything
    await create_repository(kclient, manual)

    for revision, sha in (("refs/pull/7/head", pull), ("dev", dev), (dev, dev)):
        token = await _ask(kclient, namespace, revision)
        st = await wait_status(kclient, namespace, _handled(token))
        operation = st["operationState"]
        assert operation["phase"] == "Error", operation
        assert operation["message"] == f"revision {revision}: {_refusal(sha)}"
        for name in ("a", "b"):  # nothing of it applied (c is the other repository's)
            assert await _job(kclient, namespace, name) is None

    # An earlier commit of the target's branch, and the target itself, are synced.
    for revision, sha in ((first[:10], first), ("main", main)):
        token = await _ask(kclient, namespace, revision)
        st = await wait_status(kclient, namespace, _handled(token), timeout=30)
        assert st["operationState"]["phase"] == "Succeeded", st["operationState"]
        assert st["operationState"]["syncResult"]["revision"] == sha
    assert await _job(kclient, namespace, "b") is not None

    # A spec field (which needs `impersonate` on the account where deploy/'s policy runs).
    await kclient.patch(
        JOB_REPOSITORIES,
        "jobs",
        {"spec": {"syncPolicy": {"allowAnyRevision": True}}},
        namespace,
        patch_type="merge",
    )
    token = await _ask(kclient, namespace, "refs/pull/7/head")
    st = await wait_status(kclient, namespace, _handled(token), timeout=30)
    assert st["operationState"]["phase"] == "Succeeded", st["operationState"]
    assert st["operationState"]["syncResult"]["revision"] == pull
    assert await _paused(kclient, namespace)


async def _job(kclient: Client, namespace: str, name: str) -> object:
    from kube import errors

    try:
        return await kclient.get(resources.TFJOBS, name, namespace)
    except errors.NotFound:
        return None
