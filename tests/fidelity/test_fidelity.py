"""Each workflow, run on the embedded server and on a real kube-apiserver, prints the same
(normalized) output at every step, except the differences declared next to the step.

Skipped unless TRAINOPS_TEST_REFERENCE_KUBECONFIG (or TRAINOPS_TEST_KUBECONFIG) names a real
cluster (with kube-controller-manager, for garbage collection). Script mode with a summary
table: `python -m tests.fidelity.run --reference KUBECONFIG`.
"""

from __future__ import annotations

import pytest

from tests.fidelity.compare import compare, describe
from tests.fidelity.model import Workflow
from tests.fidelity.runner import Target, run_pair
from tests.fidelity.workflows import WORKFLOWS

pytestmark = pytest.mark.kubectl


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w.name)
def test_workflow_prints_what_the_reference_prints(
    fidelity_targets: tuple[Target, Target], workflow: Workflow
) -> None:
    reference, embedded = fidelity_targets
    ref, emb = run_pair(reference, embedded, workflow)
    verdicts = compare(workflow, ref, emb)
    assert not any(v.failed for v in verdicts), describe(workflow, verdicts)
