"""No sync silently destroys running work (issue 16, item 3), end to end: real git repositories
(file://), the real reconciler, the embedded API server (see test_sync_cluster.py).

- a commit that leaves no manifest (or empties `path`) prunes nothing unless allowEmpty;
- an object another JobRepository tracks is neither taken over nor pruned;
- prune follows the repository's uid, not its name;
- a deadline shortened by hand and reverted by self-heal does not fail the job (the job
  controller waits controller.lifecycle.DEADLINE_SETTLE before acting on a just-shortened one).
"""

from __future__ import annotations

import asyncio
import base64
import time
from pathlib import Path
from typing import Any

from gitops.runtime.manager import GitOpsReconciler
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from tests.controller.conftest import controller  # noqa: F401
from tests.gitops.conftest import (
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
PRUNE = {"prune": True, "selfHeal": True}


def secret_yaml(value: str) -> str:
    return (
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\ntype: Opaque\n"
        f"stringData:\n  token: {value}\n"
    )


def configmap_yaml(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: '1'\n"


def synced(revision: str) -> Any:
    return lambda st: (
        (st.get("sync") or {}).get("revision") == revision
        and (st.get("operationState") or {}).get("syncResult", {}).get("revision") == revision
    )


def condition(st: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c.get("type") == type_), None)


def results(st: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["name"], r["status"]) for r in st["operationState"]["syncResult"]["resources"]]


async def test_a_commit_that_leaves_only_a_readme_prunes_nothing_until_allow_empty(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("two", {"a.yaml": tf_job_yaml("a"), "b.yaml": tf_job_yaml("b")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(first))
    uids = {n: (await kclient.get(TF, n, namespace))["metadata"]["uid"] for n in ("a", "b")}

    empty = remote.commit("docs only", {"a.yaml": None, "b.yaml": None, "README.md": "# jobs\n"})
    st = await wait_status(kclient, namespace, synced(empty))
    assert sorted(results(st)) == [("a", "PruneSkipped"), ("b", "PruneSkipped")]
    message = st["operationState"]["syncResult"]["resources"][0]["message"]
    assert message.startswith("prune skipped: the repository defines no objects")
    assert "2 objects applied before are kept" in message and "allowEmpty: true" in message
    cond = condition(st, "PruneSkipped")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "EmptyDesiredState")
    assert cond["message"] == message
    assert st["sync"]["status"] == "OutOfSync"
    assert st["operationState"]["message"] == "0 applied, 2 prune skipped: " + message.removeprefix(
        "prune skipped: "
    )
    for name, uid in uids.items():
        job = await kclient.get(TF, name, namespace)
        assert job["metadata"]["uid"] == uid and not job["metadata"].get("deletionTimestamp")

    # Saying so in the spec lets the empty revision prune.
    obj = await kclient.get(JOB_REPOSITORIES, "jobs", namespace)
    obj["spec"]["syncPolicy"]["allowEmpty"] = True
    await kclient.replace(JOB_REPOSITORIES, obj)
    st = await wait_status(
        kclient, namespace, lambda s: ("a", "Pruned") in results(s) and s.get("operationState")
    )
    assert sorted(results(st)) == [("a", "Pruned"), ("b", "Pruned")]
    for name in uids:
        await aeventually(lambda n=name: _gone(kclient, n, namespace))
    st = await wait_status(kclient, namespace, lambda s: condition(s, "PruneSkipped") is None)


async def test_a_path_that_vanished_prunes_nothing(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one", {"jobs/a.yaml": tf_job_yaml("a"), "README.md": "x\n"})
    await create_repository(
        kclient, repository(namespace, remote.url, path="jobs", automated=PRUNE)
    )
    await wait_status(kclient, namespace, synced(first))
    remote.commit("moved away", {"jobs/a.yaml": None})
    st = await wait_status(
        kclient, namespace, lambda s: condition(s, "ComparisonError") is not None
    )
    assert "jobs" in condition(st, "ComparisonError")["message"]  # type: ignore[index]
    assert st["sync"]["revision"] == first
    assert await get_or_none(kclient, TF, "a", namespace) is not None


async def test_another_repositorys_secret_is_neither_taken_over_nor_pruned(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, tmp_path: Path
) -> None:
    team_b, team_a = Remote(tmp_path / "b"), Remote(tmp_path / "a")
    b_sha = team_b.commit("creds", {"creds.yaml": secret_yaml("team-b-token")})
    await create_repository(kclient, repository(namespace, team_b.url, name="team-b"))
    await wait_status(kclient, namespace, synced(b_sha), name="team-b")
    before = await kclient.get(resources.SECRETS, "creds", namespace)

    a_sha = team_a.commit(
        "mine", {"creds.yaml": secret_yaml("team-a-token"), "cm.yaml": configmap_yaml("a")}
    )
    await create_repository(
        kclient, repository(namespace, team_a.url, name="team-a", automated=PRUNE)
    )
    st = await wait_status(kclient, namespace, synced(a_sha), name="team-a")
    entry = resource_entry(st, "creds")
    assert entry["status"] == "OutOfSync"
    assert entry["message"].startswith(f"tracked by {namespace}/team-b: not taken over")
    assert (entry["file"], entry["line"]) == ("creds.yaml", 1)
    assert st["operationState"]["phase"] == "Failed"
    assert f"creds.yaml:1: tracked by {namespace}/team-b" in st["operationState"]["message"]
    secret = await kclient.get(resources.SECRETS, "creds", namespace)
    assert base64.b64decode(secret["data"]["token"]) == b"team-b-token"
    assert secret["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

    # Gone from team-a's Git: still team-b's, not pruned.
    a2 = team_a.commit("drop creds", {"creds.yaml": None})
    st = await wait_status(kclient, namespace, synced(a2), name="team-a")
    assert [n for n, s in results(st) if s == "Pruned"] == []
    secret = await kclient.get(resources.SECRETS, "creds", namespace)
    assert secret["metadata"]["uid"] == before["metadata"]["uid"]
    assert base64.b64decode(secret["data"]["token"]) == b"team-b-token"
    assert st["sync"]["status"] == "Synced"


async def test_once_the_other_repository_is_deleted_its_object_is_adopted(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, tmp_path: Path
) -> None:
    team_b, team_a = Remote(tmp_path / "b"), Remote(tmp_path / "a")
    b_sha = team_b.commit("creds", {"creds.yaml": secret_yaml("team-b-token")})
    await create_repository(kclient, repository(namespace, team_b.url, name="team-b"))
    await wait_status(kclient, namespace, synced(b_sha), name="team-b")
    a_sha = team_a.commit("mine", {"creds.yaml": secret_yaml("team-a-token")})
    created = await create_repository(
        kclient, repository(namespace, team_a.url, name="team-a", automated=PRUNE)
    )
    await wait_status(kclient, namespace, synced(a_sha), name="team-a")
    await kclient.delete(JOB_REPOSITORIES, "team-b", namespace)
    # Nothing team-a watches changes; it looks again because it kept off another's object.
    st = await wait_status(
        kclient,
        namespace,
        lambda s: resource_entry(s, "creds")["status"] == "Synced",
        name="team-a",
    )
    assert st["sync"]["status"] == "Synced"
    secret = await kclient.get(resources.SECRETS, "creds", namespace)
    assert base64.b64decode(secret["data"]["token"]) == b"team-a-token"
    annotations = secret["metadata"]["annotations"]
    assert annotations["gitops.trainops.dev/repository-uid"] == created["metadata"]["uid"]


async def test_prune_follows_the_repositorys_uid_not_its_name(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("two", {"a.yaml": tf_job_yaml("a"), "b.yaml": tf_job_yaml("b")})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(first))
    await gitops.delete(namespace, "jobs")
    await aeventually(lambda: _missing(kclient, JOB_REPOSITORIES, "jobs", namespace), timeout=10)
    # Another repository under the same name, whose Git holds only `a`: it adopts `a` (its old
    # repository is gone) but does not prune `b`, which it never applied.
    other = Remote(remote.work.parent / "other")
    sha = other.commit("a only", {"a.yaml": tf_job_yaml("a")})
    created = await create_repository(kclient, repository(namespace, other.url, automated=PRUNE))
    st = await wait_status(kclient, namespace, synced(sha))
    assert [n for n, s in results(st) if s == "Pruned"] == []
    assert results(st) == [("a", "Synced")]
    job_a = await kclient.get(TF, "a", namespace)
    annotations = job_a["metadata"]["annotations"]
    assert annotations["gitops.trainops.dev/repository-uid"] == created["metadata"]["uid"]
    job_b = await kclient.get(TF, "b", namespace)
    assert (
        job_b["metadata"]["annotations"]["gitops.trainops.dev/repository-uid"]
        != (created["metadata"]["uid"])
    )


async def test_a_deadline_shortened_by_hand_and_healed_does_not_fail_the_job(
    gitops: GitOpsReconciler,
    controller: Any,  # noqa: F811
    kclient: Client,
    namespace: str,
    remote: Remote,
) -> None:
    from controller.lifecycle import DEADLINE_SETTLE

    manifest = tf_job_yaml("long").replace(
        "spec:\n  runMode:", "spec:\n  runPolicy:\n    activeDeadlineSeconds: 3600\n  runMode:"
    )
    sha = remote.commit("one", {"long.yaml": manifest})
    await create_repository(kclient, repository(namespace, remote.url, automated=PRUNE))
    await wait_status(kclient, namespace, synced(sha))

    async def started() -> Any:
        job = await kclient.get(TF, "long", namespace)
        return (job.get("status") or {}).get("startTime") or False

    await aeventually(started, timeout=15)
    began = time.monotonic()
    await aeventually(lambda: time.monotonic() - began > 2, timeout=5)  # 1 s is now passed
    await kclient.patch(
        TF, "long", {"spec": {"runPolicy": {"activeDeadlineSeconds": 1}}}, namespace,
        patch_type="merge",
    )  # fmt: skip

    async def healed() -> bool:
        job = await kclient.get(TF, "long", namespace)
        return bool(job["spec"]["runPolicy"]["activeDeadlineSeconds"] == 3600)

    await aeventually(healed, timeout=10)
    # Past the settle time the controller decides again, on the healed spec: not Failed.
    settled = time.monotonic() + DEADLINE_SETTLE + 2
    while time.monotonic() < settled:
        job = await kclient.get(TF, "long", namespace)
        assert (job.get("status") or {}).get("phase") != "Failed", job.get("status")
        await asyncio.sleep(0.5)  # an observation window, bounded by `settled`
    conditions = {c["type"]: c for c in job["status"]["conditions"]}
    assert conditions["Failed"]["status"] == "False"


async def _gone(client: Client, name: str, namespace: str) -> bool:
    return await get_or_none(client, TF, name, namespace) is None


async def _missing(client: Client, resource: Any, name: str, namespace: str) -> bool:
    return await get_or_none(client, resource, name, namespace) is None
