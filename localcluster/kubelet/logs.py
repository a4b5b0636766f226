"""Container logs: the CRI log format and the `containerLogs` query options, as pure functions.

Each line the shim writes is `<RFC 3339 nano timestamp> <stdout|stderr> <F|P> <text>`; `P` marks
a partial line (split because it was long), continued by the next entry. `select_log` turns the
bytes of one log file into the response body for the kubelet's query options: `sinceTime` (from
`sinceSeconds`, computed by the caller with its clock), `tailLines`, `timestamps`, `limitBytes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["LogEntry", "LogOptions", "parse_log", "parse_time", "render", "select_log"]


@dataclass(frozen=True)
class LogEntry:
    timestamp: str
    stream: str
    partial: bool
    text: bytes


@dataclass(frozen=True)
class LogOptions:
    timestamps: bool = False
    tail_lines: int | None = None
    since: datetime | None = None
    limit_bytes: int | None = None


def parse_time(ts: str) -> datetime:
    """RFC 3339 with up to nanoseconds (Python keeps microseconds)."""
    base, _, frac = ts.rstrip("Z").partition(".")
    dt = datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    if frac:
        dt = dt.replace(microsecond=int(frac[:6].ljust(6, "0")))
    return dt


def parse_log(data: bytes) -> list[LogEntry]:
    """Entries of a CRI log; a torn last line (being written) is left out."""
    out = []
    for raw in data.split(b"\n")[:-1]:  # the last piece is empty or torn
        parts = raw.split(b" ", 3)
        if len(parts) < 3:
            continue
        text = parts[3] if len(parts) == 4 else b""
        out.append(LogEntry(parts[0].decode(), parts[1].decode(), parts[2] == b"P", text))
    return out


def render(entries: list[LogEntry], timestamps: bool) -> bytes:
    """Body bytes: partial entries joined to their continuation, one timestamp per line."""
    out = bytearray()
    at_line_start = True
    for e in entries:
        if timestamps and at_line_start:
            out += e.timestamp.encode() + b" "
        out += e.text
        if not e.partial:
            out += b"\n"
        at_line_start = not e.partial
    return bytes(out)


def select_log(data: bytes, options: LogOptions) -> bytes:
    entries = parse_log(data)
    if options.since is not None:
        entries = [e for e in entries if parse_time(e.timestamp) >= options.since]
    if options.tail_lines is not None:
        # Count whole lines: a line is a run of partial entries ended by a full one.
        ends = [i for i, e in enumerate(entries) if not e.partial]
        if options.tail_lines <= 0:
            entries = []
        elif len(ends) > options.tail_lines:
            entries = entries[ends[-options.tail_lines - 1] + 1 :]
    body = render(entries, options.timestamps)
    if options.limit_bytes is not None:
        body = body[: max(options.limit_bytes, 0)]
    return body
