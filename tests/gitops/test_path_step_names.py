"""A manifest named `.` or `..` is an entry error at its `name:` line; the rest of the
repository syncs. Such a name in a URL is a path step (`…/configmaps/..` is the Namespace,
`…/tensorflowtrainingjobs/.` the collection), which `kube` refuses to build: before the
boundary step named it, the round ended in an internal error, retried forever. A `secretRef`
named so is a ComparisonError saying why."""

from __future__ import annotations

from typing import Any

import pytest

from gitops.runtime.manager import GitOpsReconciler
from kube.client import Client
from tests.gitops.conftest import (
    Remote,
    create_repository,
    repository,
    tf_job_yaml,
    wait_status,
)

pytestmark = pytest.mark.usefixtures("repo_crd")

DOTS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ".."
data: {a: b}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: "."
data: {a: b}
"""


async def test_a_path_step_as_a_name_is_an_entry_error_and_the_rest_syncs(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit("dots", {"a.yaml": tf_job_yaml("a"), "dots.yaml": DOTS})
    await create_repository(kclient, repository(namespace, remote.url, automated={}))
    st = await wait_status(
        kclient,
        namespace,
        lambda s: ((s.get("operationState") or {}).get("syncResult") or {}).get("revision") == sha,
    )
    assert not st.get("conditions"), st.get("conditions")  # no ComparisonError, no crash
    entries = {(r["file"], r.get("line")): r for r in st["resources"]}
    assert entries[("dots.yaml", 4)]["message"] == "metadata.name '..': '..' is not a name"
    assert entries[("dots.yaml", 11)]["message"] == "metadata.namespace '.': '.' is not a name"
    (job,) = [r for r in st["resources"] if r["kind"] == "TensorFlowTrainingJob"]
    assert job["status"] == "Synced"


async def test_a_secret_ref_named_dot_dot_is_refused_as_a_comparison_error(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    remote.commit("one", {"a.yaml": tf_job_yaml("a")})
    body = repository(namespace, remote.url, secretRef={"name": ".."})
    await create_repository(kclient, body)

    def refused(s: dict[str, Any]) -> list[dict[str, Any]]:
        return [c for c in s.get("conditions") or [] if c.get("type") == "ComparisonError"]

    st = await wait_status(kclient, namespace, refused)
    (condition,) = refused(st)
    assert condition["message"] == "spec.secretRef.name '..': '..' is not a name"
