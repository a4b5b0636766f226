"""The GitOps reconciler on a large or unlucky repository, end to end (real git, the embedded
API server, no mocks of our modules): a push racing a round, prune of kinds applied before a
restart, and a status that stays small while the HTTP API serves every resource."""

from __future__ import annotations

import shlex
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.source.git import Git
from kube import resources
from kube.client import Client
from kube.manager import Manager
from kube.resources import Resource
from tests.gitops.conftest import (
    ALONE,
    GIT_ENV,
    UNRESTRICTED,
    Remote,
    create_repository,
    get_or_none,
    repository,
    wait_status,
)
from tests.support.cluster import aeventually

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: '{v}'\n"


def reconciler(
    client: Client, namespace: str, cache: Path, git: Git | None = None
) -> GitOpsReconciler:
    return GitOpsReconciler(
        Manager(client, leader_election=ALONE),
        cache,
        GitOpsSettings(namespace=namespace, git_timeout=20, boundaries=UNRESTRICTED),
        git=git,
    )


@pytest.fixture
async def racing(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path, remote: Remote
) -> AsyncIterator[tuple[GitOpsReconciler, Path]]:
    """A reconciler whose git pushes a new commit right after the fetch of a round has read its
    commit (`git log`), when the file `trigger` exists: someone else's push between the fetch
    and the checkout."""
    trigger = tmp_path / "trigger"
    push = tmp_path / "push.sh"
    env = " ".join(
        f"{k}={shlex.quote(GIT_ENV[k])}"
        for k in (
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
        )
    )
    work = shlex.quote(str(remote.work))
    push.write_text(
        "#!/bin/sh\nset -e\nunset GIT_INDEX_FILE GIT_DIR\n"
        f"cd {work}\ngit rm -q alpha.yaml\n"
        f"printf '%s' {shlex.quote(CM.format(name='beta', v='B'))} > beta.yaml\n"
        f"git add beta.yaml\n{env} git commit -q -m B\ngit push -q origin main\n"
    )
    wrapper = tmp_path / "git"
    real = shutil.which("git")
    assert real is not None
    wrapper.write_text(
        f'#!/bin/sh\n{real} "$@"\nrc=$?\n'
        f'case " $* " in *" log "*)\n'
        f"  if [ -e {trigger} ]; then rm -f {trigger}; GIT_CONFIG_GLOBAL=/dev/null "
        f"sh {push} >{push}.log 2>&1; fi;;\nesac\nexit $rc\n"
    )
    wrapper.chmod(0o755)
    running = reconciler(
        kclient,
        namespace,
        tmp_path / "cache",
        Git(tmp_path / "cache", timeout=20, git=str(wrapper)),
    )
    running.manager.start()
    try:
        await running.wait_synced(timeout=20)
        yield running, trigger
    finally:
        await running.manager.stop()


async def test_a_push_between_resolve_and_checkout_applies_the_resolved_commit(
    racing: tuple[GitOpsReconciler, Path], kclient: Client, namespace: str, remote: Remote
) -> None:
    a = remote.commit("A", {"alpha.yaml": CM.format(name="alpha", v="A")})
    _, trigger = racing
    trigger.write_text("")
    await create_repository(kclient, repository(namespace, remote.url, automated={}))
    st = await wait_status(kclient, namespace, lambda st: len(st.get("history") or []) >= 2)
    b = remote.git(remote.work, "rev-parse", "HEAD")
    assert b != a and not trigger.exists()
    # The first sync recorded A and applied A's manifests (alpha), not B's (beta only).
    assert [h["revision"] for h in st["history"]] == [a, b]
    alpha = await get_or_none(kclient, resources.CONFIGMAPS, "alpha", namespace)
    assert alpha is not None and alpha["data"] == {"v": "A"}
    beta = await aeventually(
        lambda: _present(kclient, resources.CONFIGMAPS, "beta", namespace), timeout=15
    )
    assert beta["data"] == {"v": "B"}


ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True)
ROLE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: reader
rules:
  - apiGroups: [""]
    resources: ["configmaps"]
    verbs: ["get"]
"""


async def test_a_kind_applied_before_a_restart_is_pruned_after_it(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path, remote: Remote
) -> None:
    a = remote.commit("A", {"role.yaml": ROLE, "cm.yaml": CM.format(name="keep", v="1")})
    await create_repository(kclient, repository(namespace, remote.url, automated={"prune": True}))
    first = reconciler(kclient, namespace, tmp_path / "cache")
    first.manager.start()
    try:
        st = await wait_status(
            kclient, namespace, lambda st: (st.get("sync") or {}).get("revision") == a
        )
        assert {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"} in st["appliedKinds"]
        assert await get_or_none(kclient, ROLES, "reader", namespace) is not None
    finally:
        await first.manager.stop()
    b = remote.commit("B: no role", {"role.yaml": None})
    second = reconciler(kclient, namespace, tmp_path / "cache")  # a restart: nothing in memory
    second.manager.start()
    try:
        await wait_status(
            kclient, namespace, lambda st: (st.get("sync") or {}).get("revision") == b
        )
        await aeventually(lambda: _gone(kclient, ROLES, "reader", namespace), timeout=15)
        assert await get_or_none(kclient, resources.CONFIGMAPS, "keep", namespace) is not None
    finally:
        await second.manager.stop()


async def _present(
    client: Client, resource: object, name: str, namespace: str
) -> dict[str, Any] | bool:
    return await get_or_none(client, resource, name, namespace) or False


async def _gone(client: Client, resource: object, name: str, namespace: str) -> bool:
    return await get_or_none(client, resource, name, namespace) is None


async def test_a_big_repository_stores_a_bounded_status_and_the_hub_serves_every_resource(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path, remote: Remote
) -> None:
    n = 520  # over status.RESOURCE_LIMIT
    items = "".join(
        f"  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: cm-{i:04d}}}, data: {{v: '1'}}}}\n"
        for i in range(n)
    )
    sha = remote.commit("many", {"all.yaml": f"apiVersion: v1\nkind: List\nitems:\n{items}"})
    await create_repository(kclient, repository(namespace, remote.url, automated={}))
    running = reconciler(kclient, namespace, tmp_path / "cache")
    running.manager.start()
    try:
        st = await wait_status(
            kclient,
            namespace,
            lambda st: (
                (st.get("sync") or {}).get("revision") == sha
                and (st.get("sync") or {}).get("status") == "Synced"
            ),
            timeout=120,
        )
        assert st["summary"]["total"] == n and st["summary"]["sync"] == {"Synced": n}
        assert st["resources"] == [] and st["summary"]["listed"] == 0
        served = running.repository(namespace, "jobs")
        names = sorted(r["name"] for r in served["status"]["resources"])
        assert names == [f"cm-{i:04d}" for i in range(n)]
        assert served["status"]["resources"][0]["file"] == "all.yaml"
    finally:
        await running.manager.stop()
