"""Fixtures for tests that only mean something on a real kube-apiserver (issue #12).

`reference` is the session's `cluster` when `TRAINOPS_TEST_KUBECONFIG` points at a real
Kubernetes API server that enforces RBAC (`hack/reference-cluster start DIR` writes
`DIR/kubeconfig`); otherwise every test asking for it is skipped with the reason. The embedded
API server authorizes nothing (one `system:masters` user), so what these tests prove cannot be
shown there. Telling the two apart happens here, in the tests, never in product code: the
probe asks the server whether an unbound ServiceAccount may list Secrets, which a server that
enforces RBAC refuses.

`service_account_kubeconfig` turns a ServiceAccount into a kubeconfig of its own: a token from
the TokenRequest API (`kubectl create token`), the admin kubeconfig's cluster entry (server and
CA), nothing else — so whatever runs with it has exactly that account's permissions.

`deployed` (once for the package) applies `deploy/` the way a user does: `kubectl apply
--server-side -k deploy`, after a server-side dry run that must pass without a warning (the
Namespace is created first: a dry run cannot create what the namespaced objects go into).
Everything it created except the CRDs is deleted afterwards: webhook configurations with
`failurePolicy: Fail` left pointing at a stopped webhook would refuse every job of the suites
that run next on the same cluster. `controller_identity` and `webhook_identity` are the two
ServiceAccounts' kubeconfigs (`gitops_identity` the GitOps service's); `jobs_namespace` is a user's namespace for the jobs.

`webhook` runs `trainops webhook --manage-certs` on loopback as the webhook's account, and
`admitting` points the webhook configurations at it (no node runs its pods here), so the API
server admits every training job of the package's tests through it — once for the package, as
the webhook configurations `deployed` installs refuse every job while nothing answers them.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import Cluster, eventually
from tests.support.processes import Process, start_trainops

__all__ = [
    "CONTROLLER",
    "GITOPS",
    "NAMESPACE",
    "WEBHOOK",
    "WEBHOOK_SECRET",
    "Identity",
    "admitting",
    "controller_identity",
    "credentials",
    "deployed",
    "gitops_identity",
    "jobs_namespace",
    "reference",
    "service_account_kubeconfig",
    "webhook",
    "webhook_identity",
]

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "trainops-system"
CONTROLLER = "trainops-controller"
WEBHOOK = "trainops-webhook"
GITOPS = "trainops-gitops"
WEBHOOK_SECRET = "trainops-webhook-certs"
_ENV = "TRAINOPS_TEST_KUBECONFIG"
_PROBE_ACCOUNT = "system:serviceaccount:default:trainops-rbac-probe"


@dataclass(frozen=True)
class Identity:
    """A ServiceAccount's own credentials."""

    namespace: str
    name: str
    token: str
    kubeconfig: Path

    @property
    def user(self) -> str:
        """The user name kube-apiserver gives the account (and prints in a 403)."""
        return f"system:serviceaccount:{self.namespace}:{self.name}"


@pytest.fixture(scope="session")
def reference(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The real cluster under test, or a skip saying why there is none."""
    if not os.environ.get(_ENV):
        pytest.skip(
            f"needs a real kube-apiserver: set {_ENV} to its admin kubeconfig "
            "(`hack/reference-cluster start DIR` writes DIR/kubeconfig)"
        )
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (it applies deploy/ and asks for tokens)")
    cluster: Cluster = request.getfixturevalue("cluster")
    probe = cluster.kubectl(
        "auth",
        "can-i",
        "list",
        "secrets",
        "--all-namespaces",
        f"--as={_PROBE_ACCOUNT}",
        check=False,
    )
    if probe.stdout.strip() != "no":
        pytest.skip(
            f"the API server at {cluster.url} ({_ENV}) does not enforce RBAC "
            f"(`kubectl auth can-i … --as={_PROBE_ACCOUNT}` answered "
            f"{(probe.stdout or probe.stderr).strip()!r}): is it the embedded API server?"
        )
    yield cluster


def service_account_kubeconfig(
    cluster: Cluster, namespace: str, name: str, out: Path, *, duration: str = "1h"
) -> Identity:
    """A kubeconfig at `out` that authenticates as ServiceAccount `namespace/name` only."""
    token = cluster.kubectl(
        "create", "token", name, "-n", namespace, f"--duration={duration}"
    ).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    context = next(c["context"] for c in admin["contexts"] if c["name"] == admin["current-context"])
    entry = copy.deepcopy(next(c for c in admin["clusters"] if c["name"] == context["cluster"]))
    ca = entry["cluster"].get("certificate-authority")
    if ca:  # relative to the admin kubeconfig's directory, not to `out`'s
        entry["cluster"]["certificate-authority"] = str(cluster.kubeconfig.parent / ca)
    user = f"{namespace}-{name}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [entry],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": user, "context": {"cluster": entry["name"], "user": user}}],
        "current-context": user,
    }
    out.write_text(yaml.safe_dump(config))
    out.chmod(0o600)
    return Identity(namespace, name, token, out)


# -- deploy/ installed, its identities -------------------------------------------------------------


@pytest.fixture(scope="package")
def deployed(reference: Cluster) -> Iterator[tuple[dict[str, Any], ...]]:
    """deploy/ applied with kustomize; yields the rendered objects; deletes all but the CRDs."""
    rendered = reference.kubectl("kustomize", str(ROOT / "deploy")).stdout
    docs = tuple(d for d in yaml.safe_load_all(rendered) if d)
    apply = ("apply", "--server-side", "--force-conflicts", "-k", str(ROOT / "deploy"))
    # A dry run cannot create the Namespace the namespaced objects go into: create it first.
    namespaces = [d for d in docs if d["kind"] == "Namespace"]
    reference.kubectl("apply", "--server-side", "-f", "-", stdin=_yaml(namespaces))
    try:
        dry = reference.kubectl(*apply, "--dry-run=server", check=False)
        assert dry.returncode == 0, f"server-side dry run of deploy/ refused:\n{dry.stderr}"
        # e.g. `Warning: would violate PodSecurity "restricted:latest"` for the Deployments.
        assert "Warning" not in dry.stderr, dry.stderr
        done = reference.kubectl(*apply)
        assert "Warning" not in done.stderr, done.stderr
        yield docs
    finally:
        installed = [d for d in docs if d["kind"] != "CustomResourceDefinition"]
        reference.kubectl(
            "delete", "--ignore-not-found", "--wait=true", "--timeout=60s", "-f", "-",
            stdin=_yaml(installed), check=False,
        )  # fmt: skip


def _yaml(docs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(docs)


@pytest.fixture(scope="package")
def credentials() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="trainops-rbac-") as tmp:
        yield Path(tmp)


@pytest.fixture(scope="package")
def controller_identity(
    reference: Cluster, deployed: tuple[dict[str, Any], ...], credentials: Path
) -> Identity:
    return service_account_kubeconfig(
        reference, NAMESPACE, CONTROLLER, credentials / "controller.kubeconfig"
    )


@pytest.fixture(scope="package")
def gitops_identity(
    reference: Cluster, deployed: tuple[dict[str, Any], ...], credentials: Path
) -> Identity:
    return service_account_kubeconfig(
        reference, NAMESPACE, GITOPS, credentials / "gitops.kubeconfig"
    )


@pytest.fixture(scope="package")
def webhook_identity(
    reference: Cluster, deployed: tuple[dict[str, Any], ...], credentials: Path
) -> Identity:
    return service_account_kubeconfig(
        reference, NAMESPACE, WEBHOOK, credentials / "webhook.kubeconfig"
    )


@pytest.fixture(scope="package")
def jobs_namespace(reference: Cluster, deployed: tuple[dict[str, Any], ...]) -> Iterator[str]:
    """A user's namespace, where the jobs (and an unbound ServiceAccount) live."""
    name = f"rbac-jobs-{uuid.uuid4().hex[:6]}"
    reference.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        reference.kubectl("delete", "namespace", name, "--wait=false", check=False)


# -- the webhook on loopback, as its account ---------------------------------------------------


@pytest.fixture(scope="package")
def webhook(webhook_identity: Identity, credentials: Path) -> Iterator[tuple[Process, int]]:
    """`trainops webhook --manage-certs` on loopback as the webhook's account (its Deployment's
    arguments, with a kubeconfig instead of the pod's token); yields it and its port."""
    cert_dir = credentials / "webhook-certs"
    cert_dir.mkdir()
    process = start_trainops(
        credentials / "webhook.log",
        "webhook",
        f"--kubeconfig={webhook_identity.kubeconfig}",
        f"--cert-dir={cert_dir}",
        "--host=127.0.0.1",
        "--port=0",
        "--shutdown-delay=0",
        "--manage-certs",
        f"--service={WEBHOOK}",
        f"--namespace={NAMESPACE}",
        f"--secret-name={WEBHOOK_SECRET}",
        f"--webhook-config-name={WEBHOOK}",
        "--resync-seconds=5",
        "--pod-security",
    )
    try:

        def listening() -> int:
            assert process.popen.poll() is None, process.text()
            for line in process.text().splitlines():
                if "webhook listening on https://127.0.0.1:" in line:
                    return int(line.split("https://127.0.0.1:")[1].split()[0])
            raise AssertionError("not listening yet")

        port = eventually(listening, timeout=60, interval=0.2)
        yield process, port
    finally:
        process.stop()


@pytest.fixture(scope="package")
def admitting(reference: Cluster, webhook: tuple[Process, int]) -> Process:
    """The webhook configurations pointed at the webhook on loopback (no node runs its pods
    here), so the API server calls it for every job; the caBundle stays the one the webhook's
    account injected."""
    process, port = webhook
    for kind, path in (
        ("mutatingwebhookconfiguration", "/mutate"),
        ("validatingwebhookconfiguration", "/validate"),
    ):
        url = f"https://127.0.0.1:{port}{path}"
        patch = [
            {"op": "remove", "path": "/webhooks/0/clientConfig/service"},
            {"op": "add", "path": "/webhooks/0/clientConfig/url", "value": url},
        ]
        reference.kubectl("patch", kind, WEBHOOK, "--type=json", "-p", json.dumps(patch))
    return process
