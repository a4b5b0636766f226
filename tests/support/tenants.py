"""Tenants on a test cluster: ServiceAccounts with Roles in their own namespace, and tokens.

`service_account` makes the account a JobRepository acts as (`DEPLOYER_RULES`: what a
repository of training jobs and ConfigMaps needs); `team_token` makes a user of the API and the
dashboard (`team_role`: read and act on the namespace's repositories and jobs) and returns a
token for it from the TokenRequest API. Shared by tests/gitops/ and tests/reference/.
"""

from __future__ import annotations

from typing import Any

from kube.client import Client
from kube.resources import Resource

__all__ = [
    "DEPLOYER_RULES",
    "EVERYTHING",
    "ROLES",
    "ROLE_BINDINGS",
    "SERVICE_ACCOUNTS",
    "service_account",
    "team_role",
    "team_token",
]

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", True)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", True)
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True)


async def service_account(
    client: Client, namespace: str, name: str, rules: list[dict[str, Any]] | None
) -> None:
    """A ServiceAccount, and with `rules` a Role and RoleBinding giving it them."""
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": name, "namespace": namespace}})
    if rules is None:
        return
    await client.create(
        ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": rules,
        },
    )
    await client.create(
        ROLE_BINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    )


EVERYTHING = ["get", "list", "watch", "create", "update", "patch", "delete"]
DEPLOYER_RULES = [
    {"apiGroups": [""], "resources": ["configmaps", "secrets", "services"], "verbs": EVERYTHING},
    {
        "apiGroups": ["batch.tensorstack.dev"],
        "resources": ["tensorflowtrainingjobs", "xgboosttrainingjobs"],
        "verbs": EVERYTHING,
    },
]


def team_role(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "trainops-user", "namespace": namespace},
        "rules": [
            {
                "apiGroups": ["gitops.trainops.dev"],
                "resources": ["jobrepositories"],
                "verbs": ["get", "list", "watch", "patch"],
            },
            {
                "apiGroups": ["batch.tensorstack.dev"],
                "resources": ["tensorflowtrainingjobs", "xgboosttrainingjobs"],
                "verbs": ["get", "list", "watch", "patch", "delete"],
            },
            {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
            # A job's page shows its pods and Events to those who may list them there.
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
        ],
    }


async def team_token(client: Client, namespace: str, name: str) -> str:
    """A ServiceAccount `name` in `namespace` bound to `team_role`, and a token for it from
    the TokenRequest API (10 minutes)."""
    await client.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, namespace)
    await client.create(ROLES, team_role(namespace), namespace)
    binding = {
        "metadata": {"name": f"trainops-user-{name}", "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "trainops-user",
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    await client.create(ROLE_BINDINGS, binding, namespace)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": name},
        "spec": {"expirationSeconds": 600},
    }
    answer = await client.create(SERVICE_ACCOUNTS, request, namespace, subresource="token")
    token: str = answer["status"]["token"]
    return token
