"""A repository over its limits, end to end (real git, the embedded API server, no mocks of our
modules): the hostile revision is refused with a condition naming the limit and the file, the
jobs of the last good revision stay (nothing pruned, however many rounds pass), and the next
good commit syncs again. At the default limits, issue 29's 196 KB repository of 1,000,000
empty documents is refused at once, without parsing it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.engine.limits import Limits
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from kube import resources
from kube.client import Client
from kube.manager import Manager
from tests.gitops.conftest import (
    ALONE,
    UNRESTRICTED,
    Remote,
    create_repository,
    get_or_none,
    repository,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import aeventually

pytestmark = pytest.mark.slow


def hostile(files: int, documents: int) -> dict[str, str | bytes | None]:
    """Issue 29's repository: `files` files of `---\\n{}\\n` x `documents`."""
    return {f"hostile/f{i}.yaml": b"---\n{}\n" * documents for i in range(files)}


async def start(client: Client, namespace: str, cache: Path, limits: Limits) -> GitOpsReconciler:
    running = GitOpsReconciler(
        Manager(client, leader_election=ALONE),
        cache,
        GitOpsSettings(namespace=namespace, git_timeout=20, boundaries=UNRESTRICTED, limits=limits),
    )
    running.manager.start()
    await running.wait_synced(timeout=20)
    return running


@pytest.fixture
async def lowered(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path
) -> AsyncIterator[GitOpsReconciler]:
    running = await start(kclient, namespace, tmp_path / "cache", Limits(documents=50))
    try:
        yield running
    finally:
        await running.manager.stop()


def condition(st: dict[str, Any], type_: str = "ComparisonError") -> dict[str, Any] | None:
    return next((c for c in st.get("conditions") or [] if c.get("type") == type_), None)


def failures(running: GitOpsReconciler) -> float:
    value = running.metrics.registry.get_sample_value("trainops_gitops_git_fetch_failures_total")
    return value or 0.0


async def names(client: Client, namespace: str) -> set[str]:
    listed = await client.list(resources.TFJOBS, namespace)
    return {j["metadata"]["name"] for j in listed.get("items") or []}


async def test_a_revision_over_a_limit_is_refused_and_the_last_good_one_stays_applied(
    lowered: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    jobs: dict[str, str | bytes | None] = {
        f"jobs/{n}.yaml": tf_job_yaml(n) for n in ("alpha", "beta", "gamma")
    }
    good = remote.commit("three jobs", jobs)
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    await wait_status(
        kclient, namespace, lambda st: (st.get("sync") or {}).get("revision") == good, timeout=30
    )
    assert await names(kclient, namespace) == {"alpha", "beta", "gamma"}

    # The hostile commit also drops gamma from Git: were it applied, gamma would be pruned.
    bad = remote.commit("hostile", {**hostile(5, 20), "jobs/gamma.yaml": None})
    st = await wait_status(kclient, namespace, lambda st: condition(st) is not None, timeout=30)
    refused = condition(st)
    assert refused is not None and refused["reason"] == "LimitExceeded"
    assert refused["message"].startswith(
        "hostile/f2.yaml: more than 50 YAML documents in the revision (the documents limit, "
        "--max-repo-documents 50)"
    )
    assert st["sync"]["revision"] == good and st["summary"]["total"] == 3

    # Rounds go on (the interval is 1 s) and none of them applies or prunes anything.
    seen = failures(lowered)
    await aeventually(lambda: failures(lowered) >= seen + 3, timeout=30)
    st = await wait_status(kclient, namespace, lambda st: True)
    assert st["sync"]["revision"] == good and st["sync"]["revision"] != bad
    assert await names(kclient, namespace) == {"alpha", "beta", "gamma"}
    assert await get_or_none(kclient, resources.TFJOBS, "gamma", namespace) is not None

    fixed = remote.commit("hostile files gone", dict.fromkeys(hostile(5, 20)))
    st = await wait_status(
        kclient,
        namespace,
        lambda st: (st.get("sync") or {}).get("revision") == fixed and condition(st) is None,
        timeout=30,
    )
    assert st["summary"]["total"] == 2
    await aeventually(
        lambda: _equals(names(kclient, namespace), {"alpha", "beta"}), timeout=30
    )  # gamma, gone from Git since the refused commit, is pruned only now


async def _equals(value: Any, expected: Any) -> bool:
    return await value == expected


async def test_the_hostile_repository_of_issue_29_is_refused_at_the_default_limits(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path, remote: Remote
) -> None:
    good = remote.commit("a job", {"jobs/alpha.yaml": tf_job_yaml("alpha")})
    running = await start(kclient, namespace, tmp_path / "cache", Limits())
    try:
        await create_repository(kclient, repository(namespace, remote.url, automated={}))
        await wait_status(
            kclient, namespace, lambda st: (st.get("sync") or {}).get("revision") == good
        )
        remote.commit("1,000,000 empty documents", hostile(5, 200_000))
        packed = sum(f.stat().st_size for f in (remote.bare / "objects").rglob("*") if f.is_file())
        assert packed < 400_000  # loose objects here; issue 29's packed repository was 196 KB
        st = await wait_status(kclient, namespace, lambda st: condition(st) is not None, timeout=30)
        refused = condition(st)
        assert refused is not None and refused["reason"] == "LimitExceeded"
        assert refused["message"].startswith(
            "hostile/f0.yaml: more than 20000 YAML documents in the revision"
        )
        assert st["sync"]["revision"] == good and st["summary"]["total"] == 1
        memo = running.reconciler.memos[f"{namespace}/jobs"]
        assert len(memo.source.checked) == 1  # nothing of the hostile revision was kept
        assert await names(kclient, namespace) == {"alpha"}
    finally:
        await running.manager.stop()
