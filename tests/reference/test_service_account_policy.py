"""Who may name a ServiceAccount in a JobRepository, enforced by kube-apiserver (issue #29, 7).

deploy/gitops/serviceaccount-policy.yaml (installed with `deploy/`) is a
ValidatingAdmissionPolicy: creating a JobRepository that names an account, or changing the spec
of one, needs `impersonate` on that account. The attack it stops: a user allowed only to write
JobRepositories names an account bound to `admin` and, through a RoleBinding in their
repository, makes themselves admin of the namespace. Users here are ServiceAccounts with tokens
from the TokenRequest API, so kube-apiserver's RBAC and CEL authorizer decide, nothing of ours.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.reference.conftest import Identity, service_account_kubeconfig
from tests.support.cluster import Cluster, eventually

REPOSITORIES = ["jobrepositories"]
WRITER = [
    {
        "apiGroups": ["gitops.trainops.dev"],
        "resources": REPOSITORIES,
        "verbs": ["get", "list", "create", "update", "patch"],
    }
]


def apply(cluster: Cluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"kind": "List", "apiVersion": "v1", "items": list(docs)}),
    )


def account(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }


def role(namespace: str, name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": rules,
    }


def binding(namespace: str, name: str, kind: str, role_name: str, subject: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": subject, "namespace": namespace}],
    }


def jobrepository(namespace: str, name: str, account_name: str | None) -> str:
    spec: dict[str, Any] = {"repoURL": "https://git.example.com/team/jobs.git"}
    if account_name is not None:
        spec["serviceAccountName"] = account_name
    return json.dumps(
        {
            "apiVersion": "gitops.trainops.dev/v1alpha1",
            "kind": "JobRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


@pytest.fixture
def team(
    reference: Cluster, deployed: tuple[dict[str, Any], ...], tmp_path: Path
) -> Iterator[tuple[str, Identity, Identity]]:
    """A namespace with `admin-sa` (bound to `admin`), a RoleBinding left for the deleted
    account `ghost`, and two users: alice may only write JobRepositories; bob may also
    impersonate admin-sa and ghost."""
    ns = f"sa-policy-{uuid.uuid4().hex[:6]}"
    reference.kubectl("create", "namespace", ns)
    try:
        apply(
            reference,
            account(ns, "admin-sa"),
            binding(ns, "admin-sa", "ClusterRole", "admin", "admin-sa"),
            binding(ns, "ghost", "ClusterRole", "admin", "ghost"),
            account(ns, "alice"),
            role(ns, "writer", WRITER),
            binding(ns, "alice", "Role", "writer", "alice"),
            account(ns, "bob"),
            role(
                ns,
                "deployer",
                [
                    *WRITER,
                    {
                        "apiGroups": [""],
                        "resources": ["serviceaccounts"],
                        "resourceNames": ["admin-sa", "ghost"],
                        "verbs": ["impersonate"],
                    },
                ],
            ),
            binding(ns, "bob", "Role", "deployer", "bob"),
        )
        alice = service_account_kubeconfig(reference, ns, "alice", tmp_path / "alice")
        bob = service_account_kubeconfig(reference, ns, "bob", tmp_path / "bob")
        yield ns, alice, bob
    finally:
        reference.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def as_user(cluster: Cluster, who: Identity, *args: str, stdin: str | None = None) -> Any:
    return cluster.kubectl("--kubeconfig", str(who.kubeconfig), *args, stdin=stdin, check=False)


def test_naming_an_account_needs_impersonate_on_it(
    reference: Cluster, team: tuple[str, Identity, Identity]
) -> None:
    ns, alice, bob = team

    def refused_to_alice() -> str:
        out = as_user(
            reference, alice, "create", "-f", "-", stdin=jobrepository(ns, "mine", "admin-sa")
        )
        assert out.returncode == 1, out.stdout  # (the policy may take a moment to be active)
        return str(out.stderr)

    err = eventually(refused_to_alice, timeout=30, interval=0.5)
    assert (
        f'jobrepositories.gitops.trainops.dev "mine" is forbidden: ValidatingAdmissionPolicy '
        f"'trainops-jobrepository-service-account' with binding "
        f"'trainops-jobrepository-service-account' denied request: spec.serviceAccountName: "
        f"Forbidden: {alice.user} may not impersonate serviceaccount {ns}/admin-sa, so may not "
        "name it"
    ) in err, err
    # The same for an account that no longer exists but whose RoleBinding was left behind.
    ghost = as_user(reference, alice, "create", "-f", "-", stdin=jobrepository(ns, "g", "ghost"))
    assert ghost.returncode == 1 and f"serviceaccount {ns}/ghost" in ghost.stderr, ghost.stderr
    # Naming none is hers to do (the reconciler's --default-service-account, an admin's choice).
    assert (
        as_user(
            reference, alice, "create", "-f", "-", stdin=jobrepository(ns, "plain", None)
        ).returncode
        == 0
    )

    # bob may impersonate admin-sa: his repository is admitted.
    created = as_user(
        reference, bob, "create", "-f", "-", stdin=jobrepository(ns, "bobs", "admin-sa")
    )
    assert created.returncode == 0, created.stderr

    # alice may not point bob's repository elsewhere (its spec decides what admin-sa applies),
    # nor rename the account of her own to admin-sa; annotations (a sync request) are fine.
    moved = as_user(
        reference, alice, "patch", "jobrepository", "bobs", "-n", ns, "--type=merge",
        "-p", '{"spec":{"repoURL":"https://git.example.com/alice/evil.git"}}',
    )  # fmt: skip
    assert moved.returncode == 1 and "may not impersonate serviceaccount" in moved.stderr
    renamed = as_user(
        reference, alice, "patch", "jobrepository", "plain", "-n", ns, "--type=merge",
        "-p", '{"spec":{"serviceAccountName":"admin-sa"}}',
    )  # fmt: skip
    assert renamed.returncode == 1 and "may not impersonate serviceaccount" in renamed.stderr
    annotated = as_user(
        reference, alice, "annotate", "jobrepository", "bobs", "-n", ns,
        "gitops.trainops.dev/refresh-requested-at=2026-12-05T00:00:00Z",
    )  # fmt: skip
    assert annotated.returncode == 0, annotated.stderr
    names = reference.kubectl("get", "jobrepositories", "-n", ns, "-o", "name").stdout.split()
    assert sorted(names) == [
        "jobrepository.gitops.trainops.dev/bobs",
        "jobrepository.gitops.trainops.dev/plain",
    ]
