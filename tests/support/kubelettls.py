"""TLS for test stand-ins of a kubelet's endpoint: API servers speak only HTTPS to kubelets
(without verifying their certificate, as kube-apiserver without
`--kubelet-certificate-authority`), so a fake `/containerLogs` server must serve TLS too."""

from __future__ import annotations

import ssl
import tempfile
from pathlib import Path

from certs import pki

__all__ = ["server_context"]


def server_context() -> ssl.SSLContext:
    """A server-side TLS context with a fresh self-signed pair for 127.0.0.1."""
    ca = pki.new_ca("test-kubelet-ca")
    directory = Path(tempfile.mkdtemp(prefix="fake-kubelet-tls-"))
    pki.write_bundle(directory, ca, pki.new_serving_cert(ca, ["127.0.0.1", "localhost"]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / pki.CERT_FILE, directory / pki.KEY_FILE)
    return context
