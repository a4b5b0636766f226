"""Tenancy end to end: a JobRepository of team-a can do only what team-a may do.

The reconciler runs with the safe boundaries (local repositories allowed only because the
tests' remotes are `file://`; one test checks they are refused otherwise). The attack found
on a shared cluster is replayed: team-a's repository holds a ClusterRoleBinding to
cluster-admin, a Namespace, a CRD, a Secret and a Pod in team-b, beside an allowed job and
ConfigMap. The boundary refusals need no RBAC and run on both servers; the tests about what
the API server's RBAC refuses to an impersonated ServiceAccount run only on a real API server
(`TRAINOPS_TEST_KUBECONFIG`, hack/reference-tests): the embedded one does not enforce RBAC.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from gitops.engine.tenancy import Boundaries
from gitops.runtime.manager import GitOpsReconciler, GitOpsSettings
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection, Manager
from kube.resources import Resource
from tests.gitops.conftest import (
    Remote,
    create_repository,
    get_or_none,
    repository,
    started_reconciler,
    tf_job_yaml,
    wait_status,
)
from tests.reference.conftest import service_account_kubeconfig
from tests.support.cluster import Cluster
from tests.support.githttp import serve_git_http
from tests.support.tenants import DEPLOYER_RULES, service_account

REAL_RBAC = pytest.mark.skipif(
    not os.environ.get("TRAINOPS_TEST_KUBECONFIG"),
    reason="the embedded API server does not enforce RBAC (run on the reference cluster: "
    "hack/reference-tests)",
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
AUTOMATED = {"prune": True, "selfHeal": True}

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  lr: '0.1'\n"


def attack(other_namespace: str, suffix: str) -> str:
    """Everything the attack applied, in one file (line numbers asserted below)."""
    return f"""\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: pwn-{suffix}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects: [{{kind: ServiceAccount, name: default, namespace: {other_namespace}}}]
---
apiVersion: v1
kind: Namespace
metadata:
  name: evil-{suffix}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets{suffix}.evil.example.com
spec:
  group: evil.example.com
  names: {{plural: widgets{suffix}, kind: Widget, singular: widget{suffix}}}
  scope: Namespaced
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}]
---
apiVersion: v1
kind: Secret
metadata:
  name: stolen
  namespace: {other_namespace}
stringData: {{token: x}}
---
apiVersion: v1
kind: Pod
metadata:
  name: implant
  namespace: {other_namespace}
spec:
  containers: [{{name: c, image: busybox}}]
"""


# Lines of the refused fields in `attack`: `kind:` of the cluster-scoped ones, `namespace:`
# of the namespaced ones.
REFUSED_AT = {
    "ClusterRoleBinding": 2,
    "Namespace": 9,
    "CustomResourceDefinition": 14,
    "Secret": 27,
    "Pod": 34,
}


async def reconciler(
    client: Client, namespace: str, cache: Path, boundaries: Boundaries
) -> GitOpsReconciler:
    return await started_reconciler(client, namespace, cache, boundaries)


@pytest.fixture
async def tenant_gitops(
    kclient: Client, repo_crd: None, namespace: str, tmp_path: Path
) -> AsyncIterator[GitOpsReconciler]:
    """The safe boundaries, but for the tests' local remotes."""
    running = await reconciler(
        kclient, namespace, tmp_path / "git-cache", Boundaries(allow_local_repos=True)
    )
    try:
        yield running
    finally:
        await running.manager.stop()


def synced(revision: str) -> Any:
    return lambda st: (
        (st.get("operationState") or {}).get("syncResult", {}).get("revision") == revision
    )


def condition(type_: str) -> Any:
    return lambda st: [c for c in st.get("conditions") or [] if c["type"] == type_]


def entries(st: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["kind"]: r for r in st.get("resources") or []}


async def test_a_repository_reaches_only_its_own_namespace_and_each_refusal_is_at_its_line(
    tenant_gitops: GitOpsReconciler,
    kclient: Client,
    namespace: str,
    other_namespace: str,
    remote: Remote,
) -> None:
    suffix = namespace[-6:]
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    sha = remote.commit(
        "team-a's jobs, and an attack",
        {
            "attack.yaml": attack(other_namespace, suffix),
            "job.yaml": tf_job_yaml("train"),
            "settings.yaml": CONFIGMAP,
        },
    )
    body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="deployer")
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, synced(sha), timeout=30)

    # Only the allowed objects exist, applied as team-a's account.
    job = await kclient.get(resources.TFJOBS, "train", namespace)
    assert job["metadata"]["annotations"]["gitops.trainops.dev/repository"] == f"{namespace}/jobs"
    assert (await kclient.get(resources.CONFIGMAPS, "settings", namespace))["data"] == {"lr": "0.1"}
    assert await get_or_none(kclient, resources.SECRETS, "stolen", other_namespace) is None
    assert await get_or_none(kclient, resources.PODS, "implant", other_namespace) is None
    for resource, name in (
        (CLUSTER_ROLE_BINDINGS, f"pwn-{suffix}"),
        (resources.NAMESPACES, f"evil-{suffix}"),
        (CRDS, f"widgets{suffix}.evil.example.com"),
    ):
        with pytest.raises(errors.NotFound):
            await kclient.get(resource, name)
    # team-b is untouched: nothing of ours was written there.
    for resource in (resources.SECRETS, resources.PODS, resources.CONFIGMAPS):
        listed = await kclient.list(
            resource, other_namespace, label_selector="gitops.trainops.dev/managed"
        )
        assert listed["items"] == []

    # Each refusal is a resource entry at its file and line, naming the rule and the flag.
    by_kind = entries(st)
    for kind, line in REFUSED_AT.items():
        entry = by_kind[kind]
        assert (entry["file"], entry["line"], entry["status"]) == ("attack.yaml", line, "OutOfSync")
        flag = (
            "--allow-cross-namespace" if kind in ("Secret", "Pod") else "--allow-cluster-resources"
        )
        assert flag in entry["message"], entry
    assert by_kind["Secret"]["message"].startswith(
        f"namespace {other_namespace} is not the JobRepository's"
    )
    assert "ClusterRoleBinding is cluster-scoped" in by_kind["ClusterRoleBinding"]["message"]
    assert by_kind["TensorFlowTrainingJob"]["status"] == "Synced"
    assert by_kind["ConfigMap"]["status"] == "Synced"
    op = st["operationState"]
    assert op["phase"] == "Failed"
    assert op["message"].startswith("2 applied") and "5 invalid" in op["message"]
    assert "attack.yaml:2: ClusterRoleBinding is cluster-scoped" in op["message"]


async def test_a_local_repository_is_refused_unless_the_reconciler_allows_it(
    kclient: Client, repo_crd: None, namespace: str, remote: Remote, tmp_path: Path
) -> None:
    remote.commit("a job", {"job.yaml": tf_job_yaml("local")})
    running = await reconciler(kclient, namespace, tmp_path / "cache", Boundaries())
    try:
        body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="x")
        await create_repository(kclient, body)
        st = await wait_status(kclient, namespace, condition("ComparisonError"))
    finally:
        await running.manager.stop()
    (cond,) = condition("ComparisonError")(st)
    assert cond["message"].startswith(f"repoURL {remote.url} is on the reconciler's own disk")
    assert cond["message"].endswith("with --allow-local-repos")
    assert st["sync"]["status"] == "Unknown"
    assert await get_or_none(kclient, resources.TFJOBS, "local", namespace) is None


async def test_a_repository_naming_no_service_account_is_refused_saying_what_to_set(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    remote.commit("a job", {"job.yaml": tf_job_yaml("nobody")})
    await create_repository(kclient, repository(namespace, remote.url, automated=AUTOMATED))
    st = await wait_status(kclient, namespace, condition("ComparisonError"))
    (cond,) = condition("ComparisonError")(st)
    assert "set spec.serviceAccountName" in cond["message"]
    assert "--default-service-account NAME" in cond["message"]
    assert await get_or_none(kclient, resources.TFJOBS, "nobody", namespace) is None


async def test_a_repository_naming_a_service_account_that_does_not_exist_is_refused(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """The API server impersonates any name, so a RoleBinding left by a deleted account would
    still grant its rights: a missing account is refused as a Pod naming one is, before
    anything is fetched, applied or pruned, and what was applied before stays."""
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    first = remote.commit("a job", {"job.yaml": tf_job_yaml("kept")})
    body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="deployer")
    await create_repository(kclient, body)
    await wait_status(kclient, namespace, synced(first), timeout=30)
    kept = await kclient.get(resources.TFJOBS, "kept", namespace)

    # Renamed to an account that does not exist, then a commit that would prune the job and
    # create another: nothing of it happens, the condition names the field. (The rename
    # first: a commit pushed before it could be synced, rightly, by the round in between.)
    await kclient.patch(
        JOB_REPOSITORIES,
        "jobs",
        {"spec": {"serviceAccountName": "ghost"}},
        namespace,
    )
    st = await wait_status(kclient, namespace, condition("ComparisonError"), timeout=30)
    remote.commit("the job replaced", {"job.yaml": None, "other.yaml": tf_job_yaml("other")})
    (cond,) = condition("ComparisonError")(st)
    assert cond["message"].startswith(
        f"spec.serviceAccountName 'ghost': serviceaccount \"ghost\" not found in namespace "
        f"{namespace}: nothing is applied or pruned"
    ), cond
    assert st["sync"]["revision"] == first
    for _ in range(3):  # more rounds change nothing
        await tenant_gitops.reconciler.reconcile(f"{namespace}/jobs")
    still = await kclient.get(resources.TFJOBS, "kept", namespace)
    assert still["metadata"]["uid"] == kept["metadata"]["uid"]
    assert await get_or_none(kclient, resources.TFJOBS, "other", namespace) is None


@pytest.fixture
async def sink() -> AsyncIterator[tuple[str, list[dict[str, str]]]]:
    """A loopback HTTP server that records every request's headers (a credential sink)."""
    seen: list[dict[str, str]] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="x"'})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/x.git", seen
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "url_key",
    [None, "https://git.example.com/team-a/"],
    ids=["a Secret naming no URL", "a Secret for another URL"],
)
async def test_a_secret_ref_sends_no_credentials_to_a_url_its_secret_does_not_name(
    tenant_gitops: GitOpsReconciler,
    kclient: Client,
    namespace: str,
    sink: tuple[str, list[dict[str, str]]],
    url_key: str | None,
) -> None:
    url, seen = sink
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    string_data = {"username": "db", "password": "hunter2-prod"}
    if url_key is not None:
        string_data["url"] = url_key
    await kclient.create(
        resources.SECRETS,
        {"metadata": {"name": "prod-db", "namespace": namespace}, "stringData": string_data},
    )
    body = repository(
        namespace,
        url,
        automated=AUTOMATED,
        serviceAccountName="deployer",
        secretRef={"name": "prod-db"},
    )
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, condition("ComparisonError"))
    (cond,) = condition("ComparisonError")(st)
    assert cond["message"].startswith(f"secret {namespace}/prod-db (secretRef) ")
    assert (
        "credentials are not sent" in cond["message"]
        or "names no repository URL" in cond["message"]
    )
    assert "hunter2" not in cond["message"]
    assert seen == []  # not a single request: nothing was sent, credentials or not


async def test_a_secret_ref_naming_the_url_authenticates_to_a_smart_http_remote(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """The other side of the sink test: over http:// (git http-backend on loopback, Basic
    authentication required), a Secret that names the server's URL prefix is what lets the
    repository sync, and the server sees those credentials and no others."""
    sha = remote.commit("a job", {"job.yaml": tf_job_yaml("over-http")})
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    async with serve_git_http(remote.bare.parent, username="db", password="hunter2-prod") as server:
        await kclient.create(
            resources.SECRETS,
            {
                "metadata": {"name": "git-creds", "namespace": namespace},
                "stringData": {
                    "username": "db",
                    "password": "hunter2-prod",
                    "url": server.base + "/",
                },
            },
        )
        body = repository(
            namespace,
            server.url_of(remote.bare.name),
            automated=AUTOMATED,
            serviceAccountName="deployer",
            secretRef={"name": "git-creds"},
        )
        await create_repository(kclient, body)
        await wait_status(kclient, namespace, synced(sha), timeout=60)
    assert await get_or_none(kclient, resources.TFJOBS, "over-http", namespace) is not None
    expected = "Basic " + base64.b64encode(b"db:hunter2-prod").decode()
    assert expected in server.authorizations
    assert set(server.authorizations) <= {None, expected}


@REAL_RBAC
async def test_a_service_account_without_rights_gets_the_api_servers_forbidden_per_resource(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    await service_account(kclient, namespace, "nobody", None)
    sha = remote.commit("jobs", {"job.yaml": tf_job_yaml("train"), "settings.yaml": CONFIGMAP})
    body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="nobody")
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, synced(sha), timeout=30)
    user = f'User "system:serviceaccount:{namespace}:nobody"'
    by_kind = {r["kind"]: r for r in st["operationState"]["syncResult"]["resources"]}
    cm, job = by_kind["ConfigMap"], by_kind["TensorFlowTrainingJob"]
    assert cm["message"].startswith(f'settings.yaml:1: configmaps "settings" is forbidden: {user}')
    assert 'cannot patch resource "configmaps"' in cm["message"]
    assert f'in the namespace "{namespace}"' in cm["message"]
    assert job["message"].startswith(
        f'job.yaml:1: tensorflowtrainingjobs.batch.tensorstack.dev "train" is forbidden: {user}'
    )
    assert st["operationState"]["phase"] == "Failed"
    assert await get_or_none(kclient, resources.CONFIGMAPS, "settings", namespace) is None
    assert await get_or_none(kclient, resources.TFJOBS, "train", namespace) is None


@REAL_RBAC
async def test_the_secret_ref_is_read_as_the_service_account(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    await service_account(kclient, namespace, "nobody", None)
    await kclient.create(
        resources.SECRETS,
        {
            "metadata": {"name": "creds", "namespace": namespace},
            "stringData": {"token": "t0ken-value", "url": remote.url},
        },
    )
    remote.commit("a job", {"job.yaml": tf_job_yaml("train")})
    body = repository(
        namespace, remote.url, serviceAccountName="nobody", secretRef={"name": "creds"}
    )
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, condition("ComparisonError"))
    (cond,) = condition("ComparisonError")(st)
    assert cond["message"].startswith(
        f'secret {namespace}/creds (secretRef): secrets "creds" is forbidden: '
        f'User "system:serviceaccount:{namespace}:nobody" cannot get resource "secrets"'
    )


@REAL_RBAC
async def test_the_repository_objects_status_is_still_written_by_the_reconciler(
    tenant_gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    """The account needs no rights on JobRepositories: status, Events and the repository's
    own object stay the reconciler's."""
    await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
    sha = remote.commit("a job", {"job.yaml": tf_job_yaml("train")})
    body = repository(namespace, remote.url, automated=AUTOMATED, serviceAccountName="deployer")
    await create_repository(kclient, body)
    st = await wait_status(kclient, namespace, synced(sha), timeout=30)
    assert st["sync"]["status"] == "Synced"
    assert (await kclient.get(JOB_REPOSITORIES, "jobs", namespace))["status"]["sync"][
        "revision"
    ] == sha


RBAC = Path(__file__).resolve().parents[2] / "deploy" / "gitops" / "rbac.yaml"


@REAL_RBAC
async def test_the_reconciler_needs_only_the_rights_of_deploy_gitops(
    cluster: Cluster,
    kclient: Client,
    repo_crd: None,
    namespace: str,
    other_namespace: str,
    remote: Remote,
    tmp_path: Path,
) -> None:
    """deploy/gitops/rbac.yaml, bound to a ServiceAccount whose token runs the reconciler
    (its Lease moved into the test's namespace): it syncs team-a's repository as team-a's
    account, and could not write a ConfigMap itself."""
    suffix = uuid.uuid4().hex[:6]
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            meta["name"] += f"-{suffix}"
        else:  # the ServiceAccount, and the Lease's Role and RoleBinding
            meta["namespace"] = namespace
        if "roleRef" in doc:
            if doc["roleRef"]["kind"] == "ClusterRole":
                doc["roleRef"]["name"] += f"-{suffix}"
            doc["subjects"][0]["namespace"] = namespace
    cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    try:
        identity = service_account_kubeconfig(
            cluster, namespace, "trainops-gitops", tmp_path / "gitops.kubeconfig"
        )
        await service_account(kclient, namespace, "deployer", DEPLOYER_RULES)
        sha = remote.commit(
            "jobs and an attack",
            {"attack.yaml": attack(other_namespace, suffix), "job.yaml": tf_job_yaml("train")},
        )
        async with await Client.connect(identity.kubeconfig) as own:
            with pytest.raises(errors.Forbidden):
                await own.create(
                    resources.CONFIGMAPS, {"metadata": {"name": "x", "namespace": namespace}}
                )
            running = GitOpsReconciler(
                Manager(own, leader_election=LeaderElection(namespace=namespace)),
                tmp_path / "cache",
                GitOpsSettings(
                    namespace=namespace,
                    git_timeout=20,
                    boundaries=Boundaries(allow_local_repos=True),
                ),
            )
            running.manager.start()
            try:
                await running.wait_synced(timeout=20)
                body = repository(
                    namespace, remote.url, automated=AUTOMATED, serviceAccountName="deployer"
                )
                await create_repository(kclient, body)
                st = await wait_status(kclient, namespace, synced(sha), timeout=40)
            finally:
                await running.manager.stop()
        job = await kclient.get(resources.TFJOBS, "train", namespace)
        managers = {m["manager"] for m in job["metadata"]["managedFields"]}
        assert "trainops-gitops" in managers
        by_kind = entries(st)
        assert by_kind["TensorFlowTrainingJob"]["status"] == "Synced"
        assert {k for k, r in by_kind.items() if r.get("file") == "attack.yaml"} == set(REFUSED_AT)
        with pytest.raises(errors.NotFound):
            await kclient.get(CLUSTER_ROLE_BINDINGS, f"pwn-{suffix}")
    finally:
        for doc in docs:
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                cluster.kubectl("delete", doc["kind"], doc["metadata"]["name"], check=False)
