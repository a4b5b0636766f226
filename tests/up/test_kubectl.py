"""What a new user does first with `trainops up`, through kubectl."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.up.conftest import eventually

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_kubectl_run_echo_hi_then_logs(kubectl) -> None:
    result = kubectl("run", "x", "--restart=Never", "--image=busybox", "--", "sh", "-c", "echo hi")
    assert result.returncode == 0, result.stderr
    eventually(
        lambda: kubectl("get", "pod", "x", "-o", "jsonpath={.status.phase}").stdout == "Succeeded"
    )
    assert kubectl("logs", "x").stdout == "hi\n"


def test_kubectl_apply_of_a_bad_job_is_denied_by_the_webhook(kubectl) -> None:
    """kubectl → embedded API server → admission chain → in-process webhook (TLS) → policies."""
    result = kubectl(
        "apply", "--server-side", "-f", str(EXAMPLES / "denied" / "limits-below-requests.yaml")
    )
    assert result.returncode != 0
    assert (
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request'
        in result.stderr
    )
    assert "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu" in result.stderr
    good = kubectl("create", "-f", str(EXAMPLES / "tensorflow-mnist.yaml"))
    assert good.returncode == 0, good.stderr


def test_what_the_webhook_leaves_to_the_crd_schema_is_refused_by_the_api_server(
    kubectl, tmp_path: Path
) -> None:
    """/validate skips the structural walk; the API server's schema step does that work."""
    text = (EXAMPLES / "tensorflow-mnist.yaml").read_text()
    cases = {
        "typo": (
            text.replace("name: mnist", "name: mnist-typo").replace("replicas: 2", "replicass: 2"),
            'strict decoding error: unknown field "spec.replicaSpecs[1].replicass"',
        ),
    }
    for name, (manifest, expected) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(manifest)
        result = kubectl("create", "-f", str(path))
        assert result.returncode != 0, name
        assert expected in result.stderr, result.stderr
        assert "admission webhook" not in result.stderr


def test_the_node_is_ready_and_publishes_its_log_port(kubectl, running_up) -> None:
    node = running_up.node_name
    out = kubectl(
        "get",
        "node",
        node,
        "-o",
        "jsonpath={.status.conditions[?(@.type=='Ready')].status} {.status.daemonEndpoints.kubeletEndpoint.Port}",
    )
    ready, port = out.stdout.split()
    assert ready == "True" and int(port) > 0
    lease = kubectl(
        "get", "lease", node, "-n", "kube-node-lease", "-o", "jsonpath={.spec.holderIdentity}"
    )
    assert lease.stdout == node


def test_a_second_up_on_the_same_data_dir_is_refused(running_up) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(running_up.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "is in use by another trainops up (pid" in result.stderr


def test_an_apiserver_on_the_data_dir_of_a_running_up_is_refused_and_changes_nothing(
    running_up,
) -> None:
    import subprocess
    import sys

    kubeconfig = running_up.kubeconfig.read_text()
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(running_up.data_dir)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "is in use by another trainops up (pid" in result.stderr
    assert running_up.kubeconfig.read_text() == kubeconfig


@pytest.mark.parametrize(
    ("replicas", "expected"),
    [
        pytest.param(
            "5000000000",
            ["The TensorFlowTrainingJob \"mnist-overflow\" is invalid: {f}: Invalid value: "
             "5000000000: {f} in body should be less than or equal to 2147483647"],
            id="beyond-int32",
        ),
        pytest.param(
            "50000000000000000000",
            ["* {f}: Invalid value: \"number\": {f} in body must be of type integer: \"number\"",
             "* {f}: Invalid value: 5e+19: {f} in body should be less than or equal to "
             "2.147483647e+09",
             "* <nil>: Invalid value: \"null\": some validation rules were not checked because the "
             "object was invalid; correct the existing errors to complete validation"],
            id="beyond-int64",
        ),
    ],
)  # fmt: skip
def test_an_integer_overflow_is_refused_by_the_schema_as_kube_apiserver_words_it(
    kubectl, tmp_path: Path, replicas: str, expected: list[str]
) -> None:
    """kube-apiserver v1.32 does not enforce `format: int32` on custom resources (our CRDs'
    `maximum` refuses instead), and decodes an integer beyond int64 as a float; the embedded
    server answers the same, line for line."""
    text = (EXAMPLES / "tensorflow-mnist.yaml").read_text()
    path = tmp_path / "overflow.yaml"
    path.write_text(
        text.replace("name: mnist", "name: mnist-overflow").replace(
            "replicas: 2", f"replicas: {replicas}"
        )
    )
    result = kubectl("create", "-f", str(path))
    assert result.returncode != 0
    field = "spec.replicaSpecs[1].replicas"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-len(expected) :] == [e.format(f=field) for e in expected], result.stderr
