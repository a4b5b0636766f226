"""The push secret a JobRepository names (`spec.push.secretRef`), read for the push hook (I/O
shell; the decision is `gitops.source.pushhooks.PushCheck`).

Read **as the repository's ServiceAccount** (`gitops.engine.tenancy.identity_for`, the identity
its rounds act as, impersonated), as `secretRef`'s Git credentials are: the service holds no
right on Secrets of its own, and a tenant who may create JobRepositories cannot make it use a
Secret their account may not read. (Flux's notification-controller reads a Receiver's
`secretRef` with its own rights; it holds them cluster-wide.) The value is key `token` of the
Secret, in its namespace.

Every replica takes pushes, so every replica reads: at most one GET per repository and
`TTL` seconds (a value, or a failure, is kept that long; a rotated secret is taken within
it), at most `ENTRIES` kept. A Secret that is missing, unreadable, without `token` or empty
reads as b"" — it proves no push — and is logged once per fetch (an API server that could
not be asked is not kept: the next push asks again).
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from gitops.engine import tenancy
from gitops.engine.spec import RepoSpec
from gitops.runtime.acting import acting_as
from kube import errors, resources
from kube.client import Client

__all__ = ["ENTRIES", "KEY", "TTL", "PushSecrets"]

log = logging.getLogger(__name__)

KEY = "token"
TTL = 10.0
ENTRIES = 4096


class PushSecrets:
    def __init__(
        self,
        client: Client,
        boundaries: tenancy.Boundaries,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.boundaries = boundaries
        self.clock = clock
        self._kept: OrderedDict[tuple[str, str, str], tuple[float, bytes]] = OrderedDict()

    async def value(self, obj: dict[str, Any], spec: RepoSpec) -> bytes | None:
        """None when the repository names no push secret; else its value (b"": none usable)."""
        name = spec.push_secret_name
        if name is None:
            return None
        meta = obj.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        try:
            identity = tenancy.identity_for(obj, self.boundaries)
        except tenancy.Refused:
            return b""  # no identity to read it as: its rounds are refused too
        who = identity.user if identity is not None else ""
        key = (namespace, name, who)
        now = self.clock()
        kept = self._kept.get(key)
        if kept is not None and now - kept[0] < TTL:
            return kept[1]
        value, keep = await self._read(namespace, name, identity)
        self._kept.pop(key, None)
        if keep:
            self._kept[key] = (now, value)
        while len(self._kept) > ENTRIES:
            self._kept.popitem(last=False)
        return value

    async def _read(
        self, namespace: str, name: str, identity: tenancy.Identity | None
    ) -> tuple[bytes, bool]:
        """The value, and whether to keep it (not after the API server could not be asked)."""
        where = f"secret {namespace}/{name} (spec.push.secretRef)"
        if not name or resources.name_problem(name) is not None:
            log.warning("%s: not a Secret's name: no push is accepted for it", where)
            return b"", True
        client = acting_as(self.client, identity)
        try:
            secret = await client.get(resources.SECRETS, name, namespace)
        except errors.APIError as exc:
            log.warning("%s: %s: no push is accepted for it", where, exc)
            return b"", not isinstance(exc, errors.Unavailable)
        raw = (secret.get("data") or {}).get(KEY)
        try:
            value = base64.b64decode(raw, validate=True) if isinstance(raw, str) else b""
        except (binascii.Error, ValueError):
            value = b""
        if not value:
            log.warning("%s: no key %r with a value: no push is accepted for it", where, KEY)
        return value, True
