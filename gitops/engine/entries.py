"""The manifests of a checkout: every document under `path` as a `ManifestEntry` with its file
and line, or the reason it cannot be used. Nothing is ever skipped silently.

Files: `*.yaml`, `*.yml`, `*.json` under `path` (its subdirectories too when `recurse`), in
sorted order (posix path order, so the result is the same on every machine), skipping `.git`.
Symlinks are followed only when they resolve inside the repository root (a link to
`/etc/passwd` or `../../secrets` is ignored, as is a `path` with `..` leaving the root);
a directory reached twice through links is read once.

Each file is read with the loader `trainops check` uses (`gitops.engine.manifests`: safe YAML, the
line of every field, alias bombs and recursive aliases refused, 3 MiB per document); a file
over 3 MiB is refused whole without reading it. JSON is YAML, so the same loader reads it.
Multi-document files give one entry per document; `kind: List` gives one per item, each at
its own line.

Pure: a file's text or bytes in, entries out; `gitops.source.checkout.load_directory` walks
the disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gitops.engine import kinds, manifests
from gitops.engine.limits import Limits

__all__ = [
    "MAX_FILE_BYTES",
    "SUFFIXES",
    "ManifestEntry",
    "entries_from_bytes",
    "entries_from_text",
    "entry_problem",
    "too_big_message",
]

MAX_FILE_BYTES = manifests.MAX_DOCUMENT_BYTES
SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class ManifestEntry:
    """One document (or `kind: List` item) of the repository."""

    file: str
    """Relative to the repository root, posix separators."""
    line: int
    """1-based line of the document or item (of the problem, for some errors)."""
    obj: dict[str, Any] | None
    """The object; None when the document could not be read or is not an object."""
    error: str | None = None
    kind_class: kinds.KindClass | None = None
    """From `gitops.engine.kinds.classify`, when the document has an apiVersion and a kind."""
    document: manifests.Document | None = field(default=None, repr=False, compare=False)
    """The loaded document, for the line of any field (`document.line_of(path)`)."""

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def entries_from_bytes(
    file: str, data: bytes, *, limits: Limits | None = None, objects_before: int = 0
) -> list[ManifestEntry]:
    """Entries of one file given its bytes (pure). With a revision's `limits`, objects past
    `limits.objects` (counting `objects_before`) or a document too deep raise
    `gitops.engine.limits.LimitExceeded` (`manifests.load_text`)."""
    if len(data) > MAX_FILE_BYTES:
        return [ManifestEntry(file, 1, None, too_big_message(len(data)))]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return [ManifestEntry(file, 1, None, f"not UTF-8 text: {e.reason}")]
    return entries_from_text(file, text, limits=limits, objects_before=objects_before)


def entries_from_text(
    file: str, text: str, *, limits: Limits | None = None, objects_before: int = 0
) -> list[ManifestEntry]:
    """Entries of one file given its text (pure): documents, List items, and load errors,
    in line order. `limits`: as `entries_from_bytes`."""
    documents, errors = manifests.load_text(
        text, file, limits=limits, objects_before=objects_before
    )
    out = [ManifestEntry(file, e.line or 1, None, e.message) for e in errors]
    for doc in manifests.expand_lists(documents):
        out.append(_entry(doc))
    out.sort(key=lambda e: e.line)
    return out


def entry_problem(obj: Any) -> str | None:
    """Why `obj` cannot be a manifest (not an object, no apiVersion/kind/metadata.name), or
    None. The kind itself is judged by `gitops.engine.kinds.classify`."""
    if not isinstance(obj, dict):
        return f"a manifest must be an object, not {_type_name(obj)}"
    missing = [k for k in ("apiVersion", "kind") if not _text(obj.get(k))]
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not _text(name):
        missing.append("metadata.name")
    if missing == ["metadata.name"]:
        return _name_problem(meta)
    if missing:
        return "missing " + ", ".join(missing)
    return None


def _name_problem(meta: Any) -> str:
    """The API server's words for a missing name; generateName cannot be tracked in Git."""
    if isinstance(meta, dict) and _text(meta.get("generateName")):
        return (
            "metadata.name: Required value: metadata.generateName is not supported by GitOps "
            "(every sync would create another object): give the object a name"
        )
    return "metadata.name: Required value: name is required"


# --- internals --------------------------------------------------------------------------------


def _entry(doc: manifests.Document) -> ManifestEntry:
    obj = doc.obj
    problem = entry_problem(obj)
    if problem is not None:
        line = doc.line_of(("metadata",)) if problem.startswith("metadata.name:") else doc.line
        return ManifestEntry(
            doc.file, line, obj if isinstance(obj, dict) else None, problem, None, doc
        )
    assert isinstance(obj, dict)
    found = kinds.classify(obj["apiVersion"], obj["kind"])
    error = (
        found.message
        if found.kind_class in (kinds.KindClass.INVALID, kinds.KindClass.UNKNOWN)
        else None
    )
    line = doc.line
    if error is not None:
        line = doc.line_of(("kind",))
    elif doc.duplicates:
        dup = doc.duplicates[0]
        line = dup.line
        error = f'field "{".".join(map(str, dup.path))}" is given more than once'
    return ManifestEntry(doc.file, line, obj, error, found.kind_class, doc)


def too_big_message(size: int) -> str:
    """Why a file of `size` bytes is refused unread."""
    return f"file is {size} bytes, over the {MAX_FILE_BYTES}-byte (3 MiB) limit"


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
    }.get(type(value), type(value).__name__)
