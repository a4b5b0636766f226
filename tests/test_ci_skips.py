"""Which skips fail under CI=true (`tests/support/ci_skips.py`): a missing tool does, a test
that belongs to another tier or needs a real cluster does not."""

from __future__ import annotations

import pytest

from tests.support.ci_skips import is_tool_skip

TOOL_MISSING = [
    "kubectl is not installed",
    "kubectl binary not installed",
    "needs the kubectl binary",
    "kubectl diff needs the diff binary",
    "no ssh client to reach the remote with",
    "lint-imports is not installed (it comes with the test extra)",
    "podman is not installed (apt-get install -y podman buildah runc uidmap)",
    "runc is not installed (apt-get install -y runc)",
    "podman cannot run a container here: cgroups",
    "pods share the host network (CNI plugin(s) bridge missing in /usr/lib/cni; Debian/Ubuntu: "
    "apt install containernetworking-plugins)",
    "/usr/bin/chromium is not installed (Debian's chromium package; .ci/run installs it)",
    "pods share the host's network here, so replicas cannot train: not running as root",
]
ANOTHER_TIER = [
    "the embedded API server does not enforce RBAC: every SubjectAccessReview is allowed (run "
    "on the reference cluster: hack/reference-tests)",
    "no reference cluster: set TRAINOPS_TEST_KUBECONFIG",
    "TRAINOPS_TRAINING_PYTHON is not set (hack/training-tests installs tensorflow-cpu and "
    "xgboost-cpu)",
    "no localhost/trainops:latest in podman's image store: build it with hack/image",
    "about the embedded API server itself",
    "deploy/crds has no CRDs yet",
]


@pytest.mark.parametrize("reason", TOOL_MISSING)
def test_a_missing_tool_fails_under_ci(reason: str) -> None:
    assert is_tool_skip(reason)


@pytest.mark.parametrize("reason", ANOTHER_TIER)
def test_a_test_of_another_tier_still_skips(reason: str) -> None:
    assert not is_tool_skip(reason)
