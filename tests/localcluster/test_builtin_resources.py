"""Resource requests and limits of built-in pod specs, as kube-apiserver's
`ValidateResourceRequirements` refuses them, through kubectl and as table tests."""

from __future__ import annotations

import json
import shutil

import pytest

from localcluster.api.registry import resource_id
from localcluster.api.types import ResourceInfo
from localcluster.write.validation import canonical_quantity, validate_builtin_semantics
from tests.support.cluster import Cluster

KUBECTL = shutil.which("kubectl")
POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("2", "2"), ("2000m", "2"), ("0.5", "500m"), ("1024Mi", "1Gi"), ("1.5Gi", "1536Mi"),
     ("512Ki", "512Ki"), ("1500", "1500"), ("1e3", "1e3"), ("0.1m", "100u"), ("3E", "3E"),
     ("100", "100"), ("1023", "1023"), ("0", "0")],
)  # fmt: skip
def test_quantities_print_as_resource_quantity_string(text: str, expected: str) -> None:
    assert canonical_quantity(text) == expected


def pod(resources: dict, *, init: bool = False) -> dict:
    container = {"name": "main", "image": "busybox", "resources": resources}
    key = "initContainers" if init else "containers"
    spec = {key: [container]}
    if init:
        spec["containers"] = [{"name": "app", "image": "busybox"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@pytest.mark.parametrize(
    ("resources", "init", "expected"),
    [
        pytest.param({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, False,
                     [("spec.containers[0].resources.requests",
                       'Invalid value: "2": must be less than or equal to cpu limit of 1')],
                     id="cpu"),
        pytest.param({"requests": {"memory": "2048Mi"}, "limits": {"memory": "1Gi"}}, True,
                     [("spec.initContainers[0].resources.requests",
                       'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi')],
                     id="init-memory"),
        pytest.param({"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}},
                     False, [("spec.containers[0].resources.requests",
                              'Invalid value: "1": must be equal to nvidia.com/gpu limit of 2')],
                     id="extended-not-overcommitable"),
        pytest.param({"requests": {"nvidia.com/gpu": "1"}}, False,
                     [("spec.containers[0].resources.limits",
                       "Required value: Limit must be set for non overcommitable resources")],
                     id="extended-without-limit"),
        pytest.param({"requests": {"cpu": "500m", "memory": "1Gi"},
                      "limits": {"cpu": "0.5", "memory": "1024Mi"}}, False, [], id="equal"),
        pytest.param({"requests": {"cpu": "1"}}, False, [], id="no-limit"),
        pytest.param({"requests": {"cpu": "-1"}, "limits": {"memory": "-1Gi"}}, False,
                     [("spec.containers[0].resources.limits[memory]",
                       'Invalid value: "-1Gi": must be greater than or equal to 0'),
                      ("spec.containers[0].resources.requests[cpu]",
                       'Invalid value: "-1": must be greater than or equal to 0')],
                     id="negative-keyed-path"),
    ],
)  # fmt: skip
def test_requests_above_limits_are_invalid(
    resources: dict, init: bool, expected: list[tuple[str, str]]
) -> None:
    causes = validate_builtin_semantics(POD, pod(resources, init=init))
    assert [(c["field"], c["message"]) for c in causes] == expected
    assert resource_id(POD) == "/pods"


# --------------------------------------------------------------------------- kubectl

needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")

DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "greedy"},
    "spec": {
        "selector": {"matchLabels": {"app": "greedy"}},
        "template": {
            "metadata": {"labels": {"app": "greedy"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
                    }
                ]
            },
        },
    },
}


@needs_kubectl
def test_kubectl_prints_the_request_over_limit_error_for_a_pod(
    cluster: Cluster, namespace: str
) -> None:
    body = pod({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
    out = cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(body), check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'The Pod "p" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
        "must be less than or equal to cpu limit of 1"
    )


@needs_kubectl
def test_kubectl_prints_the_request_over_limit_error_for_a_deployment_template(
    cluster: Cluster, namespace: str
) -> None:
    out = cluster.kubectl("-n", namespace, "create", "-f", "-", stdin=json.dumps(DEPLOYMENT),
                          check=False)  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'The Deployment "greedy" is invalid: spec.template.spec.containers[0].resources.requests: '
        'Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'
    )


@needs_kubectl
def test_kubectl_prints_negative_quantities_with_the_keyed_field_path(
    cluster: Cluster, namespace: str
) -> None:
    body = pod({"requests": {"cpu": "-500m"}})
    out = cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(body), check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'The Pod "p" is invalid: spec.containers[0].resources.requests[cpu]: Invalid value: '
        '"-500m": must be greater than or equal to 0'
    )
