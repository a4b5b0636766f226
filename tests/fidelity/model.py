"""What a workflow is: steps (kubectl command lines, optionally with a stdin manifest) and, per
step, a declared known difference with the reason it stays.

Placeholders in a step's arguments and stdin, filled in by the runner:

- `$NS`: the workflow's namespace (the same name on both servers);
- `$UID{kind/name}`: the uid of that object in the namespace, read just before the step (for
  owner references).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["Outcome", "Step", "Workflow", "kc", "patch"]


@dataclass(frozen=True)
class Step:
    """One kubectl invocation (the runner adds `--namespace $NS` in front of `args`)."""

    args: tuple[str, ...]
    stdin: str | None = None
    accept: str | None = None
    """A known difference between the servers at this step and why it stays; `None`: the
    normalized outputs must be identical."""
    until: str | None = None
    """Repeat the step (deadline-bound) until its stdout contains this text, then record it:
    for what controllers do asynchronously (garbage collection)."""
    unordered: str | None = None
    """Why the order of the `* cause` lines kubectl prints for an Invalid error does not count
    at this step (they are compared sorted): for errors a real server lists in Go map order."""

    @property
    def command(self) -> str:
        return "kubectl " + shlex.join(self.args)


@dataclass(frozen=True)
class Workflow:
    name: str
    about: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Outcome:
    """What one step printed (already normalized) and how kubectl exited."""

    rc: int
    stdout: str
    stderr: str


def kc(
    command: str,
    stdin: str | None = None,
    *,
    accept: str | None = None,
    until: str | None = None,
    unordered: str | None = None,
) -> Step:
    """A step from a shell-like command line (without the leading `kubectl`)."""
    return Step(tuple(shlex.split(command)), stdin, accept, until, unordered)


def patch(target: str, body: str, *, accept: str | None = None) -> Step:
    """`kubectl patch TARGET… -p BODY` (the body stays one argument, quotes and all)."""
    return Step(("patch", *shlex.split(target), "-p", body), accept=accept)
