"""Comparing two runs of a workflow step by step, and the report of a whole suite.

A step is `identical` (normalized exit code, stdout and stderr equal), `accepted` (different,
with a declared reason), `different` (an unknown difference: a failure) or `stale` (declared as
different but now identical: the declaration must go, a failure too).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import StrEnum

from tests.fidelity.model import Outcome, Step, Workflow

__all__ = ["StepVerdict", "Verdict", "compare", "describe", "share_identical", "table"]


class Verdict(StrEnum):
    IDENTICAL = "identical"
    ACCEPTED = "accepted"
    DIFFERENT = "different"
    STALE = "stale"


@dataclass(frozen=True)
class StepVerdict:
    index: int
    step: Step
    verdict: Verdict
    reference: Outcome
    embedded: Outcome

    @property
    def failed(self) -> bool:
        return self.verdict in (Verdict.DIFFERENT, Verdict.STALE)


def compare(
    workflow: Workflow, reference: list[Outcome], embedded: list[Outcome]
) -> list[StepVerdict]:
    out = []
    for i, (step, ref, emb) in enumerate(zip(workflow.steps, reference, embedded, strict=True)):
        same = ref == emb
        if same:
            verdict = Verdict.STALE if step.accept else Verdict.IDENTICAL
        else:
            verdict = Verdict.ACCEPTED if step.accept else Verdict.DIFFERENT
        out.append(StepVerdict(i, step, verdict, ref, emb))
    return out


def describe(workflow: Workflow, verdicts: list[StepVerdict], *, only_failed: bool = True) -> str:
    """A readable account of the steps that differ: command, then a diff per stream."""
    lines = []
    for v in verdicts:
        if v.verdict is Verdict.IDENTICAL or (only_failed and not v.failed):
            continue
        lines.append(f"--- {workflow.name} step {v.index}: {v.step.command} [{v.verdict.value}]")
        if v.step.accept:
            lines.append(f"    accepted because: {v.step.accept}")
        if v.reference.rc != v.embedded.rc:
            lines.append(f"    exit code: reference {v.reference.rc}, embedded {v.embedded.rc}")
        for stream in ("stdout", "stderr"):
            ref, emb = getattr(v.reference, stream), getattr(v.embedded, stream)
            if ref != emb:
                lines.append(f"    {stream}:")
                diff = difflib.unified_diff(
                    ref.splitlines(), emb.splitlines(), "reference", "embedded", lineterm="", n=1
                )
                lines.extend("      " + d for d in diff)
    return "\n".join(lines)


def share_identical(results: dict[str, list[StepVerdict]]) -> tuple[int, int]:
    """(steps identical, steps in all) over a suite run; accepted differences are not
    identical."""
    steps = [v for verdicts in results.values() for v in verdicts]
    same = sum(v.verdict in (Verdict.IDENTICAL, Verdict.STALE) for v in steps)
    return same, len(steps)


def table(results: dict[str, list[StepVerdict]]) -> str:
    """One row per workflow: steps identical / accepted / different, and the suite's share."""
    rows = [("WORKFLOW", "STEPS", "IDENTICAL", "ACCEPTED", "DIFFERENT", "RESULT")]
    for name, verdicts in results.items():
        count = {v: sum(x.verdict is v for x in verdicts) for v in Verdict}
        failed = count[Verdict.DIFFERENT] + count[Verdict.STALE]
        same = count[Verdict.IDENTICAL] + count[Verdict.STALE]
        result = "identical" if same == len(verdicts) else ("FAIL" if failed else "accepted")
        rows.append(
            (
                name,
                str(len(verdicts)),
                str(same),
                str(count[Verdict.ACCEPTED]),
                str(failed),
                result,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    same, total = share_identical(results)
    share = 100.0 * same / total if total else 0.0
    lines.append(f"\nsteps identical: {same}/{total} ({share:.1f}%)")
    return "\n".join(lines)
