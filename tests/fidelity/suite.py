"""Running the whole suite against two servers: CRDs installed once, then each workflow on both
servers at once, compared step by step."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

from tests.fidelity.compare import StepVerdict, compare
from tests.fidelity.model import Workflow
from tests.fidelity.runner import Target, install_crds, run_pair

__all__ = ["crds_yaml", "prepare", "run_suite"]


def crds_yaml() -> str:
    """trainops' CRDs as `trainops crds` prints them."""
    out = subprocess.run(
        [sys.executable, "-m", "trainops", "crds"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return out.stdout


def prepare(*targets: Target) -> None:
    crds = crds_yaml()
    for target in targets:
        install_crds(target, crds)


def run_suite(
    reference: Target, embedded: Target, workflows: Iterable[Workflow]
) -> dict[str, list[StepVerdict]]:
    results = {}
    for workflow in workflows:
        ref, emb = run_pair(reference, embedded, workflow)
        results[workflow.name] = compare(workflow, ref, emb)
    return results
