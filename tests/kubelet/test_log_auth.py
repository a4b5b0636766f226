"""The kubelet's log endpoint serves only the API server: a client certificate signed by the CA
it trusts (the embedded server's `pki/kubelet-client.crt`), nothing to anyone else on the
machine — no certificate, or one from another CA, fails the TLS handshake. `kubectl logs`,
which goes through the API server, still works."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.kubelet.conftest import LocalNode, eventually
from tests.support import kubeletclient


@pytest.fixture(scope="module")
def talker(core: Any, local_node: LocalNode) -> tuple[str, str]:
    """A pod that printed a line, and the namespace it is in."""
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": namespace}})
    pod = {
        "metadata": {"name": "talker"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox", "command": ["echo", "secret words"]}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    eventually(
        lambda: core.read_namespaced_pod("talker", namespace).status.phase == "Succeeded",
        timeout=30,
    )
    return namespace, "/containerLogs/" + namespace + "/talker/c"


def _port(local_node: LocalNode) -> int:
    return kubeletclient.node_port(local_node.kubeconfig, "trainops")


def test_a_client_without_a_certificate_is_refused(
    local_node: LocalNode, talker: tuple[str, str]
) -> None:
    kubeletclient.refused(_port(local_node), talker[1])


def test_healthz_is_not_served_without_a_certificate_either(local_node: LocalNode) -> None:
    kubeletclient.refused(_port(local_node), "/healthz")


def test_a_certificate_from_another_ca_is_refused(
    local_node: LocalNode, talker: tuple[str, str], tmp_path: Path
) -> None:
    cert = kubeletclient.foreign_client_cert(tmp_path)
    kubeletclient.refused(_port(local_node), talker[1], cert)


def test_the_api_servers_client_certificate_is_served(
    local_node: LocalNode, talker: tuple[str, str]
) -> None:
    pki_dir = local_node.data_dir / "pki"
    cert = (pki_dir / "kubelet-client.crt", pki_dir / "kubelet-client.key")
    status, body = kubeletclient.get(_port(local_node), talker[1], cert)
    assert (status, body) == (200, b"secret words\n")


def test_kubectl_logs_still_works_through_the_api_server(
    local_node: LocalNode, talker: tuple[str, str]
) -> None:
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(local_node.kubeconfig), "-n", talker[0], "logs", "talker"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (out.returncode, out.stdout) == (0, "secret words\n"), out.stderr
