"""`deploy/`'s RBAC enforced by a real kube-apiserver: what each identity may do (issue #12).

Against the reference cluster (`TRAINOPS_TEST_KUBECONFIG`; skipped otherwise, see conftest)
with `deploy/` applied and a TokenRequest token per ServiceAccount:

- the API server's own account of what each identity may do (a SelfSubjectRulesReview, what
  `kubectl auth can-i --list` prints), less what every authenticated user may do, is exactly
  what deploy/ grants it: no other binding in the cluster adds to it;
- calls outside those Roles are refused: `kubectl auth can-i --token` says no, and the real
  call gets kube-apiserver's 403 (`… is forbidden: User "system:serviceaccount:…" cannot …`).

tests/test_deploy.py ties the same Roles to the calls the code makes, without a cluster;
test_rbac_at_work.py runs the webhook and the controller with those identities.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.reference.conftest import (
    CONTROLLER,
    NAMESPACE,
    WEBHOOK,
    Identity,
    service_account_kubeconfig,
)
from tests.support.cluster import Cluster

SECRET = "trainops-webhook-certs"
TF_CRD = "tensorflowtrainingjobs.batch.tensorstack.dev"

Rule = tuple[str, str, str, str]  # (apiGroup, resource, verb, resourceName or "")


# -- what the server says each identity may do ---------------------------------------------------


def _rules_review(kubeconfig: Path, namespace: str) -> set[Rule]:
    """The identity's rules in `namespace` as kube-apiserver computes them (what
    `kubectl auth can-i --list` prints), one (group, resource, verb, name) per combination."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": namespace},
    }
    out = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={kubeconfig}",
            "create",
            "--validate=false",
            "-f",
            "-",
            "-o",
            "json",
        ],
        input=json.dumps(review),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)["status"]
    assert not status.get("incomplete"), status.get("evaluationError")
    return {
        (group, resource, verb, name)
        for rule in status.get("resourceRules") or []
        for group in rule.get("apiGroups") or [""]
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
        for name in rule.get("resourceNames") or [""]
    }


def _granted_by_deploy(docs: tuple[dict[str, Any], ...], account: str, namespace: str) -> set[Rule]:
    """What deploy/'s bindings give ServiceAccount `account` (in trainops-system) in `namespace`."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    granted: set[Rule] = set()
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if subject not in binding["subjects"]:
            continue
        bound_in = binding["metadata"].get("namespace")
        if binding["kind"] == "RoleBinding" and bound_in != namespace:
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], bound_in if ref["kind"] == "Role" else None, ref["name"])]
        granted |= {
            (group, resource, verb, name)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
            for name in rule.get("resourceNames") or [""]
        }
    return granted


@pytest.fixture(scope="module")
def everyone(reference: Cluster, jobs_namespace: str, credentials: Path) -> dict[str, set[Rule]]:
    """The rules of a ServiceAccount nobody bound anything to, by namespace: what every
    authenticated user may do (self reviews), which is not ours to grant or to take away."""
    reference.kubectl("create", "serviceaccount", "nobody", "-n", jobs_namespace)
    nobody = service_account_kubeconfig(
        reference, jobs_namespace, "nobody", credentials / "nobody.kubeconfig"
    )
    return {ns: _rules_review(nobody.kubeconfig, ns) for ns in (NAMESPACE, jobs_namespace)}


@pytest.mark.parametrize("account", [CONTROLLER, WEBHOOK])
def test_the_api_server_grants_each_identity_exactly_what_deploy_says(
    account: str,
    reference: Cluster,
    deployed: tuple[dict[str, Any], ...],
    jobs_namespace: str,
    everyone: dict[str, set[Rule]],
    credentials: Path,
) -> None:
    identity = service_account_kubeconfig(
        reference, NAMESPACE, account, credentials / f"{account}-review.kubeconfig"
    )
    for namespace in (NAMESPACE, jobs_namespace):
        effective = _rules_review(identity.kubeconfig, namespace) - everyone[namespace]
        expected = _granted_by_deploy(deployed, account, namespace)
        assert expected, f"deploy/ binds nothing to {account}"
        assert effective == expected, (
            f"{account} in {namespace}: granted beyond deploy/: {sorted(effective - expected)}; "
            f"missing: {sorted(expected - effective)}"
        )


# -- calls outside the Roles ---------------------------------------------------------------------

# (account, `kubectl auth can-i` question, the real call, the 403 message without its subject).
# `{ns}` is the jobs' namespace; `{user}` the account's user name.
REFUSED: list[tuple[str, str, str, str]] = [
    (
        CONTROLLER,
        "list secrets -n kube-system",
        "get secrets -n kube-system",
        'secrets is forbidden: User "{user}" cannot list resource "secrets" in API group "" '
        'in the namespace "kube-system"',
    ),
    (
        CONTROLLER,
        f"delete customresourcedefinitions/{TF_CRD}",
        f"delete customresourcedefinition {TF_CRD}",
        f'customresourcedefinitions.apiextensions.k8s.io "{TF_CRD}" is forbidden: User "{{user}}" '
        'cannot delete resource "customresourcedefinitions" in API group "apiextensions.k8s.io" '
        "at the cluster scope",
    ),
    (
        CONTROLLER,
        "delete tensorflowtrainingjobs.batch.tensorstack.dev -n {ns}",
        "delete tensorflowtrainingjobs mnist -n {ns}",
        'tensorflowtrainingjobs.batch.tensorstack.dev "mnist" is forbidden: User "{user}" cannot '
        'delete resource "tensorflowtrainingjobs" in API group "batch.tensorstack.dev" in the '
        'namespace "{ns}"',
    ),
    (
        CONTROLLER,
        "get pods -n {ns}",
        "get pod mnist-chief-0 -n {ns}",
        'pods "mnist-chief-0" is forbidden: User "{user}" cannot get resource "pods" in API '
        'group "" in the namespace "{ns}"',
    ),
    (
        CONTROLLER,
        f"get leases/kube-controller-manager -n {NAMESPACE}",
        f"get lease kube-controller-manager -n {NAMESPACE}",
        'leases.coordination.k8s.io "kube-controller-manager" is forbidden: User "{user}" '
        'cannot get resource "leases" in API group "coordination.k8s.io" in the namespace '
        f'"{NAMESPACE}"',
    ),
    (
        WEBHOOK,
        "create pods -n {ns}",
        "run intruder --image=busybox --restart=Never -n {ns}",
        'pods is forbidden: User "{user}" cannot create resource "pods" in API group "" in the '
        'namespace "{ns}"',
    ),
    (
        WEBHOOK,
        f"list secrets -n {NAMESPACE}",
        f"get secrets -n {NAMESPACE}",
        'secrets is forbidden: User "{user}" cannot list resource "secrets" in API group "" in '
        f'the namespace "{NAMESPACE}"',
    ),
    (
        WEBHOOK,
        f"get secrets/other -n {NAMESPACE}",
        f"get secret other -n {NAMESPACE}",
        'secrets "other" is forbidden: User "{user}" cannot get resource "secrets" in API group '
        f'"" in the namespace "{NAMESPACE}"',
    ),
    (
        WEBHOOK,
        f"delete secrets/{SECRET} -n {NAMESPACE}",
        f"delete secret {SECRET} -n {NAMESPACE}",
        f'secrets "{SECRET}" is forbidden: User "{{user}}" cannot delete resource "secrets" in '
        f'API group "" in the namespace "{NAMESPACE}"',
    ),
    (
        WEBHOOK,
        f"update customresourcedefinitions/{TF_CRD}",
        f"patch customresourcedefinition {TF_CRD} --type=merge -p "
        '{"metadata":{"labels":{"a":"b"}}}',
        f'customresourcedefinitions.apiextensions.k8s.io "{TF_CRD}" is forbidden: User "{{user}}" '
        'cannot patch resource "customresourcedefinitions" in API group "apiextensions.k8s.io" '
        "at the cluster scope",
    ),
    (
        WEBHOOK,
        "get validatingwebhookconfigurations/other",
        "get validatingwebhookconfiguration other",
        'validatingwebhookconfigurations.admissionregistration.k8s.io "other" is forbidden: '
        'User "{user}" cannot get resource "validatingwebhookconfigurations" in API group '
        '"admissionregistration.k8s.io" at the cluster scope',
    ),
]


@pytest.mark.parametrize(
    ("account", "question", "call", "message"), REFUSED, ids=[f"{a}: {c}" for a, _, c, _ in REFUSED]
)
def test_a_call_outside_the_roles_is_refused_with_403(
    account: str,
    question: str,
    call: str,
    message: str,
    reference: Cluster,
    controller_identity: Identity,
    webhook_identity: Identity,
    jobs_namespace: str,
    tmp_path: Path,
) -> None:
    identity = {CONTROLLER: controller_identity, WEBHOOK: webhook_identity}[account]
    tmp_home = tmp_path

    def kubectl(line: str, *extra: str) -> subprocess.CompletedProcess[str]:
        words = line.replace("{ns}", jobs_namespace).split(" ")
        return subprocess.run(
            ["kubectl", *extra, *words],
            capture_output=True,
            text=True,
            timeout=60,
            # A HOME of its own: without one kubectl writes its cache under the working dir.
            env={"PATH": "/usr/bin:/bin", "KUBECONFIG": "/dev/null", "HOME": str(tmp_home)},
        )

    # `auth can-i` with the bare token (how `kubectl --token` users ask) …
    asked = kubectl(
        f"auth can-i {question}",
        f"--server={reference.url}",
        f"--certificate-authority={reference.ca_file}",
        f"--token={identity.token}",
    )
    assert (asked.stdout.strip(), asked.returncode) == ("no", 1), asked
    # … and the call itself, with the account's kubeconfig.
    done = kubectl(call, f"--kubeconfig={identity.kubeconfig}")
    assert done.returncode != 0, done.stdout
    expected = message.format(user=identity.user, ns=jobs_namespace)
    assert f"Error from server (Forbidden): {expected}" in done.stderr, done.stderr
