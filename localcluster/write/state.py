"""The state one running API server shares between its handlers and controllers.

`Server` bundles storage, the resource registry, the watch hub and the admission chain, and it
is the `AdmissionLookup` the chain reads webhook configurations, namespaces and endpoints from.
The clock and the random sources live here so the pure modules can take them as values.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from localcluster.admission.chain import AdmissionChain
from localcluster.api.registry import CRD_RESOURCE, NAMESPACES, Registry, resource_id
from localcluster.api.types import ResourceInfo
from localcluster.store.records import Event
from localcluster.store.storage import Storage
from localcluster.store.watch import Hub
from localcluster.write import objectmeta

__all__ = ["Server"]

_CRD_RID = resource_id(CRD_RESOURCE)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Server:
    store: Storage
    registry: Registry = field(default_factory=Registry)
    hub: Hub = field(default_factory=Hub)
    server_address: str = "127.0.0.1:6443"
    bookmark_interval: float = 60.0
    clock: Callable[[], datetime] = _utcnow
    chain: AdmissionChain | None = None

    def __post_init__(self) -> None:
        self.chain = AdmissionChain(self)
        self.store.listeners.append(self._on_event)
        self.registry.set_crds(r.obj for r in self.store.records(_CRD_RID))
        self.store.listeners.append(self.hub.publish)

    @property
    def admission(self) -> AdmissionChain:
        assert self.chain is not None
        return self.chain

    def _on_event(self, event: Event) -> None:
        """Keep the registry in step with CRDs at commit time (before watchers hear of it)."""
        if event.resource == _CRD_RID:
            self.registry.set_crds(r.obj for r in self.store.records(_CRD_RID))
            if event.type == "DELETED":
                spec = event.obj.get("spec") or {}
                plural = (spec.get("names") or {}).get("plural", "")
                self.hub.close_resource(f"{spec.get('group', '')}/{plural}")

    # -- clock and randomness -------------------------------------------------------------

    def now(self) -> str:
        return objectmeta.now_rfc3339(self.clock())

    def new_uid(self) -> str:
        return str(uuid.uuid4())

    def name_suffix(self) -> str:
        return "".join(random.choices(objectmeta.NAME_SUFFIX_ALPHABET, k=5))

    # -- reads -----------------------------------------------------------------------------

    def get(self, info: ResourceInfo, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get(resource_id(info), namespace if info.namespaced else "", name)

    def namespace(self, name: str) -> dict[str, Any] | None:
        return self.store.get(resource_id(NAMESPACES), "", name)

    # -- AdmissionLookup -------------------------------------------------------------------

    async def webhook_configurations(
        self, kind: Literal["mutating", "validating"]
    ) -> list[dict[str, Any]]:
        rid = f"admissionregistration.k8s.io/{kind}webhookconfigurations"
        return [r.obj for r in self.store.records(rid)]

    async def get_namespace(self, name: str) -> dict[str, Any] | None:
        return self.namespace(name)

    async def get_endpoints(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.store.get("/endpoints", namespace, name)
