"""What `trainops repo` prints (pure): kubectl's table for `list` and `get`, and `get`'s
description of one JobRepository — source, policy, sync and health, the last operation,
conditions, and every resource at its `file:line` (what `argocd app get` shows)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

from policies.durations import human_duration

__all__ = ["COLUMNS", "age", "describe", "print_objects", "table", "without_managed_fields"]

COLUMNS = ("NAMESPACE", "NAME", "SYNC", "HEALTH", "REVISION", "AGE", "REPO")
RESOURCE_COLUMNS = ("FILE:LINE", "KIND", "NAMESPACE", "NAME", "STATUS", "HEALTH", "MESSAGE")


def table(items: list[dict[str, Any]], now: datetime | None = None) -> str:
    """kubectl's table of JobRepositories."""
    now = now or datetime.now(UTC)
    return _columns(COLUMNS, [_row(i, now) for i in items])


def _row(obj: dict[str, Any], now: datetime) -> tuple[str, ...]:
    meta = _meta(obj)
    status = _dict(obj.get("status"))
    sync, health = _dict(status.get("sync")), _dict(status.get("health"))
    spec = _dict(obj.get("spec"))
    revision = sync.get("shortRevision") or str(sync.get("revision") or "")[:7]
    return tuple(
        str(v) if v else "<none>"
        for v in (
            meta.get("namespace"),
            meta.get("name"),
            sync.get("status"),
            health.get("status"),
            revision,
            age(meta.get("creationTimestamp"), now),
            spec.get("repoURL"),
        )
    )


def age(timestamp: Any, now: datetime) -> str:
    """kubectl's age (`duration.HumanDuration`): 45s, 5m30s, 2h10m, 3d4h, 400d, 2y30d."""
    if not isinstance(timestamp, str):
        return "<unknown>"
    try:
        then = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if then.tzinfo is None:
        then = then.replace(tzinfo=UTC)
    return human_duration((now - then).total_seconds())


def print_objects(doc: Any, output: str, *, show_managed_fields: bool = False) -> None:
    if not show_managed_fields:
        doc = without_managed_fields(doc)
    if output == "json":
        import json

        sys.stdout.write(json.dumps(doc, indent=4) + "\n")
    else:
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))


def without_managed_fields(doc: Any) -> Any:
    """`doc` (an object, or a List of them) without metadata.managedFields: kubectl leaves
    them out of -o json/yaml unless asked (`--show-managed-fields`), they are bookkeeping."""
    if not isinstance(doc, dict):
        return doc
    out = dict(doc)
    if isinstance(out.get("items"), list):
        out["items"] = [without_managed_fields(item) for item in out["items"]]
    meta = out.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return _dict(obj.get("metadata"))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def describe(obj: dict[str, Any], now: datetime | None = None) -> str:
    """One JobRepository as `trainops repo get NAME` prints it."""
    now = now or datetime.now(UTC)
    meta, spec, status = _meta(obj), _dict(obj.get("spec")), _dict(obj.get("status"))
    sync, health = _dict(status.get("sync")), _dict(status.get("health"))
    revision = str(sync.get("revision") or "")
    fields = [
        ("Name", f"{meta.get('namespace')}/{meta.get('name')}"),
        (
            "Created",
            f"{meta.get('creationTimestamp') or '<unknown>'} ({age(meta.get('creationTimestamp'), now)} ago)",
        ),
        ("Repository", spec.get("repoURL") or "<none>"),
        ("Path", spec.get("path") or "."),
        ("Target revision", spec.get("targetRevision") or "<the remote's HEAD>"),
        ("Sync policy", _policy(_dict(spec.get("syncPolicy")))),
        (
            "Sync status",
            " ".join(
                filter(
                    None,
                    [sync.get("status") or "Unknown", f"to {revision[:12]}" if revision else ""],
                )
            ),
        ),
        ("Health status", _with_message(health.get("status") or "Unknown", health.get("message"))),
    ]
    operation = _dict(status.get("operationState"))
    if operation:
        when = operation.get("finishedAt") or operation.get("startedAt") or ""
        fields.append(
            (
                "Last sync",
                _with_message(f"{operation.get('phase')} at {when}", operation.get("message")),
            )
        )
    for condition in status.get("conditions") or ():
        if isinstance(condition, dict):
            fields.append(
                ("Condition", _with_message(str(condition.get("type")), condition.get("message")))
            )
    width = max(len(label) for label, _ in fields) + 3
    lines = [f"{label + ':':<{width}}{value}" for label, value in fields]
    resources = [r for r in status.get("resources") or () if isinstance(r, dict)]
    lines.append("")
    if not resources:
        lines.append("No resources.")
        return "\n".join(lines) + "\n"
    return (
        "\n".join(lines) + "\n" + _columns(RESOURCE_COLUMNS, [_resource_row(r) for r in resources])
    )


def _policy(policy: dict[str, Any]) -> str:
    automated = policy.get("automated")
    if not isinstance(automated, dict):
        return "manual"
    extras = [
        name for name, key in (("prune", "prune"), ("self-heal", "selfHeal")) if automated.get(key)
    ]
    return "automated" + (f" ({', '.join(extras)})" if extras else "")


def _with_message(value: str, message: Any) -> str:
    return f"{value}: {message}" if message else value


def _resource_row(r: dict[str, Any]) -> tuple[str, ...]:
    where = f"{r.get('file')}:{r.get('line')}" if r.get("file") else "<live only>"
    return tuple(
        str(v) if v else "<none>"
        for v in (
            where,
            r.get("kind"),
            r.get("namespace"),
            r.get("name"),
            r.get("status"),
            r.get("health"),
            r.get("message"),
        )
    )


def _columns(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    """kubectl's table layout: columns padded to the widest cell, three spaces apart."""
    everything = [header, *rows]
    widths = [max(len(r[c]) for r in everything) for c in range(len(header))]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in everything
    ]
    return "\n".join(lines) + "\n"
