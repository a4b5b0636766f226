"""Fields a person holds by hand on a Git-managed object (pure).

A pause from the dashboard, the API (`POST /api/v1/jobs/…/pause`, `…/resume`) or anything
that names the field in the annotation `gitops.trainops.dev/held-fields` (comma-separated JSON
pointers) belongs to that person, not to Git, while the annotation is on the live object: the
field is no drift (self-heal leaves it alone) and is left out of what a sync applies, so a
later commit does not undo it either. Removing the annotation hands the field back to Git
(the next comparison shows Git's value as drift; self-heal applies it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gitops.engine import names
from gitops.engine.diff import remove_pointers

__all__ = ["PAUSE_POINTER", "held_message", "held_pointers", "with_held", "without_held"]

PAUSE_POINTER = "/spec/runMode/pause/enabled"


def held_pointers(live: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The JSON pointers `live` holds by hand (its held-fields annotation), in order."""
    annotations = ((live or {}).get("metadata") or {}).get("annotations") or {}
    text = annotations.get(names.HELD_FIELDS_ANNOTATION)
    if not isinstance(text, str):
        return ()
    out: list[str] = []
    for part in text.split(","):
        pointer = part.strip()
        if pointer.startswith("/") and pointer not in out and not _protected(pointer):
            out.append(pointer)
    return tuple(out)


def without_held(desired: dict[str, Any], live: Mapping[str, Any] | None) -> dict[str, Any]:
    """`desired` without the fields `live` holds by hand (unchanged when it holds none)."""
    pointers = held_pointers(live)
    return remove_pointers(desired, pointers) if pointers else desired


def held_message(pointers: Sequence[str]) -> str:
    """The resource's message while it holds fields by hand."""
    return (
        f"held by hand: {', '.join(pointers)} (not managed by Git until the annotation "
        f"{names.HELD_FIELDS_ANNOTATION} is removed)"
    )


def with_held(live: Mapping[str, Any] | None, pointer: str) -> str:
    """The held-fields annotation's value once `pointer` is held too."""
    pointers = list(held_pointers(live))
    if pointer not in pointers:
        pointers.append(pointer)
    return ",".join(pointers)


def _protected(pointer: str) -> bool:
    """Pointers that can never be held: identity and our tracking (they decide ownership)."""
    return pointer in ("/apiVersion", "/kind", "/metadata") or pointer.startswith(
        ("/metadata/name", "/metadata/namespace", "/metadata/labels", "/metadata/annotations")
    )
