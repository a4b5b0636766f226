"""`kubectl exec` and `port-forward` into a pod of `trainops up`'s process node, through the API
server.

On the embedded server, `pods/exec` is relayed to the kubelet as a WebSocket; with
`TRAINOPS_TEST_KUBECONFIG` (`up --kubeconfig --node` on the reference kube-apiserver), the
real API server translates kubectl's WebSocket into SPDY towards the kubelet: both of the
kubelet's transports are exercised with the same assertions. Port-forward is SPDY to the
kubelet in both cases (kubectl tunnels it through a WebSocket to the API server)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from localcluster.kubelet import netns, podnet
from tests.support import portforward
from tests.up.conftest import Up, eventually

_DECISION = podnet.decide(netns.read_facts())

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def pod(running_up: Up) -> Iterator[str]:
    """A running pod of the node, for the module's exec sessions."""
    name = f"exec-{uuid.uuid4().hex[:6]}"
    core = running_up.core()
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sleep", "600"],
                        "env": [{"name": "GREETING", "value": "hi from the pod"}],
                    }
                ],
                "terminationGracePeriodSeconds": 1,
            },
        },
    )
    eventually(
        lambda: core.read_namespaced_pod(name, "default").status.phase == "Running", timeout=60
    )
    yield name
    core.delete_namespaced_pod(name, "default")


def test_exec_runs_the_command_in_the_containers_environment(kubectl: Kubectl, pod: str) -> None:
    out = kubectl("exec", pod, "--", "sh", "-c", 'echo "$GREETING"')
    assert (out.returncode, out.stdout) == (0, "hi from the pod\n"), out.stderr


@pytest.mark.skipif(not _DECISION.pod_network, reason=_DECISION.reason)
def test_exec_sees_the_pods_hostname_and_hosts_file(
    kubectl: Kubectl, pod: str, running_up: Up
) -> None:
    out = kubectl("exec", pod, "--", "hostname")
    assert (out.returncode, out.stdout) == (0, f"{pod}\n"), out.stderr
    ip = running_up.core().read_namespaced_pod(pod, "default").status.pod_ip
    hosts = kubectl("exec", pod, "--", "cat", "/etc/hosts").stdout
    assert "# Kubernetes-managed hosts file" in hosts
    assert f"{ip}\t{pod}" in hosts.splitlines()


def test_stdin_is_echoed_by_cat(running_up: Up, pod: str) -> None:
    binary = _kubectl()
    text = "".join(f"line {i}\n" for i in range(5000))
    out = subprocess.run(
        [binary, "--kubeconfig", str(running_up.kubeconfig), "exec", "-i", pod, "--", "cat"],
        input=text,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (out.returncode, out.stdout) == (0, text), out.stderr


def test_a_non_zero_exit_code_is_kubectls_exit_code(kubectl: Kubectl, pod: str) -> None:
    out = kubectl("exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert out.returncode == 3
    assert out.stdout == "out\n"
    assert "err\n" in out.stderr
    assert "command terminated with exit code 3" in out.stderr


def test_port_forward_reaches_a_server_on_the_pods_localhost(running_up: Up) -> None:
    port = portforward.free_port()  # free on the host too, for a node without pod networks
    name = f"echo-{uuid.uuid4().hex[:6]}"
    core = running_up.core()
    connect = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)"
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "echo",
                        "image": "python",
                        "command": [sys.executable, "-c", portforward.ECHO_SERVER],
                        "env": [{"name": "PORT", "value": str(port)}],
                        "readinessProbe": {
                            "exec": {"command": [sys.executable, "-c", connect]},
                            "periodSeconds": 1,
                            "timeoutSeconds": 5,
                        },
                    }
                ],
            },
        },
    )
    try:

        def ready() -> bool:
            conditions = core.read_namespaced_pod(name, "default").status.conditions or []
            return any(c.type == "Ready" and c.status == "True" for c in conditions)

        eventually(ready, timeout=60)
        binary = _kubectl()
        argv = [binary, "--kubeconfig", str(running_up.kubeconfig), "port-forward", f"pod/{name}"]
        with portforward.forwarding([*argv, f":{port}"]) as (local, _):
            assert portforward.echo_through(local, b"through the api server") == (
                b"THROUGH THE API SERVER"
            )
    finally:
        core.delete_namespaced_pod(name, "default")


def test_the_python_clients_v4_websocket_exec_works_too(running_up: Up, pod: str) -> None:
    """`kubernetes.stream` speaks `v4.channel.k8s.io`, which kube-apiserver does not translate:
    it passes the WebSocket upgrade itself to the kubelet (the embedded server relays it)."""
    from kubernetes.stream import stream

    core = running_up.core()
    resp = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        "default",
        command=["sh", "-c", 'echo "$GREETING"; echo oops >&2; exit 5'],
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    resp.run_forever(timeout=20)
    assert resp.read_stdout() == "hi from the pod\n"
    assert resp.read_stderr() == "oops\n"
    assert resp.returncode == 5


def _kubectl() -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    return binary
