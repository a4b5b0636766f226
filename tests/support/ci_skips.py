"""Under CI (`CI=true`, as `.ci/run` runs), a test skipped because a tool is missing fails
instead: CI installs every tool the tiers need (`.ci/run`), so such a skip means an install
step broke and the tier silently tested nothing. Skips for other reasons (a real cluster is
needed, RBAC is not enforced by the embedded server, …) stay skips.

A skip counts as a missing tool when its reason matches `TOOL_MISSING`; the skip messages of
tests/ are written to say "not installed", "cannot run", and so on (the table test in
tests/test_ci_skips.py holds the two lists apart)."""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from typing import Any

import pytest

__all__ = ["TOOL_MISSING", "is_tool_skip"]

TOOL_MISSING = re.compile(
    r"not installed|needs the \w+ binary|no ssh client|cannot run"
    r"|containernetworking-plugins|pods share the host'?s? network",
    re.IGNORECASE,
)


def is_tool_skip(reason: str) -> bool:
    """Whether a skip's reason says a tool is missing (pure)."""
    return TOOL_MISSING.search(reason) is not None


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None]:
    outcome = yield
    report = outcome.get_result()
    if not (_in_ci() and report.skipped and isinstance(report.longrepr, tuple)):
        return
    reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    if is_tool_skip(reason):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true because a tool is missing ({reason}): .ci/run installs "
            "every tool the tiers need, so an install step is broken"
        )
