"""The `embedded_only` marker: a test about the embedded API server itself (its storage, its
restarts, `cluster.embedded`) is skipped, with its reason, when `TRAINOPS_TEST_KUBECONFIG` points
the suite at a real cluster (the reference control plane in CI, see docs/REFERENCE-CLUSTER.md).

    @pytest.mark.embedded_only("reads the embedded server's store")
"""

from __future__ import annotations

import os

import pytest

__all__ = ["pytest_collection_modifyitems"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("TRAINOPS_TEST_KUBECONFIG"):
        return
    for item in items:
        marker = item.get_closest_marker("embedded_only")
        if marker is None:
            continue
        why = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        reason = "embedded API server only" + (f": {why}" if why else "")
        item.add_marker(pytest.mark.skip(reason=reason))
