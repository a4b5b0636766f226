"""Bounded work per repository revision (pure: counts in, a refusal or None out).

A revision is read in steps, and each limit is checked at the step that can see it first,
before the work it bounds is done (`gitops.source.reading`, `gitops.source.incremental`,
`gitops.source.checkout`):

1. the tree listing (`git ls-tree -l` gives every blob's size): the manifest **files** and the
   **bytes** they hold (`check_files`), before any blob is read;
2. the blobs' bytes: the YAML **documents**, counted by their markers without parsing
   (`count_documents`, `check_documents`);
3. the parse (`gitops.engine.manifests.load_text`): each document's **nesting depth** and the
   **objects** it gives after `kind: List` expansion are counted on its node tree, before any
   Python data is built from it; the objects of every file are added up as they come.

Exceeding one refuses the whole revision (`LimitExceeded`, naming the limit, its flag and the
file where the count went over): the reconciler records a ComparisonError and keeps the last
good revision applied, pruning nothing. Five files of `---\\n{}\\n` x 200,000 (196 KB packed) are
1,000,000 documents: refused at step 2, after ~7 MB read, where parsing them grew the process
by over 1 GB.

The defaults are sized for a repository of 10,000 training jobs with room to spare (each job in
its own file or not; a job is 1.3-1.6 KB of YAML, 12 levels deep at its deepest field):
20,000 files, documents and objects (2x); 32 MiB (about 2x 10,000 jobs of 1.6 KB, or
10,000 jobs of 3.3 KB); depth 64 (a CRD's openAPIV3Schema nests 30-40 levels).
At the defaults a revision holds at most what the 10,000-job benchmarks hold, twice over.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "DEFAULT",
    "FLAGS",
    "Exceeded",
    "LimitExceeded",
    "Limits",
    "check_documents",
    "check_files",
    "check_objects",
    "count_documents",
]


FLAGS = {
    "files": "--max-repo-files",
    "documents": "--max-repo-documents",
    "objects": "--max-repo-objects",
    "bytes": "--max-repo-bytes",
    "depth": "--max-repo-depth",
}
"""The flag of each limit, as conditions name it."""


@dataclass(frozen=True)
class Limits:
    """What one revision of one repository may hold (each a flag of `trainops gitops` and
    `trainops up`: `FLAGS`)."""

    files: int = 20_000
    """Manifest files (`*.yaml`, `*.yml`, `*.json` under `path`) of the revision."""
    documents: int = 20_000
    """YAML documents in those files, empty ones included (counted by their markers)."""
    objects: int = 20_000
    """Entries after `kind: List` expansion (a document that cannot be read counts as one)."""
    bytes: int = 32 * 1024 * 1024
    """Bytes of the manifest files read (a file over the per-file cap is refused unread and
    not counted)."""
    depth: int = 64
    """Mappings and lists nested in one document (`{a: [1]}` is 2 deep)."""

    def __post_init__(self) -> None:
        for name in FLAGS:
            if getattr(self, name) < 1:
                raise ValueError(f"{FLAGS[name]} must be at least 1, not {getattr(self, name)}")


DEFAULT = Limits()
_WHAT = {
    "files": "manifest files",
    "documents": "YAML documents",
    "objects": "objects (after kind: List expansion)",
    "bytes": "bytes of manifests",
}


@dataclass(frozen=True)
class Exceeded:
    """Which limit a revision went over, and in which file."""

    limit: str
    """A field of `Limits`: files, documents, objects, bytes, depth."""
    file: str
    """The file where the count went over (relative to the repository root)."""
    maximum: int
    line: int | None = None

    @property
    def message(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        flag = FLAGS[self.limit]
        if self.limit == "depth":
            what = f"a document nested deeper than {self.maximum} levels"
        else:
            what = f"more than {self.maximum} {_WHAT[self.limit]} in the revision"
        return (
            f"{where}: {what} (the {self.limit} limit, {flag} {self.maximum}); the revision "
            "is refused: the last one synced stays applied and nothing is pruned"
        )


class LimitExceeded(Exception):
    """A revision over one of its `Limits`: refused whole (a ComparisonError)."""

    def __init__(self, exceeded: Exceeded) -> None:
        super().__init__(exceeded.message)
        self.exceeded = exceeded


def check_files(files: Iterable[tuple[str, int]], limits: Limits) -> Exceeded | None:
    """The first limit `files` ((path, bytes to read) in reading order, 0 bytes for a file
    refused unread) go over — the files, then the bytes — or None."""
    total = 0
    over_bytes: Exceeded | None = None
    for count, (path, size) in enumerate(files, 1):
        if count > limits.files:
            return Exceeded("files", path, limits.files)
        total += size
        if over_bytes is None and total > limits.bytes:
            over_bytes = Exceeded("bytes", path, limits.bytes)
    return over_bytes


_MARKER = re.compile(rb"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)
_CONTENT = re.compile(rb"^[ \t]*[^ \t\r\n#]", re.MULTILINE)


def count_documents(data: bytes) -> int:
    """How many YAML documents `data` holds at most, without parsing it: one per document
    marker (`---` or `...` at the start of a line: no scalar can hold one) and one for content
    before the first. Exact without `...` markers; at most one too many for each."""
    first = _MARKER.search(data)
    head = data if first is None else data[: first.start()]
    before = 1 if _CONTENT.search(head) else 0
    if first is None:
        return before
    return before + sum(1 for _ in _MARKER.finditer(data, first.start()))


def check_documents(counts: Iterable[tuple[str, int]], limits: Limits) -> Exceeded | None:
    """The documents limit, over (path, documents) in reading order: where the running total
    goes over, or None."""
    total = 0
    for path, n in counts:
        total += n
        if total > limits.documents:
            return Exceeded("documents", path, limits.documents)
    return None


def check_objects(
    total: int, file: str, limits: Limits, line: int | None = None
) -> Exceeded | None:
    """The objects limit, for a running total reached in `file` (at `line`)."""
    return Exceeded("objects", file, limits.objects, line) if total > limits.objects else None
