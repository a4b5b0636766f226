"""policies.podsecurity against kube-apiserver's own Pod Security admission.

Every pod template of tests/policies/test_podsecurity.py's table, as a Pod created with a
server-side dry run in a namespace enforcing `baseline` and one enforcing `restricted`: the API
server refuses exactly the pods our rules refuse, at each level (but for `DROPPED`). (Skipped
without a real kube-apiserver: the embedded one has no Pod Security admission.)
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from policies import podsecurity
from tests.policies.test_podsecurity import CASES, job_with
from tests.support.cluster import Cluster, eventually

ENFORCE = "pod-security.kubernetes.io/enforce"


@pytest.fixture(scope="module")
def levels(reference: Cluster) -> Iterator[dict[str, str]]:
    """level -> a namespace enforcing it."""
    suffix = uuid.uuid4().hex[:6]
    out = {level: f"pss-{level}-{suffix}" for level in ("baseline", "restricted")}
    for level, ns in out.items():
        reference.kubectl("create", "namespace", ns)
        reference.kubectl("label", "namespace", ns, f"{ENFORCE}={level}")
        # A pod naming no account needs the namespace's `default` one, made by a controller.
        eventually(functools.partial(_has_default_account, reference, ns), timeout=30)
    try:
        yield out
    finally:
        for ns in out.values():
            reference.kubectl("delete", "namespace", ns, "--wait=false", check=False)


DROPPED = {"procMount Unmasked": "procMount"}
"""The one known difference: with the ProcMountType feature off (its default in 1.32) the API
server stores `procMount: Default` whatever the pod says, so an Unmasked pod is admitted there
(harmlessly); where the feature is on, Pod Security refuses it, and so do our rules."""


def _has_default_account(reference: Cluster, namespace: str) -> bool:
    return reference.kubectl("get", "sa", "default", "-n", namespace, check=False).returncode == 0


def pod_of(name: str) -> dict[str, Any]:
    template = job_with(CASES[name][0])["spec"]["replicaSpecs"][0]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{uuid.uuid4().hex[:8]}", **(template.get("metadata") or {})},
        "spec": template["spec"],
    }


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("level", ["baseline", "restricted"])
def test_the_api_server_refuses_what_our_rules_refuse(
    reference: Cluster, levels: dict[str, str], name: str, level: str
) -> None:
    pod = pod_of(name)
    ours = podsecurity.check(job_with(CASES[name][0]), level)
    if name in DROPPED:
        stored = reference.kubectl(
            "create", "--dry-run=server", "-n", levels[level], "-o", "json", "-f", "-",
            stdin=json.dumps(pod),
        )  # fmt: skip
        context = json.loads(stored.stdout)["spec"]["containers"][0]["securityContext"]
        assert context[DROPPED[name]] == "Default", context
        return
    out = reference.kubectl(
        "create", "--dry-run=server", "-n", levels[level], "-f", "-",
        stdin=json.dumps(pod), check=False,
    )  # fmt: skip
    refused = out.returncode != 0
    assert refused == bool(ours), (name, level, out.stderr, [str(e) for e in ours])
    if refused:
        assert f'violates PodSecurity "{level}:latest"' in out.stderr, out.stderr
