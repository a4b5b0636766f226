"""The admission chain: mutating and validating webhooks (stub: admits everything)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from localcluster.types import AdmissionAttributes

__all__ = ["AdmissionChain", "AdmissionLookup"]


class AdmissionLookup(Protocol):
    """What the chain reads from the server's storage."""

    async def webhook_configurations(
        self, kind: Literal["mutating", "validating"]
    ) -> list[dict[str, Any]]: ...

    async def get_namespace(self, name: str) -> dict[str, Any] | None: ...

    async def get_endpoints(self, namespace: str, name: str) -> dict[str, Any] | None: ...


class AdmissionChain:
    def __init__(self, lookup: AdmissionLookup) -> None:
        self._lookup = lookup

    async def mutate(self, attrs: AdmissionAttributes) -> tuple[dict[str, Any] | None, list[str]]:
        """The object after mutating webhooks, and their warnings."""
        return attrs.obj, []

    async def validate(self, attrs: AdmissionAttributes) -> list[str]:
        """Warnings from validating webhooks; raises ApiError on denial."""
        return []
