"""Fixtures for the localcluster tests (the `cluster` and `namespace` ones are shared)."""

from __future__ import annotations

import pytest

from tests.localcluster._http import Http
from tests.support.cluster import Cluster


@pytest.fixture
def http(cluster: Cluster) -> Http:
    return Http(cluster)
