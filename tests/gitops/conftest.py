"""Fixtures for the GitOps reconciler against an API server and real git repositories.

A `Remote` is a bare repository in a temporary directory with a work clone: tests write
manifests, commit and push with the git CLI, and the reconciler fetches over `file://`. The
reconciler runs in the test's event loop against the session's embedded API server, watching
only the test's namespace (which is also the destination namespace); no controller runs, so
training jobs stay Progressing ("waiting for the controller").
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.engine.tenancy import Boundaries
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from tests.controller.conftest import crds, kclient  # noqa: F401
from tests.support.cluster import Cluster, aeventually

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


UNRESTRICTED = Boundaries.unrestricted()
"""The sync engine's tests act as the reconciler, anywhere (the tenancy tests set their own)."""

# A job the admission webhook denies: its cpu request is above its limit.
BAD_JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: bad
spec:
  replicaSpecs:
    - type: chief
      template:
        spec:
          containers:
            - name: tensorflow
              image: busybox
              resources:
                requests: {cpu: "2"}
                limits: {cpu: "1"}
"""


def tf_job_yaml(
    name: str, *, workers: int = 1, extra_meta: str = "", image: str = "busybox"
) -> str:
    """A small TensorFlowTrainingJob manifest (a chief and `workers` workers)."""
    return textwrap.dedent(
        f"""\
        apiVersion: batch.tensorstack.dev/v1beta1
        kind: TensorFlowTrainingJob
        metadata:
          name: {name}@@META@@
        spec:
          runMode:
            pause:
              enabled: false
          replicaSpecs:
            - type: chief
              template:
                spec:
                  containers:
                    - name: tensorflow
                      image: {image}
                      command: ["sh", "-c", "sleep 3600"]
            - type: worker
              replicas: {workers}
              template:
                spec:
                  containers:
                    - name: tensorflow
                      image: {image}
                      command: ["sh", "-c", "sleep 3600"]
        """
    ).replace("@@META@@", extra_meta)


class Remote:
    """A bare repository (HEAD → main) and a work clone to commit and push from."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.bare = root / "origin.git"
        self.work = root / "work"
        self.git(root, "init", "-q", "--bare", "-b", "main", str(self.bare))
        self.git(root, "clone", "-q", str(self.bare), str(self.work))
        self.git(self.work, "checkout", "-q", "-b", "main")

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    @staticmethod
    def git(cwd: Path, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
        ).stdout.strip()

    def commit(self, message: str, files: dict[str, str | bytes | None]) -> str:
        """Write (None: delete) `files`, commit and push; the new sha."""
        for name, content in files.items():
            path = self.work / name
            if content is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        self.git(self.work, "add", "-A")
        self.git(self.work, "commit", "-q", "--allow-empty", "-m", message)
        self.git(self.work, "push", "-q", "origin", "main")
        return self.git(self.work, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path: Path) -> Remote:
    return Remote(tmp_path)


ALONE = LeaderElection(enabled=False)


async def started_reconciler(
    client: Client, namespace: str, cache: Path, boundaries: Boundaries, *, reconcile: bool = True
) -> GitOpsReconciler:
    """A GitOps reconciler of `namespace`'s JobRepositories on its own Manager (no leader
    election), started and synced; `reconcile=False`: the test drives its rounds."""
    running = GitOpsReconciler(
        Manager(client, leader_election=ALONE),
        cache,
        GitOpsSettings(
            namespace=namespace, git_timeout=20, boundaries=boundaries, reconcile=reconcile
        ),
    )
    running.manager.start()
    await running.wait_synced(timeout=20)
    return running


"""A test's one reconciler: no Lease to win."""


@pytest.fixture(scope="session")
def repo_crd(cluster: Cluster, crds: None) -> None:  # noqa: F811
    cluster.wait_established("jobrepositories.gitops.trainops.dev")


@pytest.fixture
async def gitops(
    kclient: Client,  # noqa: F811
    repo_crd: None,
    namespace: str,
    tmp_path: Path,
) -> AsyncIterator[GitOpsReconciler]:
    running = GitOpsReconciler(
        Manager(kclient, leader_election=ALONE),
        tmp_path / "git-cache",
        GitOpsSettings(namespace=namespace, git_timeout=20, boundaries=UNRESTRICTED),
    )
    running.manager.start()
    try:
        await running.wait_synced(timeout=20)
        yield running
    finally:
        await running.manager.stop()


def repository(
    namespace: str,
    url: str,
    *,
    name: str = "jobs",
    path: str = ".",
    revision: str | None = None,
    automated: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "repoURL": url,
            "path": path,
            "interval": "1s",
            "syncPolicy": {"automated": automated if automated is not None else {}},
            **spec,
        },
    }
    if revision is not None:
        body["spec"]["targetRevision"] = revision
    return body


async def create_repository(client: Client, body: dict[str, Any]) -> dict[str, Any]:
    return await client.create(JOB_REPOSITORIES, body)


async def repo_status(client: Client, namespace: str, name: str = "jobs") -> dict[str, Any]:
    obj = await client.get(JOB_REPOSITORIES, name, namespace)
    return dict(obj.get("status") or {})


async def wait_status(
    client: Client, namespace: str, check: Any, *, name: str = "jobs", timeout: float = 15
) -> dict[str, Any]:
    """The repository's status once `check(status)` is true."""

    async def probe() -> dict[str, Any] | bool:
        st = await repo_status(client, namespace, name)
        return st if check(st) else False

    result: dict[str, Any] = await aeventually(probe, timeout=timeout, interval=0.1)
    return result


async def get_or_none(client: Client, resource: Any, name: str, namespace: str) -> Any:
    try:
        return await client.get(resource, name, namespace)
    except errors.NotFound:
        return None


def resource_entry(st: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in st.get("resources") or [] if r.get("name") == name]
    assert found, f"no resource {name} in {st.get('resources')}"
    return dict(found[0])


@pytest.fixture
async def other_namespace(kclient: Client) -> AsyncIterator[str]:  # noqa: F811
    """A second namespace for the test (another team's), deleted afterwards."""
    name = f"other-{uuid.uuid4().hex[:6]}"
    await kclient.create(resources.NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await kclient.delete(resources.NAMESPACES, name)
