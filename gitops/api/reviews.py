"""Ask the API server who a token is (TokenReview) and what they may do (SubjectAccessReview).

The shell around `gitops.api.rules`: `KubeAccess(client)` posts both reviews through `kube` with
the server's own identity (which needs `create` on tokenreviews and subjectaccessreviews:
deploy/gitops/rbac.yaml) and keeps each answer `ttl` seconds (10 s), at most `size` of each
(1024): a revoked token or a removed RoleBinding stops working within `ttl`. A failure to ask is
`AccessUnavailable` (the API answers 503), never a guess either way; it is not cached.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

from gitops.api.rules import Check, TtlCache, User, access_review, user_from_review
from kube import errors, resources
from kube.client import Client

__all__ = ["Access", "AccessUnavailable", "KubeAccess"]

REVIEW_TIMEOUT = 10.0


class AccessUnavailable(Exception):
    """The API server could not be asked (it is down, or refused our own review)."""


class Access(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The token's user; None when the API server does not accept the token."""
        ...

    async def allowed(self, user: User, check: Check) -> bool:
        """Whether `user` may do `check`."""
        ...


class KubeAccess:
    def __init__(
        self,
        client: Client,
        *,
        ttl: float = 10.0,
        size: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.clock = clock
        self._users: TtlCache[str, User | None] = TtlCache(ttl, size)
        self._decisions: TtlCache[tuple[User, Check], bool] = TtlCache(ttl, size)

    async def authenticate(self, token: str) -> User | None:
        # Keyed by a digest: the cache holds no token.
        key = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._users.get(key, now)
        if cached is not None:
            return cached
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await self.client.create(resources.TOKEN_REVIEWS, body, timeout=REVIEW_TIMEOUT)
        except (errors.APIError, OSError, TimeoutError) as e:
            raise AccessUnavailable(f"cannot review the token: {e}") from None
        user = user_from_review(answer)
        if user is not None:  # a rejected token is asked again: it may be one issued just now
            self._users.put(key, user, self.clock())
        return user

    async def allowed(self, user: User, check: Check) -> bool:
        now = self.clock()
        cached = self._decisions.get((user, check), now)
        if cached is not None:
            return cached
        try:
            answer = await self.client.create(
                resources.SUBJECT_ACCESS_REVIEWS,
                access_review(user, check),
                timeout=REVIEW_TIMEOUT,
            )
        except (errors.APIError, OSError, TimeoutError) as e:
            raise AccessUnavailable(f"cannot review access: {e}") from None
        status = answer.get("status") or {}
        allowed = status.get("allowed") is True and status.get("denied") is not True
        self._decisions.put((user, check), allowed, self.clock())
        return allowed
