"""Fixtures of the fidelity suite: a real cluster as the reference (from the environment) and an
embedded API server of its own (the session-wide `cluster` fixture may itself be the real one
when TRAINOPS_TEST_KUBECONFIG is set)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fidelity.runner import Target
from tests.fidelity.suite import prepare

REFERENCE_ENV = ("TRAINOPS_TEST_REFERENCE_KUBECONFIG", "TRAINOPS_TEST_KUBECONFIG")


def reference_kubeconfig() -> Path | None:
    for name in REFERENCE_ENV:
        value = os.environ.get(name)
        if value:
            return Path(value)
    return None


@pytest.fixture(scope="session")
def fidelity_targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Target, Target]]:
    """(reference, embedded), both with trainops' CRDs installed; skips without a reference."""
    config = reference_kubeconfig()
    if config is None:
        pytest.skip(f"no reference cluster: set {' or '.join(REFERENCE_ENV)}")
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl binary not installed")
    from tests.support.cluster import BackgroundApiServer

    server = BackgroundApiServer(tmp_path_factory.mktemp("fidelity-embedded"))
    try:
        reference = Target("reference", config)
        embedded = Target("embedded", server.server.kubeconfig)
        prepare(reference, embedded)
        yield reference, embedded
    finally:
        server.stop()
