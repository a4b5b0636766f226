"""The serviceaccount controller's one job here: every active namespace has `default`."""

from __future__ import annotations

from localcluster.api.types import ApiError
from localcluster.write import writes
from localcluster.write.state import Server

__all__ = ["ensure_default_service_account"]

_SA_INFO_KEY = ("", "v1", "serviceaccounts")
_FIELD_MANAGER = "kube-controller-manager"


async def ensure_default_service_account(srv: Server, namespace: str) -> None:
    info = srv.registry.lookup(*_SA_INFO_KEY)
    if info is None or srv.get(info, namespace, "default") is not None:
        return
    try:
        await writes.create(
            srv,
            info,
            namespace,
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
            writes.WriteOptions(internal=True, field_manager=_FIELD_MANAGER),
        )
    except ApiError as e:
        # 403: the namespace started terminating; 404: it is gone; 409: someone was first.
        if e.code not in (403, 404, 409):
            raise
