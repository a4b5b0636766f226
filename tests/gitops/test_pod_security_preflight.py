"""The GitOps pre-flight refuses a job that breaks its namespace's Pod Security level.

The namespace's `pod-security.kubernetes.io/enforce` label is read by the reconciler (with its
own rights, from a metadata-only informer of namespaces: no request a round) and passed to the pure step (`gitops.engine.preflight.pod_security`): the job
is an entry error at the line of the offending field, in the webhook's words, and is never
applied — instead of being applied and then never getting a pod. A label changed later is
seen at the next round, without a new commit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gitops.engine import preflight
from gitops.engine.entries import entries_from_text
from gitops.engine.tenancy import Boundaries
from gitops.runtime.acting import PROCESS_HOLDER
from gitops.runtime.manager import GitOpsReconciler
from kube import resources
from kube.client import Client
from tests.gitops.conftest import (
    Remote,
    create_repository,
    get_or_none,
    repository,
    started_reconciler,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import aeventually
from tests.support.tenants import DEPLOYER_RULES, service_account

ENFORCE = "pod-security.kubernetes.io/enforce"
AUTOMATED = {"prune": True, "selfHeal": True}
PRIVILEGED = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: privileged
spec:
  replicaSpecs:
    - type: worker
      template:
        spec:
          containers:
            - name: tensorflow
              image: busybox
              securityContext:
                privileged: true
"""
FIELD = "spec.replicaSpecs[0].template.spec.containers[0].securityContext.privileged"


@pytest.fixture
async def tenant_gitops(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path
) -> AsyncIterator[GitOpsReconciler]:
    running = await started_reconciler(
        kclient, namespace, tmp_path / "git-cache", Boundaries(allow_local_repos=True)
    )
    try:
        yield running
    finally:
        await running.manager.stop()


async def label(client: Client, namespace: str, level: str | None) -> None:
    await client.patch(resources.NAMESPACES, namespace, {"metadata": {"labels": {ENFORCE: level}}})


def entry(st: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [r for r in st.get("resources") or [] if r.get("name") == name]
    return dict(found)


async def test_a_job_breaking_the_level_is_an_entry_error_until_the_label_allows_it(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    await label(kclient, namespace, "baseline")
    sha = remote.commit(
        "two jobs", {"plain.yaml": tf_job_yaml("plain"), "privileged.yaml": PRIVILEGED}
    )
    body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="deployer")
    await create_repository(kclient, body)
    st = await wait_status(
        kclient,
        namespace,
        lambda st: (st.get("operationState") or {}).get("syncResult", {}).get("revision") == sha,
        timeout=30,
    )
    refused = entry(st, "privileged")
    assert (refused["file"], refused["line"], refused["status"]) == (
        "privileged.yaml",
        14,
        "OutOfSync",
    )
    assert refused["message"] == (
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
        f"{FIELD}: Forbidden: privileged containers: the namespace enforces Pod Security "
        f'"baseline" ({ENFORCE}); unset it'
    ), refused
    assert entry(st, "plain")["status"] == "Synced"
    assert await get_or_none(kclient, resources.TFJOBS, "privileged", namespace) is None

    # The label removed: the next rounds apply the job, with no new commit.
    await label(kclient, namespace, None)
    key = f"{namespace}/jobs"
    for _ in range(3):
        await tenant_gitops.reconciler.reconcile(key)
        if await get_or_none(kclient, resources.TFJOBS, "privileged", namespace) is not None:
            break
    assert await get_or_none(kclient, resources.TFJOBS, "privileged", namespace) is not None

    # The levels came from the watched namespaces, held for the process (not a repository), as
    # did the answer that the account exists.
    (watched,) = [
        i for i in tenant_gitops.manager.metadata_informers() if i.resource == resources.NAMESPACES
    ]
    assert tenant_gitops.metadata.held(PROCESS_HOLDER) == {
        ("v1", "namespaces", ""),
        ("v1", "serviceaccounts", ""),  # that the repository's account exists
    }
    await label(kclient, namespace, "restricted")
    tenants = tenant_gitops.reconciler.tenants
    await aeventually(
        lambda: (
            ((watched.get(None, namespace) or {}).get("metadata") or {}).get("labels", {})
            == {ENFORCE: "restricted", "kubernetes.io/metadata.name": namespace}
        ),
        timeout=10,
    )
    assert await tenants.levels([namespace, "no-such-namespace"]) == ((namespace, "restricted"),)


def test_the_pure_step_checks_each_job_against_its_own_namespace() -> None:
    checked = preflight.preflight(
        entries_from_text("jobs.yaml", PRIVILEGED + "---\n" + tf_job_yaml("plain"))
    )
    assert preflight.job_namespaces(checked, "team-a") == {"team-a"}
    assert [c.error for c in preflight.pod_security(checked, "team-a", {})] == [None, None]
    assert [c.error for c in preflight.pod_security(checked, "team-a", {"team-b": "baseline"})] == [
        None,
        None,
    ]
    refused, plain = preflight.pod_security(checked, "team-a", {"team-a": "baseline"})
    assert refused.desired is None and refused.line == 14
    assert refused.error is not None and FIELD in refused.error
    assert plain.error is None and plain.desired is not None
