"""The GitOps reconciler end to end: real git repositories (file://), the embedded API server.

Each test pushes commits to a bare repository and checks what the reconciler did to the
cluster and wrote in the JobRepository's status. No mocks of our modules.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gitops.runtime.manager import GitOpsReconciler
from kube import resources
from kube.client import Client
from tests.gitops.conftest import (
    BAD_JOB,
    Remote,
    create_repository,
    get_or_none,
    repository,
    resource_entry,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import aeventually

TF = resources.TFJOBS
CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  lr: '0.1'\n"


def synced(revision: str) -> object:
    return lambda st: (
        (st.get("sync") or {}).get("revision") == revision
        and (st.get("operationState") or {}).get("syncResult", {}).get("revision") == revision
    )


async def test_first_sync_creates_the_jobs_and_records_status_files_and_history(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit(
        "first jobs\n\nbody",
        {"jobs/a.yaml": tf_job_yaml("a"), "jobs/b.yaml": tf_job_yaml("b"), "cm.yaml": CONFIGMAP},
    )
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    st = await wait_status(kclient, namespace, synced(sha))
    assert st["sync"] == {"status": "Synced", "revision": sha, "shortRevision": sha[:7]}
    assert st["health"]["status"] == "Progressing"  # no controller runs here
    assert "waiting for the controller" in st["health"]["message"]
    a = resource_entry(st, "a")
    assert (a["kind"], a["namespace"], a["file"], a["line"], a["status"]) == (
        "TensorFlowTrainingJob",
        namespace,
        "jobs/a.yaml",
        1,
        "Synced",
    )
    assert resource_entry(st, "settings")["health"] == "Healthy"
    op = st["operationState"]
    assert op["phase"] == "Succeeded" and op["message"].startswith("3 applied")
    assert {r["status"] for r in op["syncResult"]["resources"]} == {"Synced"}
    assert [h["revision"] for h in st["history"]] == [sha]
    assert st["history"][0]["author"] == "Ada <ada@example.com>"
    assert st["history"][0]["message"] == "first jobs" and st["history"][0]["result"] == "Succeeded"
    assert st["reconciledAt"].endswith("Z") and "conditions" not in st
    job = await kclient.get(TF, "a", namespace)
    meta = job["metadata"]
    assert meta["labels"]["gitops.trainops.dev/managed"] == "true"
    assert meta["annotations"]["gitops.trainops.dev/repository"] == f"{namespace}/jobs"
    assert job["spec"]["replicaSpecs"][1]["replicas"] == 1
    # Nothing changes: no new operation, no new history entry.
    assert gitops.diff(namespace, "jobs") == []
    assert {
        j["metadata"]["name"] for j in gitops.jobs() if j["metadata"]["namespace"] == namespace
    } == {"a", "b"}


async def test_a_denied_job_is_reported_at_its_line_and_the_others_still_sync(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("good", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url))
    await wait_status(kclient, namespace, synced(first))
    second = remote.commit("bad", {"bad.yaml": BAD_JOB, "c.yaml": tf_job_yaml("c")})
    st = await wait_status(kclient, namespace, synced(second))
    bad = resource_entry(st, "bad")
    assert (bad["status"], bad["file"], bad["line"]) == ("OutOfSync", "bad.yaml", 15)
    assert bad["message"].startswith(
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
    )
    assert "limits.cpu" in bad["message"]
    assert resource_entry(st, "c")["status"] == "Synced"
    assert resource_entry(st, "a")["status"] == "Synced"
    assert st["sync"]["status"] == "OutOfSync"
    op = st["operationState"]
    assert op["phase"] == "Failed" and "1 denied: bad.yaml:15: admission webhook" in op["message"]
    assert await get_or_none(kclient, TF, "bad", namespace) is None
    assert await get_or_none(kclient, TF, "c", namespace) is not None
    assert [h["result"] for h in st["history"]] == ["Succeeded", "Failed"]
    # The fix: the next push makes the repository Synced again.
    fixed = remote.commit("fix", {"bad.yaml": tf_job_yaml("bad")})
    st = await wait_status(kclient, namespace, synced(fixed))
    assert st["sync"]["status"] == "Synced" and st["operationState"]["phase"] == "Succeeded"
    assert resource_entry(st, "bad")["status"] == "Synced"


async def test_a_typoed_kind_is_reported_with_a_did_you_mean_and_the_rest_syncs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    typo = tf_job_yaml("typo").replace(
        "kind: TensorFlowTrainingJob", "kind: TensorflowTrainingJobs"
    )
    sha = remote.commit("typo", {"a.yaml": tf_job_yaml("a"), "typo.yaml": "# x\n" + typo})
    await create_repository(kclient, repository(namespace, remote.url))
    st = await wait_status(kclient, namespace, synced(sha))
    entry = resource_entry(st, "typo")
    assert (entry["file"], entry["line"], entry["status"]) == ("typo.yaml", 3, "OutOfSync")
    assert "TensorFlowTrainingJob" in entry["message"] and "did you mean" in entry["message"]
    assert resource_entry(st, "a")["status"] == "Synced"


async def test_prune_deletes_what_left_git_and_leaves_untracked_jobs_alone(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    from tests.support.jobs import tf_job

    hand = tf_job(name="by-hand")
    hand["metadata"]["namespace"] = namespace
    await kclient.create(TF, hand)
    first = remote.commit("two", {"a.yaml": tf_job_yaml("a"), "b.yaml": tf_job_yaml("b")})
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    await wait_status(kclient, namespace, synced(first))
    second = remote.commit("drop b", {"b.yaml": None})
    st = await wait_status(kclient, namespace, synced(second))
    pruned = [r for r in st["operationState"]["syncResult"]["resources"] if r["status"] == "Pruned"]
    assert [r["name"] for r in pruned] == ["b"]
    await aeventually(lambda: _gone(kclient, "b", namespace))
    assert await get_or_none(kclient, TF, "by-hand", namespace) is not None
    assert await get_or_none(kclient, TF, "a", namespace) is not None
    assert st["sync"]["status"] == "Synced"


async def _gone(client: Client, name: str, namespace: str) -> bool:
    return await get_or_none(client, TF, name, namespace) is None


async def test_self_heal_recreates_deleted_jobs_and_reverts_edits_but_not_ignored_fields(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    pointers = [{"group": "batch.tensorstack.dev", "kind": "TensorFlowTrainingJob",
                 "jsonPointers": ["/spec/runMode/pause/enabled"]}]  # fmt: skip
    body = repository(
        namespace, remote.url, automated={"selfHeal": True}, ignoreDifferences=pointers
    )
    body["spec"]["interval"] = "1h"  # healing must come from the job informer, not polling
    await create_repository(kclient, body)
    await wait_status(kclient, namespace, synced(sha))
    old = await kclient.get(TF, "a", namespace)
    await kclient.delete(TF, "a", namespace)

    async def recreated() -> bool:
        job = await get_or_none(kclient, TF, "a", namespace)
        return job is not None and job["metadata"]["uid"] != old["metadata"]["uid"]

    await aeventually(recreated, timeout=15)
    # A field Git sets (through the webhook's default) changed by hand is drift; a field Git
    # does not mention (backoffLimit) belongs to whoever set it.
    patch = {"spec": {"runPolicy": {"cleanUpPolicy": "All", "backoffLimit": 7}}}
    await kclient.patch(TF, "a", patch, namespace)

    async def reverted() -> bool:
        job = await kclient.get(TF, "a", namespace)
        return job["spec"]["runPolicy"] == {"cleanUpPolicy": "Unfinished", "backoffLimit": 7}

    await aeventually(reverted, timeout=15)
    pause = {"spec": {"runMode": {"pause": {"enabled": True}}}}
    await kclient.patch(TF, "a", pause, namespace)
    # A later commit proves a whole round ran after the edit.
    later = remote.commit("more", {"cm.yaml": CONFIGMAP})
    st = await wait_status(kclient, namespace, synced(later))
    job = await kclient.get(TF, "a", namespace)
    assert job["spec"]["runMode"]["pause"]["enabled"] is True
    assert st["sync"]["status"] == "Synced" and resource_entry(st, "a")["status"] == "Synced"


async def test_an_immutable_change_is_reported_and_replaced_only_when_asked(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one worker", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url))
    await wait_status(kclient, namespace, synced(first))
    old = await kclient.get(TF, "a", namespace)
    second = remote.commit("two workers", {"a.yaml": tf_job_yaml("a", workers=2)})
    st = await wait_status(kclient, namespace, synced(second))
    result = st["operationState"]["syncResult"]["resources"][0]
    assert result["status"] == "SyncFailed"
    assert "field is immutable" in result["message"]
    assert "gitops.trainops.dev/sync-options: Replace=true" in result["message"]
    assert resource_entry(st, "a")["status"] == "OutOfSync"
    replace = "\n  annotations:\n    gitops.trainops.dev/sync-options: Replace=true"
    third = remote.commit("replace", {"a.yaml": tf_job_yaml("a", workers=2, extra_meta=replace)})
    # The first sync deletes it (Replacing; no worker waits for the deletion), the next one,
    # asked for at once, creates it again.
    seen: list[str] = []

    def replaced(st: dict[str, Any]) -> bool:
        if not synced(third)(st):  # type: ignore[operator]
            return False
        result = st["operationState"]["syncResult"]["resources"][0]
        seen.append(result["status"])
        return bool(result["status"] == "Synced")

    st = await wait_status(kclient, namespace, replaced, timeout=30)
    result = st["operationState"]["syncResult"]["resources"][0]
    assert result["message"] == "replaced (deleted and recreated)", result["message"]
    assert set(seen) <= {"Replacing", "Synced"}
    job = await kclient.get(TF, "a", namespace)
    assert job["metadata"]["uid"] != old["metadata"]["uid"]
    assert job["spec"]["replicaSpecs"][1]["replicas"] == 2
    assert st["sync"]["status"] == "Synced"


async def test_an_unreachable_repository_keeps_its_last_state_with_a_comparison_error(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    await create_repository(kclient, repository(namespace, remote.url))
    before = await wait_status(kclient, namespace, synced(sha))
    moved = remote.bare.with_name("moved.git")
    remote.bare.rename(moved)
    st = await wait_status(kclient, namespace, lambda s: bool(s.get("conditions")))
    (condition,) = st["conditions"]
    assert (condition["type"], condition["status"]) == ("ComparisonError", "True")
    assert str(remote.bare) in condition["message"] or "origin.git" in condition["message"]
    for field in ("sync", "health", "resources", "history", "operationState"):
        assert st[field] == before[field]
    assert await get_or_none(kclient, TF, "a", namespace) is not None
    moved.rename(remote.bare)
    await wait_status(kclient, namespace, lambda s: "conditions" not in s)


async def test_a_huge_file_and_an_alias_bomb_are_reported_per_file_while_the_rest_syncs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    huge = b"# " + b"x" * (3 * 1024 * 1024 + 10) + b"\n"
    sha = remote.commit(
        "hostile", {"a.yaml": tf_job_yaml("a"), "bomb.yaml": bomb, "huge.yaml": huge}
    )
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    st = await wait_status(kclient, namespace, synced(sha))
    by_file = {r.get("file"): r for r in st["resources"]}
    assert "3 MiB" in by_file["huge.yaml"]["message"]
    assert "alias" in by_file["bomb.yaml"]["message"].lower()
    assert by_file["a.yaml"]["status"] == "Synced"
    assert await get_or_none(kclient, TF, "a", namespace) is not None
    assert st["sync"]["status"] == "OutOfSync"


async def test_a_hostile_revision_is_refused_with_a_condition_and_nothing_runs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url, revision=f"--upload-pack=touch {marker}")
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, lambda s: bool(s.get("conditions")))
    message = st["conditions"][0]["message"]
    assert "invalid revision" in message and "starts with '-'" in message
    assert not marker.exists()
    # Never compared: list views show Unknown with the error, not blanks.
    assert st["sync"] == {"status": "Unknown"}
    assert st["health"] == {"status": "Unknown", "message": message}
    assert await get_or_none(kclient, TF, "a", namespace) is None


async def test_without_an_automated_policy_drift_is_reported_and_synced_only_when_asked(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url)
    del body["spec"]["syncPolicy"]["automated"]
    await create_repository(kclient, body)
    st = await wait_status(
        kclient, namespace, lambda s: (s.get("sync") or {}).get("revision") == sha
    )
    assert st["sync"]["status"] == "OutOfSync" and "operationState" not in st
    assert resource_entry(st, "a")["health"] == "Missing"
    (diff,) = gitops.diff(namespace, "jobs")
    assert (diff.kind, diff.name, diff.file, diff.line) == (
        "TensorFlowTrainingJob",
        "a",
        "a.yaml",
        1,
    )
    assert "+++ desired" in diff.text
    await gitops.sync(namespace, "jobs")
    st = await wait_status(kclient, namespace, synced(sha))
    assert st["sync"]["status"] == "Synced"
    assert await get_or_none(kclient, TF, "a", namespace) is not None


async def test_the_hub_refreshes_on_matching_pushes_and_streams_changes(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    from gitops.engine.urls import normalize_repo_url
    from gitops.source.pushhooks import PushCheck, PushEvent

    changes = gitops.changes()
    sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url, revision="main")
    body["spec"]["interval"] = "1h"  # only the push may bring the next commit
    await create_repository(kclient, body)
    await wait_status(kclient, namespace, synced(sha))
    first = await asyncio.wait_for(anext(changes), 5)
    assert first.kind in ("repository", "job")
    url = normalize_repo_url(remote.url)
    other = PushEvent("generic", (url,), "dev", None)
    assert await gitops.push(other, PushCheck.anonymous()) == []
    second = remote.commit("two", {"b.yaml": tf_job_yaml("b")})
    event = PushEvent("github", (url,), "main", second)
    assert await gitops.push(event, PushCheck.anonymous()) == [f"{namespace}/jobs"]
    await wait_status(kclient, namespace, synced(second))
    assert gitops.repository(namespace, "jobs")["metadata"]["name"] == "jobs"
    await changes.aclose()  # type: ignore[attr-defined]


async def test_a_replace_waiting_on_a_deletion_holds_no_worker_and_completes_when_it_ends(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """A finalizer holds the old job's deletion: the sync reports Replacing and the round ends
    (no worker polls the deletion); once the finalizer goes, a later round creates the job."""
    replace = "\n  annotations:\n    gitops.trainops.dev/sync-options: Replace=true"
    first = remote.commit("one", {"a.yaml": tf_job_yaml("a", extra_meta=replace)})
    await create_repository(kclient, repository(namespace, remote.url))
    await wait_status(kclient, namespace, synced(first))
    hold = {"metadata": {"finalizers": ["test.trainops.dev/hold"]}}
    await kclient.patch(TF, "a", hold, namespace, patch_type="merge")
    second = remote.commit("two", {"a.yaml": tf_job_yaml("a", workers=2, extra_meta=replace)})

    def replacing(st: dict[str, Any]) -> bool:
        if not synced(second)(st):  # type: ignore[operator]
            return False
        result = st["operationState"]["syncResult"]["resources"][0]
        return bool(result["status"] == "Replacing")

    st = await wait_status(kclient, namespace, replacing, timeout=30)
    assert (
        "created again once gone" in st["operationState"]["syncResult"]["resources"][0]["message"]
    )
    held = await kclient.get(TF, "a", namespace)
    assert held["metadata"].get("deletionTimestamp")
    await kclient.patch(TF, "a", {"metadata": {"finalizers": None}}, namespace, patch_type="merge")

    async def recreated() -> bool:
        job = await kclient.get(TF, "a", namespace)
        return bool(
            job["metadata"]["uid"] != held["metadata"]["uid"]
            and job["spec"]["replicaSpecs"][1]["replicas"] == 2
        )

    assert await aeventually(recreated, timeout=30)
    st = await wait_status(
        kclient,
        namespace,
        lambda s: s["operationState"]["syncResult"]["resources"][0]["status"] == "Synced",
    )
    assert st["operationState"]["syncResult"]["resources"][0]["message"] == (
        "replaced (deleted and recreated)"
    )
