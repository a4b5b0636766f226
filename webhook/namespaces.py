"""Each namespace's enforced Pod Security level, for `/validate` (`trainops webhook --pod-security`).

An informer on Namespaces in the webhook process (through `kube/`), not a GET per review: a
review must stay a few hundred microseconds, and the API server calls the webhook while it
holds the user's request. The cache keeps only each namespace's name and its
`pod-security.kubernetes.io/enforce` label (~200 bytes a namespace).

It fails open, on purpose: a namespace the cache does not know — the first list not done yet,
the watch behind a namespace created a moment ago, the API server unreachable — is not checked,
and the review says so in a warning. The API server's own Pod Security admission still refuses
the job's pods then; what is lost is only the early, named refusal. Failing closed would make
every job write in the cluster depend on this watch (`failurePolicy: Fail`).

`NamespaceLevels` is a companion of the server (`webhook.server.Companion`): `prepare()` starts
the informer and waits up to `sync_timeout` for its first list (then serves regardless), `run()`
keeps it until the server stops. Its rights: `list` and `watch` on namespaces
(deploy/webhook/rbac.yaml).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Protocol

from kube.client import Client
from kube.informer import Informer
from kube.resources import NAMESPACES
from policies.podsecurity import ENFORCE_LABEL, enforced_level

__all__ = ["Companions", "NamespaceLevels"]

log = logging.getLogger(__name__)


class _Readiness(Protocol):
    def block(self, part: str, reason: str) -> None: ...

    def clear(self, part: str) -> None: ...


class _Companion(Protocol):
    async def prepare(self, readiness: Any) -> None: ...

    async def run(self, readiness: Any) -> None: ...


class NamespaceLevels:
    """`levels(namespace)`: the level that namespace enforces, None when not known."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        *,
        client: Client | None = None,
        sync_timeout: float = 5.0,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.client = client
        self.sync_timeout = sync_timeout
        self.informer: Informer | None = None
        self._task: asyncio.Task[None] | None = None
        self._own_client = client is None

    def __call__(self, namespace: str) -> str | None:
        informer = self.informer
        if informer is None or not informer.has_synced:
            return None
        obj = informer.get(None, namespace)
        if obj is None:
            return None
        return enforced_level((obj.get("metadata") or {}).get("labels"))

    async def prepare(self, readiness: _Readiness) -> None:
        """Connect (in-cluster credentials unless `kubeconfig`), start the informer and wait a
        little for its first list. A kubeconfig that cannot be used raises (`kube.config.
        ConfigError`): a configuration error, not a cluster that is down."""
        if self.client is None:
            self.client = await Client.connect(self.kubeconfig)
        self.informer = Informer(
            self.client, NAMESPACES, name="namespaces (pod security)", transform=_labels_only
        )
        self._task = asyncio.create_task(self.informer.run(), name="namespace-levels")
        if not await self.informer.wait_synced(timeout=self.sync_timeout):
            log.warning(
                "namespaces not listed within %gs; jobs are not checked against their "
                "namespace's Pod Security level until they are",
                self.sync_timeout,
            )

    async def run(self, readiness: _Readiness) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            await self.close()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._own_client and self.client is not None:
            await self.client.close()
            self.client = None


def _labels_only(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    kept: dict[str, Any] = {
        "name": meta.get("name"),
        "resourceVersion": meta.get("resourceVersion"),
    }
    if ENFORCE_LABEL in labels:
        kept["labels"] = {ENFORCE_LABEL: labels[ENFORCE_LABEL]}
    return {"metadata": kept}


class Companions:
    """Several companions as the one `webhook.server.serve` takes: each prepared in turn, then
    all run together until the server stops. `serve` holds readiness under `certificates`
    while its companion prepares; once every part is prepared that hold is released (the
    certificate manager, when one of them, has released it already)."""

    def __init__(self, parts: Sequence[_Companion]) -> None:
        self.parts = tuple(parts)

    async def prepare(self, readiness: _Readiness) -> None:
        for part in self.parts:
            await part.prepare(readiness)
        readiness.clear("certificates")

    async def run(self, readiness: _Readiness) -> None:
        async with asyncio.TaskGroup() as group:
            for part in self.parts:
                group.create_task(part.run(readiness))
