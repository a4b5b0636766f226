"""Credentials kept in the data directory, and the kubeconfig that points clients at them.

Layout of DATA_DIR: `pki/ca.crt`, `pki/ca.key`, `pki/tls.crt`, `pki/tls.key`,
`pki/kubelet-client.crt`, `pki/kubelet-client.key` (the client certificate the server presents
to kubelets, signed by the same CA, as kube-apiserver's `--kubelet-client-certificate`), `token`
(the kubeconfig's), `api-token` (the HTTP API's and dashboard's user, see `Credentials.api_token`),
`server.json` (the port last served on) and `kubeconfig`; `pki/` is 0700 and every file 0600,
certificates too (`localcluster.datadir`: nothing in the data directory is for other users). All of it is created on
first start and reused afterwards, so a kubeconfig handed out once keeps working across
restarts: same CA, same token, same port.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from certs import pki
from localcluster import datadir

__all__ = [
    "API_TOKEN_FILE",
    "CONTEXT",
    "Credentials",
    "load_or_create_credentials",
    "read_port",
    "render_kubeconfig",
    "write_kubeconfig",
    "write_port",
]

log = logging.getLogger("localcluster.kubeconfig")
CONTEXT = "trainops"
_USER = "trainops-admin"
API_TOKEN_FILE = "api-token"
KUBELET_CLIENT_NAME = "kube-apiserver-kubelet-client"
_SANS = ("localhost", "127.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc")


@dataclass(frozen=True)
class Credentials:
    ca_file: Path
    cert_file: Path
    key_file: Path
    token: str
    kubelet_client_cert: Path
    kubelet_client_key: Path
    api_token: str = ""
    """`DATA_DIR/api-token`: the token of the HTTP API's and dashboard's user (`trainops up`
    gives it to `trainops repo` and prints a login URL with it); the server accepts it as the
    user `API_USER` and TokenReview answers for it."""

    @property
    def ca_pem(self) -> bytes:
        return self.ca_file.read_bytes()


def _serving_covers(cert_pem: bytes, host: str) -> bool:
    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    names = {str(v) for v in sans.get_values_for_type(x509.DNSName)}
    names |= {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    return host in names


def load_or_create_credentials(data_dir: Path, host: str) -> Credentials:
    """Reuse the CA, serving certificate and token in `data_dir`, creating what is missing.

    Damaged files (not PEM, a key that does not match) are replaced with a warning naming
    them, rather than keeping the server from starting: only DATA_DIR/kubeconfig depends on
    them, and it is rewritten at every start.
    """
    pki_dir = data_dir / "pki"
    datadir.make_private_dir(pki_dir)
    ca_file, ca_key = pki_dir / pki.CA_FILE, pki_dir / "ca.key"
    cert_file, key_file = pki_dir / pki.CERT_FILE, pki_dir / pki.KEY_FILE
    ca = _load(ca_file, ca_key, "the CA")
    fresh_ca = ca is None
    if ca is None:
        ca = pki.new_ca("trainops-localcluster-ca")
        pki.atomic_write(ca_key, ca.key_pem, 0o600)
        pki.atomic_write(ca_file, ca.cert_pem, datadir.PRIVATE_FILE)
    serving = None if fresh_ca else _load(cert_file, key_file, "the serving certificate")
    if serving is None or not _serving_covers(serving.cert_pem, host):
        sans = (*_SANS, host) if host not in _SANS else _SANS
        serving = pki.new_serving_cert(ca, sans, common_name="kube-apiserver")
        pki.write_bundle(pki_dir, ca, serving, cert_mode=datadir.PRIVATE_FILE)
    client_cert, client_key = pki_dir / "kubelet-client.crt", pki_dir / "kubelet-client.key"
    client = None if fresh_ca else _load(client_cert, client_key, "the kubelet client certificate")
    expiring = client is not None and pki.not_after(client.cert_pem) < datetime.now(
        UTC
    ) + timedelta(days=1)
    if client is None or expiring or not _issued_by(client.cert_pem, ca):
        client = pki.new_client_cert(
            ca, KUBELET_CLIENT_NAME, organizations=("system:masters",), days=3650
        )
        pki.atomic_write(client_key, client.key_pem, datadir.PRIVATE_FILE)
        pki.atomic_write(client_cert, client.cert_pem, datadir.PRIVATE_FILE)
    token = _token(data_dir / "token")
    api_token = _token(data_dir / API_TOKEN_FILE)
    return Credentials(ca_file, cert_file, key_file, token, client_cert, client_key, api_token)


def _token(path: Path) -> str:
    """The token kept in `path` (mode 0600), created when missing or empty."""
    token = path.read_text().strip() if path.exists() else ""
    if not token:
        token = secrets.token_urlsafe(32)
        pki.atomic_write(path, token.encode() + b"\n", 0o600)
    return token


def _issued_by(cert_pem: bytes, ca: pki.KeyPair) -> bool:
    try:
        x509.load_pem_x509_certificate(cert_pem).verify_directly_issued_by(ca.certificate())
    except Exception:  # ValueError, TypeError, cryptography's InvalidSignature
        return False
    return True


def _load(cert_file: Path, key_file: Path, what: str) -> pki.KeyPair | None:
    """The key pair, or None when missing or damaged (then replaced, with a warning)."""
    if not (cert_file.exists() and key_file.exists()):
        return None
    try:
        return pki.load_keypair(cert_file, key_file)
    except ValueError as e:
        log.warning(
            "%s; making a new %s (%s is rewritten; copies of the old one stop working)",
            e,
            what,
            cert_file.parent.parent / "kubeconfig",
        )
        return None


def read_port(data_dir: Path) -> int:
    try:
        return int(json.loads((data_dir / "server.json").read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def write_port(data_dir: Path, port: int) -> None:
    body = json.dumps({"port": port}).encode() + b"\n"
    pki.atomic_write(data_dir / "server.json", body, datadir.PRIVATE_FILE)


def render_kubeconfig(url: str, ca_pem: bytes, token: str, namespace: str = "default") -> str:
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": _USER, "user": {"token": token}}],
        "contexts": [
            {
                "name": CONTEXT,
                "context": {"cluster": CONTEXT, "user": _USER, "namespace": namespace},
            }
        ],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, url: str, creds: Credentials) -> None:
    pki.atomic_write(path, render_kubeconfig(url, creds.ca_pem, creds.token).encode(), 0o600)
