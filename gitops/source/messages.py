"""What a failed git command means, in the user's terms (pure: git's stderr in, one line out),
for `gitops.source.git`."""

from __future__ import annotations

import re
from pathlib import PurePath

__all__ = ["explain", "last_line", "line_with", "shallow_refused"]


def explain(text: str, what: str, where: str) -> str:
    """git's stderr `text` (already scrubbed of secrets) as one line in the user's terms;
    `what` git was trying to do ("fetch"), `where` " URL" or ""."""
    low = text.lower()
    if any(
        s in low
        for s in (
            "authentication failed",
            "could not read username",
            "could not read password",
            "permission denied (publickey",
            "permission denied, please try again",
            "invalid username or password",
            "http basic: access denied",
            "the requested url returned error: 401",
            "the requested url returned error: 403",
            "terminal prompts disabled",
        )
    ):
        return f"authentication failed for{where}"
    if any(
        s in low
        for s in (
            "couldn't find remote ref",
            "not our ref",
            "no such remote ref",
            "unadvertised object",
            "bad object",
            "unable to resolve reference",
            "remote did not send all necessary objects",
            "is not a valid ref",
        )
    ):
        return f"revision not found in{where}"
    if any(
        s in low
        for s in (
            "repository not found",
            "does not appear to be a git repository",
            "not a git repository",
            "the requested url returned error: 404",
            "no such file or directory",
            "not found",
        )
    ):
        return f"repository not found:{where}"
    locked = re.search(r"unable to create '([^']*\.lock)': file exists", text, re.IGNORECASE)
    if locked:
        return (
            f"git failed to {what}{where}: the cache's lock file {PurePath(locked[1]).name} exists "
            "(another git is running, or one was killed: it is removed once older than the git "
            "timeout)"
        )
    unreachable = (
        "could not resolve host",
        "connection refused",
        "connection timed out",
        "network is unreachable",
        "no route to host",
        "could not resolve hostname",
        "failed to connect",
    )
    if any(s in low for s in unreachable):
        # ssh's own line says why; git's last lines are advice ("…and the repository exists.").
        return f"cannot reach{where}: {line_with(text, unreachable)}"
    return f"git failed to {what}{where}: {last_line(text)}"


def shallow_refused(message: str) -> bool:
    """Whether a fetch failed only because the remote cannot serve a shallow fetch (git's
    dumb HTTP transport: "dumb http transport does not support shallow capabilities")."""
    low = message.lower()
    return "shallow" in low and ("does not support" in low or "dumb" in low)


def line_with(text: str, phrases: tuple[str, ...]) -> str:
    """The first line of `text` that contains one of `phrases` (lower case), as last_line
    would show it; the last line when none does."""
    for line in text.splitlines():
        if any(p in line.lower() for p in phrases):
            return last_line(line)
    return last_line(text)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[-1] if lines else "(no message)"
    if line.startswith("fatal: "):
        line = line[len("fatal: ") :]
    return line[:300]
