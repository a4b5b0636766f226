"""A plain HTTPS client for a kubelet's log endpoint, as another user of the machine would try
it (`curl -k https://127.0.0.1:<port>/containerLogs/...`): with no client certificate, with one
from a CA of its own, or with the API server's."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
from pathlib import Path

from certs import pki

__all__ = ["foreign_client_cert", "get", "node_port", "refused"]


def get(port: int, path: str, cert: tuple[Path, Path] | None = None) -> tuple[int, bytes]:
    """GET `path` from the kubelet on 127.0.0.1:`port` (its certificate not verified, as
    `curl -k`), presenting `cert` (certificate, key) if given. TLS refusals raise."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(*cert)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def refused(port: int, path: str, cert: tuple[Path, Path] | None = None) -> str:
    """The error with which the kubelet refuses the request; fails the test if it answers."""
    try:
        status, body = get(port, path, cert)
    except (ssl.SSLError, ConnectionError) as e:
        return str(e)
    raise AssertionError(f"the kubelet answered {status}: {body[:200]!r}")


def foreign_client_cert(directory: Path) -> tuple[Path, Path]:
    """A client certificate with the API server's name, signed by a CA nobody trusts."""
    ca = pki.new_ca("someone-elses-ca")
    pair = pki.new_client_cert(
        ca, "kube-apiserver-kubelet-client", organizations=("system:masters",)
    )
    cert, key = directory / "foreign.crt", directory / "foreign.key"
    pki.atomic_write(cert, pair.cert_pem)
    pki.atomic_write(key, pair.key_pem, 0o600)
    return cert, key


def node_port(kubeconfig: Path, node: str) -> int:
    """The log port the node publishes (`status.daemonEndpoints.kubeletEndpoint.Port`)."""
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "node", node, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return int(json.loads(out.stdout)["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"])
