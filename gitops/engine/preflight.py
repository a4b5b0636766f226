"""Pre-flight: admit every training job of the repository before anything is applied (pure).

Each training-job entry goes through `policies.admit`, the webhook's own code (default, then
validate, structural layer included). A denial becomes the text the API server would print
for the webhook's answer — `admission webhook "validate.trainingjobs.batch.tensorstack.dev"
denied the request: <field>: <message>` (several violations: `[f1: m1, f2: m2]`, the way
apimachinery renders an aggregate, as `webhook.admission.denial_status` does) — at the line of
the first offending field in the file (`gitops.engine.manifests` remembers every field's line; the
document's line when the field is absent from the file).

The desired object of an admitted job is the *defaulted* one, so defaults the webhook adds
never show up as drift. Entries of other kinds pass through unchanged, errors included.

`pod_security` is the second step, once the namespaces' labels are known (the runtime reads
them): a job whose replica templates break the Pod Security level of the namespace it goes to
is refused the way the webhook with `--pod-security` refuses it (`policies.podsecurity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import policies
from gitops.engine import kinds
from gitops.engine.entries import ManifestEntry
from policies.fieldpath import FieldError, aggregate_message
from policies.structural import source_parts

__all__ = [
    "VALIDATING_WEBHOOK",
    "Checked",
    "denial_message",
    "job_namespaces",
    "pod_security",
    "preflight",
    "preflight_entry",
]

VALIDATING_WEBHOOK = policies.VALIDATING_WEBHOOK


@dataclass(frozen=True)
class Checked:
    """An entry after pre-flight: `desired` is what to apply (None when `error`)."""

    entry: ManifestEntry
    desired: dict[str, Any] | None
    error: str | None
    line: int
    """The line of `error` (the first offending field), else the entry's line."""
    warnings: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        return self.entry.file

    @property
    def where(self) -> str:
        return f"{self.entry.file}:{self.line}"


def preflight(entries: Iterable[ManifestEntry]) -> list[Checked]:
    """`preflight_entry` of every entry, in order."""
    return [preflight_entry(e) for e in entries]


def preflight_entry(entry: ManifestEntry) -> Checked:
    if entry.error is not None or entry.obj is None:
        return Checked(entry, None, entry.error or "not an object", entry.line)
    if entry.kind_class is not kinds.KindClass.TRAINING_JOB:
        return Checked(entry, entry.obj, None, entry.line)
    admission = policies.admit(entry.obj)
    if admission.errors:
        line = min(_line(entry, e) for e in admission.errors)
        return Checked(
            entry, None, denial_message(admission.errors), line, tuple(admission.warnings)
        )
    return Checked(entry, admission.obj, None, entry.line, tuple(admission.warnings))


def job_namespaces(checked: Iterable[Checked], destination: str) -> set[str]:
    """The namespaces the admitted training jobs go to (whose Pod Security levels matter)."""
    out: set[str] = set()
    for c in checked:
        if c.desired is not None and c.entry.kind_class is kinds.KindClass.TRAINING_JOB:
            out.add(_namespace_of(c.desired, destination))
    return out


def pod_security(
    checked: Iterable[Checked], destination: str, levels: Mapping[str, str]
) -> list[Checked]:
    """Each admitted training job checked against the Pod Security level of its namespace
    (`levels`: namespace -> level; a namespace not in it is not checked). A job that breaks
    it becomes an entry error at the line of its first offending field, as a denial."""
    out: list[Checked] = []
    for c in checked:
        level = (
            levels.get(_namespace_of(c.desired, destination))
            if c.desired is not None and c.entry.kind_class is kinds.KindClass.TRAINING_JOB
            else None
        )
        errors = policies.podsecurity.check(c.desired, level) if level else []
        if not errors:
            out.append(c)
            continue
        line = min(_line(c.entry, e) for e in errors)
        out.append(Checked(c.entry, None, denial_message(errors), line, c.warnings))
    return out


def _namespace_of(obj: dict[str, Any] | None, destination: str) -> str:
    meta = (obj or {}).get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    return namespace if isinstance(namespace, str) and namespace else destination


def denial_message(errors: Sequence[FieldError]) -> str:
    """What `kubectl apply` prints after `Error from server (Forbidden): …` for a denial."""
    return (
        f'admission webhook "{VALIDATING_WEBHOOK}" denied the request: {aggregate_message(errors)}'
    )


def _line(entry: ManifestEntry, error: FieldError) -> int:
    if entry.document is None:
        return entry.line
    return entry.document.line_of(source_parts(error))
