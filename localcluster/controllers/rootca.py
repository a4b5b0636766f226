"""The root-CA publisher: every active namespace has the `kube-root-ca.crt` ConfigMap.

kube-controller-manager's root-ca-cert-publisher puts the cluster CA (`ca.crt`) into each
namespace, for pods to verify the API server with (a real kubelet projects it into every
service-account token volume). Clients list it with the namespace's other ConfigMaps, so the
embedded server publishes it too: created with the namespace, recreated when deleted, its data
and description annotation put back when changed; other annotations and labels are left alone,
as upstream's sync leaves them. A terminating namespace is not written to (the create is refused
there, and the controller gives up, as upstream does).
"""

from __future__ import annotations

from typing import Any

from localcluster.api.types import ApiError
from localcluster.store import storage
from localcluster.store.records import clone
from localcluster.write import patching, writes
from localcluster.write.state import Server

__all__ = ["DESCRIPTION", "DESCRIPTION_ANNOTATION", "ROOT_CA_NAME", "desired", "publish_root_ca"]

ROOT_CA_NAME = "kube-root-ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
_CM_INFO_KEY = ("", "v1", "configmaps")
_FIELD_MANAGER = "kube-controller-manager"


def desired(current: dict[str, Any] | None, ca_pem: str) -> dict[str, Any] | None:
    """The ConfigMap to write: a new one when `current` is None, `current` with its data and
    description put back when they differ, None when nothing is to be written. Pure."""
    data = {"ca.crt": ca_pem}
    if current is None:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": ROOT_CA_NAME,
                "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
            },
            "data": data,
        }
    annotations = (current.get("metadata") or {}).get("annotations") or {}
    if current.get("data") == data and annotations.get(DESCRIPTION_ANNOTATION):
        return None
    wanted = clone(current)
    wanted["data"] = data
    wanted["metadata"]["annotations"] = {**annotations, DESCRIPTION_ANNOTATION: DESCRIPTION}
    return wanted


async def publish_root_ca(srv: Server, namespace: str, ca_pem: str) -> None:
    """Create or repair `kube-root-ca.crt` in `namespace` (nothing when `ca_pem` is empty)."""
    info = srv.registry.lookup(*_CM_INFO_KEY)
    if info is None or not ca_pem:
        return
    current = srv.get(info, namespace, ROOT_CA_NAME)
    wanted = desired(current, ca_pem)
    if wanted is None:
        return
    opts = writes.WriteOptions(internal=True, field_manager=_FIELD_MANAGER)
    try:
        if current is None:
            await writes.create(srv, info, namespace, wanted, opts)
        else:
            # The server's own updates skip managedFields tracking; this one is a client's
            # Update on a real cluster, taking the fields it puts back from their editor.
            wanted = patching.track_update(
                info, current, wanted, manager=_FIELD_MANAGER, now=srv.now()
            )
            await writes.write_update(srv, info, current, wanted, opts)
    except ApiError as e:
        # 403: the namespace started terminating; 404: it is gone; 409: someone was first
        # (the event of that write queues this namespace again).
        if e.code not in (403, 404, 409):
            raise
    except (storage.Conflict, storage.Missing):
        pass  # changed or deleted meanwhile: its event queues this namespace again
