"""Built-in admission plugins of kube-apiserver that a user meets on create (pure checks over
what the server stores).

ServiceAccount: a Pod naming a service account that does not exist in its namespace is refused
(403, `error looking up service account <ns>/<name>: serviceaccount "<name>" not found`). The
`default` account is not checked: the embedded server's controller creates it moments after the
namespace, and refusing pods in that window would only add a race (a real cluster has the same
window and refuses them).
"""

from __future__ import annotations

from typing import Any

from localcluster.api import apierrors
from localcluster.api.registry import BUILTINS, resource_id
from localcluster.api.types import ResourceInfo
from localcluster.write.state import Server

__all__ = ["check_service_account"]

_SERVICE_ACCOUNTS = next(i for i in BUILTINS if resource_id(i) == "/serviceaccounts")


def check_service_account(
    srv: Server, info: ResourceInfo, obj: dict[str, Any], namespace: str
) -> None:
    if resource_id(info) != "/pods":
        return
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return  # malformed: the schema check answers 400 later
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if not isinstance(account, str) or account in ("", "default"):
        return
    if srv.get(_SERVICE_ACCOUNTS, namespace, account) is None:
        raise apierrors.forbidden(
            info,
            (obj.get("metadata") or {}).get("name", ""),
            f"error looking up service account {namespace}/{account}: "
            f'serviceaccount "{account}" not found',
        )
