"""Writing a JobRepository's `.status` (I/O, through `kube`): masked, with the requests it
handled recorded, conditional on the resourceVersion, skipped when only the time would change.

Split from `gitops/runtime/reconciler.py`: one round decides what the status says (`gitops.engine.status`,
pure); this is how it reaches the API server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gitops.engine import triggers
from gitops.engine.crd import JOB_REPOSITORIES
from gitops.engine.redact import redact_value
from kube import errors
from kube.client import Client

__all__ = ["ATTEMPTS", "write_status"]

ATTEMPTS = 5
"""Conflicts (another writer between our read and our write) retried this often."""


async def write_status(
    client: Client,
    obj: dict[str, Any],
    make: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    handling: triggers.Pending | None,
    unless_unchanged: bool = False,
) -> str | None:
    """Replace `obj`'s (a JobRepository) `.status` with `make(old status)`, conditional on the resourceVersion;
    on Conflict read the object again and retry. The status is masked (`gitops.engine.redact`:
    messages echo the repository URL and its credentials) and built off the loop (it is built
    from every resource of the repository); `handling` — the requests this round was asked
    for, as it saw them at its start — is recorded as handled (`gitops.engine.triggers`: a request
    written since is newer and stays pending). `unless_unchanged`: nothing is written when the
    new status differs from the stored one in `reconciledAt` only. Returns the resourceVersion
    written over (the one read), None when nothing was written."""
    meta = obj["metadata"]
    for _ in range(ATTEMPTS):
        old = dict(obj.get("status") or {})
        new_status = await asyncio.to_thread(_masked, make, old)
        new_status = triggers.record_handled(new_status, handling)
        if unless_unchanged and _without_time(new_status) == _without_time(old):
            return None
        body = {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "metadata": {
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": obj.get("spec"),
            "status": new_status,
        }
        try:
            await client.replace(JOB_REPOSITORIES, body, subresource="status")
            return str(meta.get("resourceVersion") or "")
        except errors.Conflict:
            obj = await client.get(JOB_REPOSITORIES, meta["name"], meta.get("namespace"))
            meta = obj["metadata"]
    raise errors.Conflict(409, "Conflict", f"status kept changing; retried {ATTEMPTS} times")


def _without_time(st: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in st.items() if k != "reconciledAt"}


def _masked(
    make: Callable[[dict[str, Any]], dict[str, Any]], old: dict[str, Any]
) -> dict[str, Any]:
    masked: dict[str, Any] = redact_value(make(old))
    return masked
