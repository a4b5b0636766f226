"""`trainops up --kubeconfig FILE`: the product on an API server `up` did not start.

The target is the reference cluster when `TRAINOPS_TEST_KUBECONFIG` is set, else an embedded API
server started for this module (so `up` on it is a client like any other): CRDs installed there,
webhook configurations by URL with the CA bundle, a bad job refused by that API server through the
webhook, a job run to Succeeded by the process node; and a kubeconfig that cannot be used is one
line naming the file or the server, exit code 1.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import kubeletclient, upcluster
from tests.support.cluster import BackgroundApiServer
from tests.up.conftest import Up, eventually, finish

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CRDS = (
    "tensorflowtrainingjobs.batch.tensorstack.dev",
    "xgboosttrainingjobs.batch.tensorstack.dev",
    "jobrepositories.gitops.trainops.dev",
)

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The kubeconfig of the cluster `up --kubeconfig` runs on."""
    external = upcluster.external_kubeconfig()
    if external is not None:
        yield external
        return
    server = BackgroundApiServer(tmp_path_factory.mktemp("target"))
    try:
        yield server.server.kubeconfig
    finally:
        server.stop()


@pytest.fixture(scope="module")
def on_target(target: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    upcluster.reset_namespace(target)
    instance = Up(tmp_path_factory.mktemp("up-kubeconfig") / "data")
    instance.external = target
    instance.start()
    yield instance
    finish(instance)


@pytest.fixture
def kubectl(on_target: Up) -> Kubectl:
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(on_target.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    return run


def _get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    out = kubectl("get", *args, "-o", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def _up(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainops", "up", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_banner_names_the_cluster_and_its_kubeconfig(on_target: Up, target: Path) -> None:
    # `start` returns at the banner's `export` line; its last lines may still be on their way.
    eventually(lambda: any("again to resume" in line for line in on_target.output), timeout=10)
    text = "".join(on_target.output)
    server = yaml.safe_load(target.read_text())["clusters"][0]["cluster"]["server"]
    assert f"API server  {server} (from {target})" in text
    assert f"export KUBECONFIG={target}" in text
    assert f"kubelet     node {on_target.node_name}," in text
    assert on_target.node_name == f"trainops-{on_target.instance_id}"
    resume = f"trainops up --data-dir {on_target.data_dir} --kubeconfig {target}"
    assert f"run `{resume}` again to resume" in text


def test_the_crds_are_installed_on_the_cluster_and_established(kubectl: Kubectl) -> None:
    for name in CRDS:
        crd = _get(kubectl, "crd", name)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True"
        assert "trainops.tensorstack.dev/applied-hash" in crd["metadata"]["annotations"]


def test_the_webhook_is_registered_by_url_with_the_ca_that_signed_it(
    kubectl: Kubectl, on_target: Up
) -> None:
    ca = (on_target.data_dir / "webhook" / "ca.crt").read_bytes()
    for kind, path in (
        ("mutatingwebhookconfiguration", "/mutate"),
        ("validatingwebhookconfiguration", "/validate"),
    ):
        config = _get(kubectl, kind, on_target.webhook_name)
        labels = config["metadata"]["labels"]
        assert labels["trainops.tensorstack.dev/up-instance"] == on_target.instance_id
        (hook,) = config["webhooks"]
        url = hook["clientConfig"]["url"]
        assert url.startswith("https://127.0.0.1:") and url.endswith(path)
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
        assert (hook["sideEffects"], hook["admissionReviewVersions"]) == ("None", ["v1"])


def test_a_bad_job_is_denied_by_the_api_server_naming_the_field(kubectl: Kubectl) -> None:
    denied = kubectl(
        "apply", "--server-side", "-f", str(EXAMPLES / "denied" / "limits-below-requests.yaml")
    )
    assert denied.returncode != 0
    assert (
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
        "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu: Invalid value"
    ) in denied.stderr


def test_a_job_runs_to_succeeded_on_the_process_node_whose_log_port_serves_the_api_server_only(
    kubectl: Kubectl, on_target: Up, target: Path, tmp_path: Path
) -> None:
    job = {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": "hello"},
        "spec": {
            "replicaSpecs": [
                {
                    "type": "worker",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "busybox",
                                    "command": ["sh", "-c", "echo trained"],
                                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ]
                        }
                    },
                }
            ]
        },
    }
    created = kubectl("create", "-f", "-", stdin=yaml.safe_dump(job))
    assert created.returncode == 0, created.stderr
    wait = kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=60s", "tfj/hello")
    assert wait.returncode == 0, wait.stderr
    pod = _get(kubectl, "pod", "hello-worker-0")
    assert pod["spec"]["nodeName"] == on_target.node_name
    assert kubectl("logs", "hello-worker-0").stdout == "trained\n"
    # The node's log port, in the same test as the pod it reads (under two workers, another
    # test of this module may run against another worker's `up`): another user of the
    # machine gets nothing from it (no certificate, or one from a CA of their own); the API
    # server's kubelet client certificate is served.
    path = "/containerLogs/default/hello-worker-0/tensorflow"
    port = kubeletclient.node_port(on_target.kubeconfig, on_target.node_name)
    kubeletclient.refused(port, path)
    kubeletclient.refused(port, path, kubeletclient.foreign_client_cert(tmp_path))
    # The reference cluster keeps kube-apiserver's pair beside its kubeconfig, the embedded
    # server in pki/.
    here = (
        target.parent if (target.parent / "kubelet-client.crt").exists() else target.parent / "pki"
    )
    status, body = kubeletclient.get(
        port, path, (here / "kubelet-client.crt", here / "kubelet-client.key")
    )
    assert (status, body) == (200, b"trained\n")


def test_stopping_up_removes_its_webhook_configurations(target: Path, tmp_path: Path) -> None:
    """They point at this machine with failurePolicy Fail: left behind, they would refuse
    every training job on the cluster."""
    upcluster.reset_namespace(target)
    instance = Up(tmp_path / "data")
    instance.external = target
    # The module's `up` (on_target) runs the controllers: this one runs without them.
    instance.start(args=("--no-controller", "--no-gitops"))
    assert instance.stop() == 0
    name = instance.webhook_name
    for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(target), "get", kind, "-o", "name"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        assert name not in out.stdout


def _kubeconfig(path: Path, server: str, token: str = "t", ca: str | None = None) -> Path:
    cluster: dict[str, Any] = {"server": server}
    if ca is None:
        cluster["insecure-skip-tls-verify"] = True
    else:
        cluster["certificate-authority-data"] = ca
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("trainops up: starting")
    assert len(lines) == 2, done.stderr
    return lines[1]


def test_a_missing_kubeconfig_is_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    line = _one_line(_up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(missing)))
    assert line == f"trainops up: --kubeconfig {missing}: No such file or directory"


def test_a_kubeconfig_that_is_not_one_is_one_line_naming_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.yaml"
    garbage.write_text("just: [a, list\n")
    line = _one_line(_up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(garbage)))
    assert line.startswith(f"trainops up: --kubeconfig {garbage}: not a usable kubeconfig (")


def test_a_server_that_refuses_connections_is_one_line_naming_it(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
    line = _one_line(_up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(config)))
    assert line.startswith(
        f"trainops up: cannot reach the API server https://127.0.0.1:{port} (from {config}) "
        "within 10 s: "
    )


def test_a_server_that_never_answers_times_out_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        held: list[socket.socket] = []
        stop = threading.Event()

        def accept() -> None:  # accept and say nothing, not even a TLS handshake
            silent.settimeout(0.2)
            while not stop.is_set():
                try:
                    held.append(silent.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        config = _kubeconfig(tmp_path / "kubeconfig", f"https://127.0.0.1:{port}")
        try:
            done = _up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(config))
        finally:
            stop.set()
            thread.join()
            for conn in held:
                conn.close()
    line = _one_line(done)
    assert line.startswith(f"trainops up: cannot reach the API server https://127.0.0.1:{port}")
    assert "within 10 s" in line


def test_credentials_the_server_refuses_are_one_line_naming_the_file(
    target: Path, tmp_path: Path
) -> None:
    cluster = yaml.safe_load(target.read_text())["clusters"][0]["cluster"]
    server, ca = cluster["server"], cluster.get("certificate-authority-data")
    config = _kubeconfig(tmp_path / "kubeconfig", server, token="not-a-token", ca=ca)
    line = _one_line(_up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(config)))
    assert line == (
        f"trainops up: the API server {server} refused the credentials in {config} "
        "(401 Unauthorized)"
    )


def test_a_missing_git_webhook_secret_stops_up_before_anything_starts(
    target: Path, tmp_path: Path
) -> None:
    data = tmp_path / "d"
    ref = "default/no-such-hook-secret"
    done = _up("--data-dir", str(data), "--kubeconfig", str(target), "--git-webhook-secret", ref)
    assert _one_line(done) == (
        f"trainops up: --git-webhook-secret {ref}: no such Secret; create it with "
        "`kubectl create secret generic no-such-hook-secret -n default --from-literal=secret=…`"
    )
    # Read right after connecting: no webhook, node or API was started (nor left behind).
    assert not (data / "api.json").exists()
    assert not (data / "webhook").exists()  # the webhook's certificates


@pytest.mark.skipif(
    upcluster.external_kubeconfig() is None,
    reason="needs a real cluster: the embedded API server does not enforce RBAC",
)
def test_credentials_without_the_permissions_are_one_line_naming_what_is_missing(
    target: Path, tmp_path: Path
) -> None:
    def kubectl(*args: str) -> str:
        out = subprocess.run(
            ["kubectl", "--kubeconfig", str(target), "-n", "default", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    # A ServiceAccount no Role names: its token is accepted, and allowed nothing.
    sa = kubectl("create", "serviceaccount", "up-nobody", "--dry-run=client", "-o", "yaml")
    applied = subprocess.run(
        ["kubectl", "--kubeconfig", str(target), "apply", "-f", "-"],
        input=sa,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert applied.returncode == 0, applied.stderr
    token = kubectl("create", "token", "up-nobody").strip()
    cluster = yaml.safe_load(target.read_text())["clusters"][0]["cluster"]
    server = cluster["server"]
    config = _kubeconfig(
        tmp_path / "kubeconfig", server, token=token, ca=cluster.get("certificate-authority-data")
    )
    line = _one_line(_up("--data-dir", str(tmp_path / "d"), "--kubeconfig", str(config)))
    assert line.startswith(
        f"trainops up: the credentials in {config} lack a permission trainops up needs on "
        f"{server}: "
    )
    assert (
        'User "system:serviceaccount:default:up-nobody" cannot list resource "namespaces"' in line
    )
