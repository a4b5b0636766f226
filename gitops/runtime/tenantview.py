"""What a repository's identity may read from the shared cache (I/O: SelfSubjectAccessReviews).

The training jobs of every namespace are cached once, with the reconciler's identity
(`gitops.runtime.livecache`): no per-tenant watch. Read on a tenant's behalf, that cache would
show a repository objects its ServiceAccount may not list — with `--allow-cross-namespace`,
another namespace's jobs. So before a round reads the cache for a repository, its identity is
asked, as itself (a SelfSubjectAccessReview sent through the impersonating client the
repository acts with), whether it may `list` that kind in that namespace; what it may not is
left out, as a list the API server forbids would be (`gitops.runtime.livestate`). Answers are
kept `ttl` seconds per (verb, group, resource, namespace), at most `limit` of them.

The API server decides (RBAC, or any authorizer), not our rules: the same answer `kubectl auth
can-i list tensorflowtrainingjobs -n NS --as system:serviceaccount:…` gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kube import errors
from kube.client import Client
from kube.resources import SELF_SUBJECT_ACCESS_REVIEWS

__all__ = ["DEFAULT_TTL", "CacheAccess", "review"]

DEFAULT_TTL = 10.0
"""Seconds an answer is kept: a RoleBinding removed takes effect on cache reads within it."""
_LIMIT = 4096


def review(verb: str, group: str, resource: str, namespace: str) -> dict[str, Any]:
    """The SelfSubjectAccessReview asking for `verb` on `group/resource` in `namespace` (pure)."""
    attributes = {"verb": verb, "group": group, "resource": resource}
    if namespace:
        attributes["namespace"] = namespace
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


class CacheAccess:
    """`may_list` for one identity: the client's own (or whom it impersonates)."""

    def __init__(
        self,
        client: Client,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.ttl = ttl
        self._clock = clock
        self._answers: dict[tuple[str, str, str, str], tuple[float, bool]] = {}

    async def may_list(self, group: str, resource: str, namespace: str) -> bool:
        """Whether the identity may list `group/resource` in `namespace`; False when the API
        server cannot say (unreachable, refused): what it cannot vouch for is not shown."""
        return await self.may("list", group, resource, namespace)

    async def may(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        """Whether the identity may `verb` `group/resource` in `namespace` ("": every
        namespace), as `may_list` answers it."""
        key = (verb, group, resource, namespace)
        now = self._clock()
        kept = self._answers.get(key)
        if kept is not None and now - kept[0] < self.ttl:
            return kept[1]
        try:
            answer = await self.client.create(
                SELF_SUBJECT_ACCESS_REVIEWS, review(verb, group, resource, namespace)
            )
            allowed = bool((answer.get("status") or {}).get("allowed"))
        except errors.APIError:
            return False  # not remembered: asked again next time
        if len(self._answers) >= _LIMIT:
            self._answers.clear()
        self._answers[key] = (now, allowed)
        return allowed
