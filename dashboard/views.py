"""View models of the front page and the repository page (pure: dicts in, dicts out, `now` in).

Why view models: templates only lay out what these return, so every decision a user sees —
which badge, which commit counts as deployed, which rows a filter keeps, which resources get a
diff link — is a table-tested function here (tests/dashboard/test_views.py), not logic spread
through Jinja. Inputs are what `gitops.runtime.hub.Hub` returns: JobRepository objects (already
masked by `gitops.api.routes.shown_repository`), `/api/v1/jobs` rows and `ResourceDiff`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode

from dashboard.format import (
    PHASES,
    age,
    ago,
    as_dict,
    as_list,
    condition_tone,
    health_badge,
    phase_badge,
    short_sha,
    sync_badge,
    text,
)
from gitops.engine.report import is_denial

__all__ = [
    "JOB_PLURALS",
    "Filters",
    "filter_jobs",
    "filter_options",
    "filter_query",
    "job_path",
    "job_rows",
    "repository_detail",
    "repository_path",
    "repository_row",
    "resource_diff",
    "segment",
]

JOB_PLURALS = {
    "TensorFlowTrainingJob": "tensorflowtrainingjobs",
    "XGBoostTrainingJob": "xgboosttrainingjobs",
}


@dataclass(frozen=True)
class Filters:
    """The front page's job filters; "" means all."""

    namespace: str = ""
    repository: str = ""
    phase: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Filters:
        return cls(
            namespace=(query.get("namespace") or "").strip(),
            repository=(query.get("repository") or "").strip(),
            phase=(query.get("phase") or "").strip(),
        )

    @property
    def active(self) -> bool:
        return bool(self.namespace or self.repository or self.phase)


def segment(value: str) -> str:
    """One URL path segment of a name, whatever it holds: every reserved character quoted,
    and `.`/`..` spelled `%2E`, which browsers do not resolve (a tracking annotation is any
    string a Git file sets, so a link built from it must not climb to another path)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def repository_path(namespace: str, name: str) -> str:
    return f"/repositories/{segment(namespace)}/{segment(name)}"


def job_path(namespace: str, kind: str, name: str) -> str | None:
    """The job page's path, None for a kind the dashboard does not know."""
    plural = JOB_PLURALS.get(kind)
    if plural is None:
        return None
    return f"/jobs/{segment(namespace)}/{plural}/{segment(name)}"


def repository_row(obj: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """One front-page row: identity, source, badges, the deployed commit, the last sync."""
    meta = as_dict(obj.get("metadata"))
    spec = as_dict(obj.get("spec"))
    status = as_dict(obj.get("status"))
    sync = as_dict(status.get("sync"))
    health = as_dict(status.get("health"))
    namespace, name = text(meta.get("namespace")), text(meta.get("name"))
    revision = text(sync.get("revision"))
    commit = _deployed_commit(status, revision)
    operation = as_dict(status.get("operationState"))
    finished = operation.get("finishedAt") or operation.get("startedAt")
    return {
        "key": f"{namespace}/{name}",
        "namespace": namespace,
        "name": name,
        "path": repository_path(namespace, name),
        "url": text(spec.get("repoURL")),
        "target": text(spec.get("targetRevision")) or "HEAD",
        "source_path": text(spec.get("path")) or ".",
        "sync": sync_badge(sync.get("status")),
        "health": health_badge(health.get("status")),
        "health_message": _health_message(health, as_list(status.get("resources"))),
        "revision": revision,
        "short_revision": short_sha(revision),
        "commit_message": text(commit.get("message")),
        "commit_author": text(commit.get("author")),
        "commit_time": ago(commit.get("deployedAt"), now),
        "commit_timestamp": text(commit.get("deployedAt")),
        "denials": _denials(as_list(status.get("resources"))),
        "last_sync": text(operation.get("phase")),
        "last_sync_message": text(operation.get("message")),
        "last_sync_time": ago(finished, now),
        "last_sync_timestamp": text(finished),
        "automated": isinstance(as_dict(spec.get("syncPolicy")).get("automated"), dict),
    }


def job_rows(rows: Iterable[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """Front-page job rows from `/api/v1/jobs` rows (`gitops.api.routes.job_row`), in their order."""
    out = []
    for row in rows:
        namespace, name, kind = text(row.get("namespace")), text(row.get("name")), row.get("kind")
        phase = text(row.get("phase"))
        out.append(
            {
                "key": f"{namespace}/{name}",
                "kind": text(kind),
                "namespace": namespace,
                "name": name,
                "path": job_path(namespace, text(kind), name),
                "phase": phase or "Pending",
                "phase_badge": phase_badge(phase or "Pending"),
                "replicas": text(row.get("replicas")) or "0/0",
                "restarts": row.get("restarts") if isinstance(row.get("restarts"), int) else 0,
                "age": age(row.get("createdAt"), now),
                "created": text(row.get("createdAt")),
                "repository": text(row.get("repository")),
                "repository_path": _repository_link(row.get("repository")),
            }
        )
    return out


def filter_jobs(rows: Sequence[Mapping[str, Any]], filters: Filters) -> list[Mapping[str, Any]]:
    """The rows (from `job_rows`) the filters keep."""
    return [
        r
        for r in rows
        if (not filters.namespace or r["namespace"] == filters.namespace)
        and (not filters.repository or r["repository"] == filters.repository)
        and (not filters.phase or r["phase"] == filters.phase)
    ]


def filter_options(
    rows: Sequence[Mapping[str, Any]], repositories: Sequence[Mapping[str, Any]], filters: Filters
) -> dict[str, list[str]]:
    """The values each filter offers: every value seen, plus the selected one (so a filter
    that matches nothing yet still shows what was chosen)."""
    namespaces = {r["namespace"] for r in rows} | {r["namespace"] for r in repositories}
    repos = {r["repository"] for r in rows if r["repository"]} | {r["key"] for r in repositories}
    seen = {r["phase"] for r in rows}
    for value, into in (
        (filters.namespace, namespaces),
        (filters.repository, repos),
        (filters.phase, seen),
    ):
        if value:
            into.add(value)
    phases = [p for p in PHASES if p in seen] + sorted(seen - set(PHASES))
    return {
        "namespace": sorted(n for n in namespaces if n),
        "repository": sorted(repos),
        "phase": phases,
    }


def filter_query(filters: Filters) -> str:
    """`?namespace=…&…` for the active filters ("" when none)."""
    pairs = [
        (k, v)
        for k, v in (
            ("namespace", filters.namespace),
            ("repository", filters.repository),
            ("phase", filters.phase),
        )
        if v
    ]
    return "?" + urlencode(pairs) if pairs else ""


def repository_detail(
    obj: Mapping[str, Any], diffs: Sequence[Mapping[str, Any]], now: datetime
) -> dict[str, Any]:
    """The repository page: the row, resources (with file:line and a diff link when
    OutOfSync), conditions, history newest first, and the last operation."""
    row = repository_row(obj, now)
    status = as_dict(obj.get("status"))
    diff_keys = {_diff_key(d) for d in diffs}
    resources = []
    for r in as_list(status.get("resources")):
        r = as_dict(r)
        key = f"{text(r.get('kind'))}/{text(r.get('namespace'))}/{text(r.get('name'))}"
        file, line = text(r.get("file")), r.get("line")
        sync = sync_badge(r.get("status"))
        health = health_badge(r.get("health")) if r.get("health") else None
        diffable = sync["status"] == "OutOfSync" or key in diff_keys
        # Missing means no live object (gitops.engine.health.assess(None)), and no health means a
        # document that could not be read: either way there is no job page to link to.
        live = health is not None and health["status"] != "Missing"
        resources.append(
            {
                "key": key,
                "kind": text(r.get("kind")),
                "namespace": text(r.get("namespace")),
                "name": text(r.get("name")),
                "sync": sync,
                "health": health,
                "message": text(r.get("message")),
                "source": f"{file}:{line}" if file and isinstance(line, int) else file,
                "diff_path": (
                    f"{row['path']}/diff?{urlencode({'resource': key})}" if diffable else None
                ),
                "job_path": (
                    job_path(text(r.get("namespace")), text(r.get("kind")), text(r.get("name")))
                    if live
                    else None
                ),
            }
        )
    conditions = [
        {
            "type": text(c.get("type")),
            "status": text(c.get("status")),
            "tone": condition_tone(c.get("type"), c.get("status")),
            "reason": text(c.get("reason")),
            "message": text(c.get("message")),
            "time": ago(c.get("lastTransitionTime"), now),
            "timestamp": text(c.get("lastTransitionTime")),
        }
        for c in map(as_dict, as_list(status.get("conditions")))
    ]
    history = [
        {
            "revision": text(h.get("revision")),
            "short_revision": short_sha(h.get("revision")),
            "message": text(h.get("message")),
            "author": text(h.get("author")),
            "result": text(h.get("result")),
            "time": ago(h.get("deployedAt"), now),
            "timestamp": text(h.get("deployedAt")),
            "current": bool(row["revision"]) and h.get("revision") == row["revision"],
        }
        for h in reversed([as_dict(h) for h in as_list(status.get("history"))])
    ]
    if row["automated"]:
        # The API refuses any other revision under automated sync (gitops.runtime.manager.sync).
        blocked = (
            f"Automated sync follows the target revision ({row['target']}): change "
            "spec.targetRevision, or turn automated sync off, to sync another revision"
        )
        for h in history:
            h["sync_blocked"] = "" if h["current"] else blocked
    else:
        for h in history:
            h["sync_blocked"] = ""
    operation = as_dict(status.get("operationState"))
    return {
        **row,
        "resources": resources,
        "conditions": conditions,
        "history": history,
        "operation": {
            "phase": text(operation.get("phase")),
            "message": text(operation.get("message")),
            "revision": short_sha(as_dict(operation.get("syncResult")).get("revision")),
            "time": row["last_sync_time"],
            "timestamp": row["last_sync_timestamp"],
        }
        if operation
        else None,
        "reconciled": ago(status.get("reconciledAt"), now),
        "reconciled_timestamp": text(status.get("reconciledAt")),
    }


def resource_diff(diffs: Sequence[Mapping[str, Any]], resource: str) -> dict[str, Any] | None:
    """The diff of `Kind/namespace/name`, None if none is recorded. `kind` is "diff" (lines
    tagged file/hunk/add/del/context) when the Hub recorded a unified diff or a removal (every
    line `-`), else "message": what it recorded instead, e.g. the API server's refusal of a
    manifest it never admitted, shown as that message and not dressed up as diff lines."""
    for d in diffs:
        if _diff_key(d) == resource:
            body = text(d.get("text"))
            source = text(d.get("file"))
            if source and isinstance(d.get("line"), int):
                source = f"{source}:{d['line']}"
            shown: dict[str, Any] = {"key": resource, "source": source}
            if not _is_diff(body):
                return shown | {"kind": "message", "message": body.strip(), "lines": []}
            return shown | {"kind": "diff", "message": "", "lines": _tagged(body)}
    return None


def _is_diff(body: str) -> bool:
    lines = body.splitlines()
    if len(lines) >= 2 and lines[0].startswith("--- ") and lines[1].startswith("+++ "):
        return True
    return bool(lines) and all(line.startswith("-") for line in lines)


def _tagged(body: str) -> list[dict[str, str]]:
    lines = []
    for line in body.splitlines():
        if line.startswith(("+++", "---")):
            tag = "file"
        elif line.startswith("@@"):
            tag = "hunk"
        elif line.startswith("+"):
            tag = "add"
        elif line.startswith("-"):
            tag = "del"
        else:
            tag = "context"
        lines.append({"tag": tag, "text": line})
    return lines


def _denials(resources: Sequence[Any]) -> dict[str, Any] | None:
    """Where Git's manifests were denied admission: `file:line` of the first denied resource
    (in the order the status lists them: the repository's files) and how many more, so the
    front page names the file, not only "Failed". None when nothing was denied."""
    denied = [
        r
        for r in map(as_dict, resources)
        if isinstance(r.get("message"), str) and is_denial(r["message"])
    ]
    if not denied:
        return None
    first = denied[0]
    file, line = text(first.get("file")), first.get("line")
    where = f"{file}:{line}" if file and isinstance(line, int) else file
    name = f"{text(first.get('kind'))} {text(first.get('name'))}".strip()
    return {
        "source": where or name,
        "resource": name,
        "message": text(first.get("message")),
        "more": len(denied) - 1,
    }


MISSING_NAMED = 3
"""How many missing resources the repository's health message names before "and N more"."""


def _health_message(health: Mapping[str, Any], resources: Sequence[Any]) -> str:
    """The repository's health message; for Missing, which resources do not exist
    (`Missing: TensorFlowTrainingJob team-a/too-small`), not only the worst one's "the object
    does not exist", which names nothing."""
    message = text(health.get("message"))
    if health.get("status") != "Missing":
        return message
    missing = []
    for r in map(as_dict, resources):
        if r.get("health") == "Missing":
            namespace, name = text(r.get("namespace")), text(r.get("name"))
            missing.append(f"{text(r.get('kind'))} {f'{namespace}/' if namespace else ''}{name}")
    if not missing:
        return message
    named = ", ".join(missing[:MISSING_NAMED])
    more = len(missing) - MISSING_NAMED
    return f"Missing: {named}" + (f" and {more} more" if more > 0 else "")


def _diff_key(d: Mapping[str, Any]) -> str:
    return f"{text(d.get('kind'))}/{text(d.get('namespace'))}/{text(d.get('name'))}"


def _deployed_commit(status: Mapping[str, Any], revision: str) -> dict[str, Any]:
    """The history entry of the revision in sync (the newest one of that revision), else {}."""
    for entry in reversed(as_list(status.get("history"))):
        entry = as_dict(entry)
        if revision and entry.get("revision") == revision:
            return entry
    return {}


def _repository_link(value: Any) -> str | None:
    namespace, _, name = text(value).partition("/")
    return repository_path(namespace, name) if namespace and name else None
