"""`kubectl port-forward` to a pod of the process node: kubectl tunnels SPDY through a WebSocket
to the embedded API server, which passes it to the kubelet's `/portForward`; the kubelet
connects to localhost inside the pod's network namespace."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import pytest

from tests.kubelet.conftest import LocalNode, eventually
from tests.kubelet.test_pods import make_pod, phase_is
from tests.support import portforward

CONNECT = "import socket; socket.create_connection(('127.0.0.1', {port}), timeout=1)"


def _echo_pod(core: Any, namespace: str, name: str, port: int) -> None:
    make_pod(
        core,
        namespace,
        name,
        [
            {
                "name": "echo",
                "image": "python",
                "command": [sys.executable, "-c", portforward.ECHO_SERVER],
                "env": [{"name": "PORT", "value": str(port)}],
                # An exec probe runs in the pod's network, where the server listens.
                "readinessProbe": {
                    "exec": {"command": [sys.executable, "-c", CONNECT.format(port=port)]},
                    "periodSeconds": 1,
                    "timeoutSeconds": 5,
                },
            }
        ],
    )

    def ready() -> bool:
        pod = phase_is(core, namespace, name, "Running") or {}
        conditions = pod.get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    eventually(ready, timeout=30)


@pytest.mark.parametrize(
    "websockets",
    [
        pytest.param("true", id="tunnelled-in-a-websocket"),
        pytest.param("false", id="plain-spdy"),
    ],
)
def test_port_forward_reaches_a_server_listening_on_the_pods_localhost(
    core, namespace, local_node: LocalNode, websockets: str
) -> None:
    port = portforward.free_port()  # free on the host too, for a node without pod networks
    _echo_pod(core, namespace, "echo", port)
    argv = [_kubectl(), "--kubeconfig", str(local_node.kubeconfig), "-n", namespace]
    env = {**os.environ, "KUBECTL_PORT_FORWARD_WEBSOCKETS": websockets}
    forwarding = portforward.forwarding([*argv, "port-forward", "pod/echo", f":{port}"], env=env)
    with forwarding as (local, _):
        assert portforward.echo_through(local, b"hello pod\n") == b"HELLO POD\n"
        big = b"x" * 300_000
        assert portforward.echo_through(local, big) == big.upper()  # a second connection


def test_port_forward_to_a_closed_port_reports_the_kubelets_error(
    core, namespace, local_node: LocalNode
) -> None:
    port = portforward.free_port()
    _echo_pod(core, namespace, "closed", port)
    closed = portforward.free_port()
    argv = [_kubectl(), "--kubeconfig", str(local_node.kubeconfig), "-n", namespace]
    with portforward.forwarding([*argv, "port-forward", "pod/closed", f":{closed}"]) as (
        local,
        lines,
    ):
        assert portforward.echo_through(local, b"anyone?") == b""
        eventually(lambda: any("an error occurred forwarding" in line for line in lines))
    text = "".join(lines)
    assert f"failed to connect to localhost:{closed} inside the pod's network" in text
    assert "Connection refused" in text


def _kubectl() -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    return binary
