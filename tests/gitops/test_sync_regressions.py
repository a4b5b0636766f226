"""Bugs a new-user test pass found, end to end: real git repositories (file://), the real
reconciler, the embedded API server (see test_sync_cluster.py)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

import policies
from gitops.runtime.hub import UnknownRepository
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from kube.manager import Manager
from tests.gitops.conftest import (
    ALONE,
    BAD_JOB,
    UNRESTRICTED,
    Remote,
    create_repository,
    get_or_none,
    repo_status,
    repository,
    resource_entry,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import aeventually

TF = resources.TFJOBS
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  lr: '0.1'\n"
PRUNE = {"prune": True, "selfHeal": True}


def synced(revision: str) -> Any:
    return lambda st: (
        (st.get("sync") or {}).get("revision") == revision
        and (st.get("operationState") or {}).get("syncResult", {}).get("revision") == revision
    )


def _pruned(st: dict[str, Any]) -> list[str]:
    results = st["operationState"]["syncResult"]["resources"]
    return [r["name"] for r in results if r["status"] == "Pruned"]


async def test_a_typoed_kind_on_a_running_job_does_not_prune_it(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one", {"pausable.yaml": tf_job_yaml("pausable")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(first))
    before = await kclient.get(TF, "pausable", namespace)
    typo = tf_job_yaml("pausable").replace(
        "kind: TensorFlowTrainingJob", "kind: TensorflowTrainingJob"
    )
    second = remote.commit("typo", {"pausable.yaml": typo})
    st = await wait_status(kclient, namespace, synced(second))
    assert _pruned(st) == []
    assert st["operationState"]["phase"] == "Failed"
    await asyncio.sleep(1.5)  # later rounds (selfHeal, prune) keep it too
    job = await get_or_none(kclient, TF, "pausable", namespace)
    assert job is not None and job["metadata"]["uid"] == before["metadata"]["uid"]
    st = await repo_status(kclient, namespace)
    kept = [r for r in st["resources"] if r["kind"] == "TensorFlowTrainingJob"]
    assert len(kept) == 1 and kept[0]["file"] == "pausable.yaml"
    assert kept[0]["message"].startswith("kept, not pruned: pausable.yaml:2: ")
    assert "did you mean" in kept[0]["message"]


async def test_an_entry_in_error_keeps_every_object_its_file_defined(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("two", {"multi.yaml": tf_job_yaml("x") + "---\n" + CONFIGMAP})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(first))
    # Renamed, and the other document of the file is broken: x may still be meant.
    broken = CONFIGMAP.replace("kind: ConfigMap", "kind: Configmap")
    second = remote.commit("edit", {"multi.yaml": tf_job_yaml("y") + "---\n" + broken})
    st = await wait_status(kclient, namespace, synced(second))
    assert _pruned(st) == []
    assert await get_or_none(kclient, TF, "x", namespace) is not None
    assert resource_entry(st, "x")["message"].startswith("kept, not pruned: multi.yaml:")
    fixed = remote.commit("fix", {"multi.yaml": tf_job_yaml("y") + "---\n" + CONFIGMAP})
    st = await wait_status(kclient, namespace, synced(fixed))
    assert _pruned(st) == ["x"]


NO_NAME = tf_job_yaml("x").replace("  name: x\n", "  labels: {a: b}\n")
GENERATE_NAME = tf_job_yaml("x").replace("  name: x\n", "  generateName: x-\n")


async def test_a_job_without_a_name_is_an_error_at_its_line_and_the_rest_syncs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    files = {"a.yaml": tf_job_yaml("a"), "noname.yaml": NO_NAME, "gen.yaml": GENERATE_NAME}
    sha = remote.commit("no names", files)
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    st = await wait_status(kclient, namespace, synced(sha))
    by_file = {r.get("file"): r for r in st["resources"]}
    assert by_file["noname.yaml"]["line"] == 3
    assert by_file["noname.yaml"]["message"].startswith("metadata.name: Required value")
    assert "generateName is not supported by GitOps" in by_file["gen.yaml"]["message"]
    assert by_file["a.yaml"]["status"] == "Synced"
    assert await get_or_none(kclient, TF, "a", namespace) is not None
    assert "conditions" not in st
    assert st["operationState"]["phase"] == "Failed"
    messages = [r["message"] for r in st["operationState"]["syncResult"]["resources"]]
    assert any(m.startswith("noname.yaml:3: metadata.name: Required value") for m in messages)


async def test_an_unexpected_exception_becomes_a_condition_logged_once(
    gitops: GitOpsReconciler,
    kclient: Client,
    namespace: str,
    remote: Remote,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = 0

    async def broken_apply(state: Any) -> Any:
        nonlocal calls
        calls += 1
        raise RuntimeError("boom")

    monkeypatch.setattr(gitops.reconciler.engine, "apply", broken_apply)
    remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    caplog.set_level(logging.DEBUG, logger="trainops.gitops")
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    st = await wait_status(kclient, namespace, lambda s: bool(s.get("conditions")))
    (condition,) = st["conditions"]
    assert condition["type"] == "SyncError" and "RuntimeError: boom" in condition["message"]
    await aeventually(lambda: calls >= 3, timeout=15)
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    monkeypatch.undo()
    await wait_status(kclient, namespace, lambda s: "conditions" not in s, timeout=30)


async def test_a_revision_sync_of_an_automated_repository_is_refused(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    second = remote.commit("two", {"b.yaml": tf_job_yaml("b")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(second))
    with pytest.raises(ValueError, match="has an automated sync policy: it follows HEAD"):
        await gitops.sync(namespace, "jobs", first)
    for same in (second, second[:7], "main", None):
        await gitops.sync(namespace, "jobs", same)
    await asyncio.sleep(1)
    assert await get_or_none(kclient, TF, "b", namespace) is not None


async def test_a_sync_to_a_missing_revision_fails_once_and_goes_back_to_the_target(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url)
    del body["spec"]["syncPolicy"]["automated"]
    await create_repository(kclient, body)
    await wait_status(kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == sha)
    await gitops.sync(namespace, "jobs", "deadbeef")
    st = await wait_status(
        kclient, namespace, lambda s: (s.get("operationState") or {}).get("phase") == "Error"
    )
    assert "deadbeef" in st["operationState"]["message"]
    await asyncio.sleep(2.5)
    st = await repo_status(kclient, namespace)
    assert "conditions" not in st and st["sync"]["revision"] == sha


async def test_a_restart_does_not_record_another_sync(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    before = await wait_status(kclient, namespace, synced(sha))
    await gitops.manager.stop()
    again = GitOpsReconciler(
        Manager(kclient, leader_election=ALONE),
        tmp_path / "git-cache-2",
        GitOpsSettings(namespace=namespace, git_timeout=20, boundaries=UNRESTRICTED),
    )
    again.manager.start()
    try:
        key = f"{namespace}/jobs"
        await aeventually(
            lambda: (
                key in again.reconciler.memos and again.reconciler.memos[key].live.revision == sha
            ),
            timeout=15,
        )
        await asyncio.sleep(1.5)
    finally:
        await again.manager.stop()
    st = await repo_status(kclient, namespace)
    assert st["history"] == before["history"]
    assert st["operationState"] == before["operationState"]


async def test_an_unreadable_file_fails_the_operation_and_names_itself_on_its_job(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("two", {"a.yaml": tf_job_yaml("a"), "b.yaml": tf_job_yaml("b")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(first))
    second = remote.commit("break b", {"b.yaml": "spec: [\n"})
    st = await wait_status(kclient, namespace, synced(second))
    op = st["operationState"]
    assert op["phase"] == "Failed" and "b.yaml:" in op["message"], op
    assert st["history"][-1]["result"] == "Failed"
    b = resource_entry(st, "b")
    assert "not in Git any more" not in b["message"]
    assert b["message"].startswith("kept, not pruned: b.yaml:") and b["file"] == "b.yaml"
    assert await get_or_none(kclient, TF, "b", namespace) is not None


async def test_a_failed_apply_carries_its_file_and_line(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one worker", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url))
    await wait_status(kclient, namespace, synced(first))
    second = remote.commit("two workers", {"a.yaml": tf_job_yaml("a", workers=2)})
    st = await wait_status(kclient, namespace, synced(second))
    (result,) = st["operationState"]["syncResult"]["resources"]
    assert result["status"] == "SyncFailed" and result["message"].startswith("a.yaml:1: ")
    assert "1 failed: a.yaml:1: " in st["operationState"]["message"]
    assert "denied" not in st["operationState"]["message"]


def test_the_retry_back_off_is_argo_cds_duration_times_factor_capped() -> None:
    from gitops.engine.spec import Retry, backoff_seconds

    retry = Retry(limit=5, duration=5.0, factor=2.0, max_duration=30.0)
    assert [backoff_seconds(retry, n) for n in range(5)] == [5.0, 10.0, 20.0, 30.0, 30.0]


async def test_a_failed_apply_is_retried_with_back_off_and_succeeds_once_its_cause_is_fixed(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """The job's namespace does not exist yet: the apply fails; with `syncPolicy.retry` the
    reconciler tries again after the back-off — no push, no poll (interval 3m) — and the job
    is created once the namespace is there."""
    later = f"{namespace}-later"
    job = tf_job_yaml("retried").replace("metadata:\n", f"metadata:\n  namespace: {later}\n", 1)
    first = remote.commit("a job in a namespace still to come", {"job.yaml": job})
    body = repository(namespace, remote.url, automated={"prune": False, "selfHeal": False})
    body["spec"]["interval"] = "3m"
    body["spec"]["syncPolicy"]["retry"] = {"limit": 3, "backoff": {"duration": "1s", "factor": 2}}
    await create_repository(kclient, body)

    def failed(st: dict[str, Any]) -> bool:
        op = st.get("operationState") or {}
        return op.get("phase") == "Failed" and (st.get("sync") or {}).get("revision") == first

    st = await wait_status(kclient, namespace, failed)
    assert "not found" in st["operationState"]["message"]
    await kclient.create(resources.NAMESPACES, {"metadata": {"name": later}})
    try:

        async def created() -> bool:
            return await get_or_none(kclient, TF, "retried", later) is not None

        await aeventually(created, timeout=10)
        st = await wait_status(
            kclient,
            namespace,
            lambda s: (s.get("operationState") or {}).get("phase") == "Succeeded",
        )
        assert st["sync"]["status"] == "Synced"
    finally:
        await kclient.delete(resources.NAMESPACES, later)


async def test_a_job_that_existed_before_gitops_is_adopted_then_pruned_when_it_leaves_git(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    # `kubectl apply -f job.yaml` first (defaulted as the webhook would; none runs here), then a
    # repository holding the same manifest that allows adoption (without it the job is left
    # alone: tests/gitops/test_finished_jobs.py).
    before = policies.admit(yaml.safe_load(tf_job_yaml("a"))).obj
    before["metadata"]["namespace"] = namespace
    await kclient.create(TF, before)
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url)
    del body["spec"]["syncPolicy"]["automated"]
    body["spec"]["syncPolicy"]["adoptExisting"] = True
    repo_uid = (await create_repository(kclient, body))["metadata"]["uid"]
    st = await wait_status(
        kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == sha
    )
    assert resource_entry(st, "a")["status"] == "OutOfSync"
    (diff,) = gitops.diff(namespace, "jobs")
    changed = [
        line
        for line in diff.text.splitlines()
        if line[:1] in "+-" and not line.startswith(("---", "+++"))
    ]
    assert changed == [
        "+  annotations:",
        f"+    gitops.trainops.dev/repository: {namespace}/jobs",
        f"+    gitops.trainops.dev/repository-uid: {repo_uid}",
        "+  labels:",
        "+    gitops.trainops.dev/managed: 'true'",
        f"+    gitops.trainops.dev/repository-uid: {repo_uid}",
    ]
    # Sync with prune: the job is adopted (labelled), in place.
    uid = (await kclient.get(TF, "a", namespace))["metadata"]["uid"]
    obj = await kclient.get(JOB_REPOSITORIES, "jobs", namespace)
    obj["spec"]["syncPolicy"]["automated"] = {"prune": True}
    await kclient.replace(JOB_REPOSITORIES, obj)
    st = await wait_status(
        kclient,
        namespace,
        lambda s: (s.get("operationState") or {}).get("syncResult", {}).get("revision") == sha,
    )
    applied = st["operationState"]["syncResult"]["resources"]
    assert [(r["name"], r["status"], r["message"]) for r in applied] == [
        ("a", "Synced", "configured")
    ]
    assert st["sync"]["status"] == "Synced" and gitops.diff(namespace, "jobs") == []
    job = await kclient.get(TF, "a", namespace)
    assert job["metadata"]["uid"] == uid
    assert job["metadata"]["labels"]["gitops.trainops.dev/managed"] == "true"
    assert job["metadata"]["labels"]["gitops.trainops.dev/repository-uid"] == repo_uid
    assert job["metadata"]["annotations"]["gitops.trainops.dev/repository"] == f"{namespace}/jobs"
    # Removed from Git: pruned like any job the repository created (another object stays in
    # Git: an empty desired state prunes nothing, see test_no_destroy.py).
    remote.commit("drop a", {"a.yaml": None, "settings.yaml": CONFIGMAP})
    await aeventually(lambda: _absent(kclient, "a", namespace))


async def _absent(client: Client, name: str, namespace: str) -> bool:
    return await get_or_none(client, TF, name, namespace) is None


async def test_deleting_a_repository_removes_the_object_and_leaves_its_jobs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(sha))
    await gitops.delete(namespace, "jobs")
    assert await get_or_none(kclient, JOB_REPOSITORIES, "jobs", namespace) is None
    assert await get_or_none(kclient, TF, "a", namespace) is not None
    with pytest.raises(UnknownRepository):
        await gitops.delete(namespace, "nope")


async def test_a_denied_file_moved_unchanged_is_reported_at_its_new_path_and_same_line(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("bad", {"bad.yaml": BAD_JOB, "a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url))
    st = await wait_status(kclient, namespace, lambda s: s.get("sync", {}).get("revision") == first)
    bad = resource_entry(st, "bad")
    assert (bad["file"], bad["line"]) == ("bad.yaml", 15)
    # The same blob under another path: read from the memo, not parsed again.
    moved = remote.commit("move", {"bad.yaml": None, "jobs/moved.yaml": BAD_JOB})
    st = await wait_status(kclient, namespace, lambda s: s.get("sync", {}).get("revision") == moved)
    bad = resource_entry(st, "bad")
    assert (bad["status"], bad["file"], bad["line"]) == ("OutOfSync", "jobs/moved.yaml", 15)
    assert "denied the request" in bad["message"]
    assert "jobs/moved.yaml:15: admission webhook" in st["operationState"]["message"]
