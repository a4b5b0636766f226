"""Fixtures of the end-to-end tier shared by its modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.gitops_cluster import (
    REPO,
    SEEDS,
    apply,
    git_deployment,
    new_namespace,
)
from tests.e2e.kubectl import kubectl


@pytest.fixture(scope="session")
def git_url() -> Iterator[str]:
    """The Git host's base URL as the cluster's pods reach it (its Service's DNS name)."""
    namespace = new_namespace("e2e-git")
    try:
        sources = {
            "gitserver.py": (REPO / "tests" / "e2e" / "gitserver.py").read_text(),
            "githttp.py": (REPO / "tests" / "support" / "githttp.py").read_text(),
        }
        config_maps = [{"name": "gitserver", "data": sources}] + [
            {"name": f"seed-{repo}", "data": files} for repo, files in SEEDS.items()
        ]
        apply(
            *(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": c["name"], "namespace": namespace},
                    "data": c["data"],
                }
                for c in config_maps
            ),
            git_deployment(namespace),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "git", "namespace": namespace},
                "spec": {
                    "selector": {"app": "git"},
                    "ports": [{"name": "http", "port": 8080, "targetPort": 8080}],
                },
            },
        )
        kubectl("-n", namespace, "rollout", "status", "deployment/git", "--timeout=180s")
        yield f"http://git.{namespace}.svc:8080"
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)
