"""`trainops check [--output text|json] PATH...`: admission, offline, with file and line.

Every TensorFlowTrainingJob and XGBoostTrainingJob found in the files (directories are searched
recursively for `*.yaml`/`*.yml`, skipping dot-directories such as `.git` and `.venv` unless
named, `-` reads standard input; `kind: List` documents count as
their items) is defaulted then validated by
`policies.admit`, exactly as the webhook would. Each
violation is printed at the line of the offending field in the source file (the nearest
ancestor that exists there when the field is missing), because users fix YAML in an editor:

    FILE:LINE: KIND/NAME: FIELD: MESSAGE
    FILE:LINE: KIND/NAME: warning: TEXT      (LINE of the field the warning names, if any)
    3 jobs checked: 2 admitted, 1 denied; 1 other document skipped

Other documents are judged by their kind with `gitops.engine.kinds.classify` (the GitOps sources use
the same function):
- a known kind (ConfigMap, Deployment, …, JobRepository) is skipped and counted;
- a mistaken kind fails like a denied job, at the line of `kind:`, with a did-you-mean when one
  is close: any unknown kind in our groups (`batch.tensorstack.dev`, `gitops.trainops.dev`),
  a near miss of a training-job kind in any group (`TensorflowTrainingJob`), a near miss or a
  wrong group of a built-in kind (`Configmap`, `Deployment` in `v1`) —
  `FILE:LINE: KIND/NAME: kind: unknown kind "…" in …: did you mean "…"?`;
- any other kind (a third-party CRD's) is skipped with a warning line, since the cluster may
  well serve it: `FILE:LINE: KIND/NAME: warning: unknown kind "…" in …`;
- a document without apiVersion or kind (not a Kubernetes object) is skipped and counted.

`--output json` prints a list with one entry per job, mistaken kind, unknown kind and
unreadable file, each with `type` (`job`, `kind`, `unknown-kind`, `error`), file, line, kind,
name, allowed, violations (field/reason/message/line), warnings (message/line) and the
defaulting patch; a load error is an entry with `allowed: false` and one violation of reason
`LoadError`. The summary and load errors also go to standard error, so standard output stays
one JSON document.

Exit codes: 0 all admitted, 1 any denied (or a mistaken kind), 2 a file could not be read or
parsed (reported as `FILE:LINE: error: MESSAGE`, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, TypedDict

if TYPE_CHECKING:
    from gitops.engine.manifests import Document, LoadError
    from policies.fieldpath import FieldError

__all__ = ["Report", "Violation", "WarningEntry", "check_documents", "register", "run"]

EXIT_ADMITTED = 0
EXIT_DENIED = 1
EXIT_UNREADABLE = 2


class Violation(TypedDict):
    field: str
    reason: str
    message: str
    line: int


class WarningEntry(TypedDict):
    message: str
    line: int


class Report(TypedDict):
    type: str
    """`job`, `kind` (a mistaken kind), `unknown-kind` (a warning) or `error` (a load error)."""
    file: str
    line: int
    kind: str | None
    name: str | None
    allowed: bool
    violations: list[Violation]
    warnings: list[WarningEntry]
    patch: list[dict[str, Any]]


@dataclass(frozen=True)
class Outcome:
    reports: list[Report]
    skipped: int

    @property
    def jobs(self) -> list[Report]:
        return [r for r in self.reports if r["type"] == "job"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "check",
        help="default and validate training jobs in YAML files, offline",
        description="Default and validate every TensorFlowTrainingJob and XGBoostTrainingJob "
        "in the given files or directories, as the admission webhook would. Documents of other "
        "known kinds are skipped; a mistaken kind (an unknown kind in batch.tensorstack.dev or "
        "gitops.trainops.dev, or a near miss such as TensorflowTrainingJob) fails with a "
        "did-you-mean; an unknown kind of another group is skipped with a warning.",
        epilog="Exit status: 0 all admitted, 1 a job denied or a kind mistaken, 2 a file could "
        "not be read or parsed.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="YAML files, or directories searched for *.yaml/*.yml (not inside dot-directories "
        "like .git unless named); '-' reads standard input",
    )
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text", help="output format"
    )
    parser.add_argument(
        "--pod-security",
        choices=("privileged", "baseline", "restricted"),
        default=None,
        metavar="LEVEL",
        help="also check the jobs' pod templates against this Pod Security level (privileged, "
        "baseline or restricted), as the webhook does for a namespace labelled "
        "pod-security.kubernetes.io/enforce=LEVEL",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gitops.engine import manifests
    from gitops.source import files as manifest_files

    paths = [p for p in args.paths if p != "-"]
    documents, errors = manifest_files.load_paths(paths)
    if "-" in args.paths:
        docs, errs = manifests.load_text(sys.stdin.read(), "<stdin>")
        documents.extend(docs)
        errors.extend(errs)
    for path in paths:  # a directory without manifests is most likely the wrong directory
        if os.path.isdir(path) and not manifest_files.discover([path])[0]:
            print(f"{path}: warning: no *.yaml or *.yml files found", file=sys.stderr)
    outcome = check_documents(manifests.expand_lists(documents), pod_security=args.pod_security)
    if errors:
        code = EXIT_UNREADABLE
    elif any(not r["allowed"] for r in outcome.reports):
        code = EXIT_DENIED
    else:
        code = EXIT_ADMITTED
    try:
        if args.output == "json":
            json.dump(_error_reports(errors) + outcome.reports, sys.stdout, indent=2)
            sys.stdout.write("\n")
            _print_errors(errors, sys.stderr)
            print(_summary(outcome, errors), file=sys.stderr)
        else:
            _print_text(outcome, sys.stdout)
            _print_errors(errors, sys.stderr)
            print(_summary(outcome, errors))
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()
    return code


def stdout_closed() -> None:
    """The reader went away (`trainops check -o json . | head`): that is not an error of ours.
    Point stdout at /dev/null so the interpreter's final flush does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def check_documents(documents: list[Document], *, pod_security: str | None = None) -> Outcome:
    """Admit every training job among `documents`; judge the others' kinds; count the rest.
    `pod_security`: the Pod Security level to check the jobs' pod templates against."""
    import policies
    from gitops.engine import kinds

    reports: list[Report] = []
    skipped = 0
    for doc in documents:
        found = kinds.classify_object(doc.obj)
        if found is None or found.kind_class is kinds.KindClass.KNOWN:
            skipped += 1
            continue
        if found.kind_class is not kinds.KindClass.TRAINING_JOB:
            reports.append(_kind_report(doc, found.kind_class, found.message or ""))
            if found.kind_class is kinds.KindClass.UNKNOWN:
                skipped += 1
            continue
        admission = policies.admit(doc.obj, pod_security=pod_security)
        violations = [*_duplicate_violations(doc)]
        violations.extend(_violation(doc, e) for e in admission.errors)
        violations.sort(key=lambda v: v["line"])
        reports.append(
            Report(
                type="job",
                file=doc.file,
                line=doc.line,
                kind=doc.obj["kind"],
                name=_name(doc.obj),
                allowed=not violations,
                violations=violations,
                warnings=[
                    WarningEntry(message=w, line=_warning_line(doc, w)) for w in admission.warnings
                ],
                patch=admission.patch,
            )
        )
    return Outcome(reports, skipped)


def _kind_report(doc: Document, kind_class: Any, message: str) -> Report:
    """A mistaken kind (a violation of `kind`) or an unknown one (a warning)."""
    from gitops.engine import kinds

    line = doc.line_of(("kind",))
    mistaken = kind_class is kinds.KindClass.INVALID
    return Report(
        type="kind" if mistaken else "unknown-kind",
        file=doc.file,
        line=doc.line,
        kind=str(doc.obj["kind"]),
        name=_name(doc.obj),
        allowed=not mistaken,
        violations=[Violation(field="kind", reason="UnknownKind", message=message, line=line)]
        if mistaken
        else [],
        warnings=[] if mistaken else [WarningEntry(message=message, line=line)],
        patch=[],
    )


def _error_reports(errors: list[LoadError]) -> list[Report]:
    """Load errors as entries of the JSON output."""
    return [
        Report(
            type="error",
            file=e.file,
            line=e.line or 0,
            kind=None,
            name=None,
            allowed=False,
            violations=[
                Violation(field="", reason="LoadError", message=e.message, line=e.line or 0)
            ],
            warnings=[],
            patch=[],
        )
        for e in errors
    ]


def _duplicate_violations(doc: Document) -> list[Violation]:
    """Keys given twice: YAML keeps the last silently; a Strict server refuses them."""
    from policies.fieldpath import ErrorType, Path

    out = []
    for dup in doc.duplicates:
        path = Path()
        for part in dup.path:
            path = path.index(part) if isinstance(part, int) else path.child(part)
        out.append(
            Violation(
                field=str(path),
                reason=ErrorType.DUPLICATE.value,
                message=f'{ErrorType.DUPLICATE.label}: field "{dup.path[-1]}" is given more '
                "than once (only the last would be kept)",
                line=dup.line,
            )
        )
    return out


def _violation(doc: Document, error: FieldError) -> Violation:
    from policies.structural import source_parts

    return Violation(
        field=error.field,
        reason=error.type.value,
        message=error.message,
        line=doc.line_of(source_parts(error)),
    )


_WARNING_PATH = re.compile(r"([A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*|\[[^\]]*\])*): ")
_PATH_PART = re.compile(r"\.?([A-Za-z][\w-]*)|\[([^\]]*)\]")


def _warning_line(doc: Document, warning: str) -> int:
    """The line of the field a warning starts with (`spec.replicaSpecs[0]: …`), else the doc's."""
    match = _WARNING_PATH.match(warning)
    if match is None:
        return doc.line
    parts: list[str | int] = []
    for name, bracket in _PATH_PART.findall(match.group(1)):
        parts.append(name if name else int(bracket) if bracket.isdigit() else bracket)
    return doc.line_of(parts)


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in ("name", "generateName"):
            value = meta.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, int | float):  # `name: 123`: denied, but still the job's name
                return json.dumps(value)
    return "<unnamed>"


def _print_text(outcome: Outcome, out: TextIO) -> None:
    for report in outcome.reports:
        where = f"{report['kind']}/{report['name']}"
        for v in report["violations"]:
            field = f"{v['field']}: " if v["field"] else ""
            out.write(f"{report['file']}:{v['line']}: {where}: {field}{v['message']}\n")
        for w in report["warnings"]:
            out.write(f"{report['file']}:{w['line']}: {where}: warning: {w['message']}\n")


def _print_errors(errors: list[LoadError], out: TextIO) -> None:
    for error in errors:
        where = f"{error.file}:{error.line}" if error.line is not None else error.file
        out.write(f"{where}: error: {error.message}\n")


def _summary(outcome: Outcome, errors: list[LoadError]) -> str:
    admitted = sum(1 for r in outcome.jobs if r["allowed"])
    jobs = len(outcome.jobs)
    denied = jobs - admitted
    text = f"{jobs} {_plural(jobs, 'job')} checked: {admitted} admitted, {denied} denied"
    mistaken = sum(1 for r in outcome.reports if r["type"] == "kind")
    if mistaken:
        text += f"; {mistaken} {_plural(mistaken, 'document')} of an unknown kind"
    if outcome.skipped:
        text += f"; {outcome.skipped} other {_plural(outcome.skipped, 'document')} skipped"
    if errors:
        files = len({e.file for e in errors})
        text += f"; {files} {_plural(files, 'file')} with errors"
    return text


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"
