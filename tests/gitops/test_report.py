"""How an operation is told: admission denials are "denied", other failures are not."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from gitops.engine.pairing import ResourceKey
from gitops.engine.records import FAILED, Outcome
from gitops.engine.report import report, summary
from gitops.engine.status import Operation

KEY = ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "default", "a")
DENIAL = Outcome(KEY, FAILED, 'a.yaml:9: admission webhook "v" denied the request: spec: bad')
TYPO = Outcome(KEY._replace(name="t"), FAILED, 't.yaml:2: unknown kind "X": did you mean "Y"?')
IMMUTABLE = Outcome(KEY._replace(name="b"), FAILED, "b.yaml:1: spec: field is immutable")


def test_summary_and_events_keep_denied_for_admission_denials_only() -> None:
    outcomes = (DENIAL, TYPO, IMMUTABLE)
    message = summary(outcomes, [DENIAL, TYPO])
    assert message == (
        f"0 applied, 1 denied: {DENIAL.message}, 1 invalid: {TYPO.message}, "
        f"1 failed: {IMMUTABLE.message}"
    )
    now = datetime(2026, 1, 1, tzinfo=UTC)
    op = Operation("f" * 40, None, now, now, outcomes, "Failed", message, False)
    events: list[tuple[str, str, str]] = []

    def emit(obj: dict[str, Any], type_: str, reason: str, text: str) -> None:
        events.append((type_, reason, text))

    report({}, "default/jobs", op, emit, logging.getLogger("test"))
    assert [reason for _, reason, _ in events] == [
        "ResourceDenied",
        "ResourceFailed",
        "ResourceFailed",
        "SyncFailed",
    ]
    assert events[2][2].endswith("b.yaml:1: spec: field is immutable")
