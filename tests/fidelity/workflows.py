"""Every workflow of the fidelity suite, by name."""

from __future__ import annotations

from tests.fidelity import workflows_core, workflows_crd, workflows_texts
from tests.fidelity.model import Workflow

__all__ = ["WORKFLOWS", "by_name"]

WORKFLOWS: tuple[Workflow, ...] = (
    workflows_core.WORKFLOWS + workflows_texts.WORKFLOWS + workflows_crd.WORKFLOWS
)


def by_name() -> dict[str, Workflow]:
    return {w.name: w for w in WORKFLOWS}
