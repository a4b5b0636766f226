"""GitOps on the kind cluster, shared by tests/e2e/test_gitops*.py: small training jobs, the Git
host's pod (tests/e2e/gitserver.py in the product image, its repositories seeded from
ConfigMaps), tenants (a ServiceAccount repositories act as, a user), JobRepositories and their
status."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kubectl import PRODUCT_IMAGE, get, kubectl
from tests.support.tenants import DEPLOYER_RULES, team_role

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "trainops-system"
TF = "tensorflowtrainingjobs"
MANY = 200


def job_manifest(name: str, command: list[str], *, paused: bool = False) -> dict[str, Any]:
    """A small TensorFlowTrainingJob of one worker in the product image (on every node)."""
    spec: dict[str, Any] = {
        "runPolicy": {"backoffLimit": 1, "activeDeadlineSeconds": 600},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "tensorflow",
                                "image": PRODUCT_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "command": command,
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"cpu": "500m", "memory": "128Mi"},
                                },
                            }
                        ]
                    }
                },
            }
        ],
    }
    if paused:
        spec["runMode"] = {"pause": {"enabled": True}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name},
        "spec": spec,
    }


# What the Git host serves: repository -> {file: content}.
SEEDS = {
    "hello": {
        "hello.yaml": yaml.safe_dump(
            job_manifest("hello", ["python3", "-c", "print('hello from git')"])
        )
    },
    # Paused jobs run no pods: the sync, not the nodes, is what the failover test loads.
    "many": {
        "jobs.yaml": yaml.safe_dump_all(
            [job_manifest(f"job-{i:03d}", ["true"], paused=True) for i in range(MANY)]
        )
    },
}


def apply(*documents: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))


def new_namespace(prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    return name


def drop_namespace(name: str) -> None:
    # The repositories first, so the reconciler stops acting there before the namespace goes.
    kubectl("-n", name, "delete", "jobrepositories", "--all", "--wait=false", check=False)
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def git_deployment(namespace: str) -> dict[str, Any]:
    volumes = [
        {"name": "server", "configMap": {"name": "gitserver"}},
        {"name": "git", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ] + [{"name": f"seed-{repo}", "configMap": {"name": f"seed-{repo}"}} for repo in SEEDS]
    mounts = [
        {"name": "server", "mountPath": "/srv"},
        {"name": "git", "mountPath": "/git"},
        {"name": "tmp", "mountPath": "/tmp"},
    ] + [{"name": f"seed-{repo}", "mountPath": f"/seed/{repo}"} for repo in SEEDS]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "git", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "git"}},
            "template": {
                "metadata": {"labels": {"app": "git"}},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "git",
                            "image": PRODUCT_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            # The image's venv Python: it has aiohttp.
                            "command": ["/opt/trainops/bin/python", "/srv/gitserver.py"],
                            "args": ["/seed", "/git", "8080"],
                            "env": [{"name": "HOME", "value": "/tmp"}],
                            "ports": [{"containerPort": 8080}],
                            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


def make_tenant(namespace: str) -> None:
    """The ServiceAccount `deployer` its repositories act as (docs/GITOPS.md, Trust and
    tenancy), and `alice`, a user of the namespace's repositories and jobs."""
    apply(
        *_account_with_role(namespace, "deployer", "deployer", DEPLOYER_RULES),
        *_account_with_role(namespace, "alice", "trainops-user", team_role(namespace)["rules"]),
    )


def _account_with_role(
    namespace: str, account: str, role: str, rules: list[dict[str, Any]]
) -> tuple[dict[str, Any], ...]:
    """A ServiceAccount, a Role of `rules` and the RoleBinding that gives it the Role."""
    rbac = "rbac.authorization.k8s.io"
    return (
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": f"{rbac}/v1", "kind": "Role",
         "metadata": {"name": role, "namespace": namespace}, "rules": rules},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding",
         "metadata": {"name": f"{role}-{account}" if role != account else role,
                      "namespace": namespace},
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
    )  # fmt: skip


def repository(namespace: str, name: str, url: str, *, automated: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"repoURL": url, "serviceAccountName": "deployer"}
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}}
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def repo_status(namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = get("-n", namespace, "jobrepository", name).get("status") or {}
    return status


def synced(namespace: str, name: str) -> dict[str, Any] | None:
    status = repo_status(namespace, name)
    operation = status.get("operationState") or {}
    assert operation.get("phase") not in ("Failed", "Error"), status
    done = (status.get("sync") or {}).get("status") == "Synced" and operation.get(
        "phase"
    ) == "Succeeded"
    return status if done else None
