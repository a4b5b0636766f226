"""`trainops up`'s wiring onto an API server, whichever it is: the embedded one or `--kubeconfig`.

`up` first gets a kubeconfig — by starting the embedded API server, or from `--kubeconfig` —
and then runs the same steps against it: connect (reachability and credentials checked first,
so a wrong file or server is one line, not a traceback half-way through), install the CRDs,
serve the webhook on a loopback port and register it by URL with its CA bundle, and optionally
join the process kubelet as a node. Nothing here asks which server it talks to.

The webhook configurations are removed again when `up` stops: they point at a port on this
machine with `failurePolicy: Fail`, so left behind on a shared cluster they would refuse every
training job until the next `up`. (A crashed `up` leaves them; the next start replaces them.)
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from trainops.commands import kubeconnect
from trainops.commands.kubeconnect import CONNECT_TIMEOUT, StartError, describe_api_error

if TYPE_CHECKING:
    from kube.client import Client
    from kube.resources import Resource

__all__ = [
    "CONNECT_TIMEOUT",
    "StartError",
    "connect",
    "describe_api_error",
    "install_crds",
    "is_loopback",
    "start_node",
    "start_webhook",
    "usable_webhook_certs",
]

log = logging.getLogger("trainops.up")

_ESTABLISHED_TIMEOUT = 30.0
_HASH_ANNOTATION = "trainops.tensorstack.dev/applied-hash"


def is_loopback(server_url: str) -> bool:
    """Whether the API server at `server_url` is on this machine (then `up` joins it as a node
    by default: pods run here, and only here can they be reached)."""
    host = urlsplit(server_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def connect(kubeconfig: Path) -> Client:
    """A client for `kubeconfig` that has been answered once (`kubeconnect.connect`)."""
    return await kubeconnect.connect(kubeconfig, field_manager="trainops-up")


async def install_crds(client: Client) -> None:
    """Both training-job kinds and JobRepository, created or replaced when changed, then
    waited for until the API server serves them (informers started earlier would get 404s)."""
    from kube import resources
    from trainops.commands.crds import all_crds

    crds = all_crds()
    for crd in crds:
        await _apply(client, resources.CRDS, crd)
    deadline = time.monotonic() + _ESTABLISHED_TIMEOUT
    for crd in crds:
        name = crd["metadata"]["name"]
        while not _established(await client.get(resources.CRDS, name)):
            if time.monotonic() > deadline:
                raise StartError(
                    f"CustomResourceDefinition {name} was not Established after "
                    f"{_ESTABLISHED_TIMEOUT:.0f} s"
                )
            await asyncio.sleep(0.1)


async def start_webhook(stack: Any, client: Client, data_dir: Path) -> str:
    """The admission webhook on a loopback port, registered by URL; returns the URL."""
    from datetime import UTC, datetime

    from certs import pki
    from certs.inject import ca_bundle_b64
    from kube import errors, resources
    from webhook import configurations
    from webhook.server import ServerConfig, start

    cert_dir = data_dir / "webhook"
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_file, cert_file, key_file = (
        cert_dir / n for n in (pki.CA_FILE, pki.CERT_FILE, pki.KEY_FILE)
    )
    if not usable_webhook_certs(ca_file, cert_file, key_file, datetime.now(UTC)):
        ca = pki.new_ca("trainops-local-webhook-ca")
        pki.write_bundle(cert_dir, ca, pki.new_serving_cert(ca, ["localhost", "127.0.0.1"]))
    running = await start(ServerConfig(cert_dir=cert_dir, host="127.0.0.1", port=0))
    stack.stops.append(running.close)
    url = f"https://127.0.0.1:{running.port}"
    bundle = ca_bundle_b64(ca_file.read_bytes())
    mutating, validating = configurations.by_url(url, bundle)
    registered = [
        (resources.MUTATING_WEBHOOK_CONFIGURATIONS, mutating),
        (resources.VALIDATING_WEBHOOK_CONFIGURATIONS, validating),
    ]

    async def unregister() -> None:
        for resource, body in registered:
            with contextlib.suppress(errors.NotFound):
                await client.delete(resource, body["metadata"]["name"], timeout=5)

    # Registered before applying: a start that fails half-way still removes what it wrote.
    stack.stops.append(unregister)
    for resource, body in registered:
        await _apply(client, resource, body)
    return url


async def start_node(
    stack: Any, kubeconfig: Path, data_dir: Path, *, images: tuple[Any, ...] = ()
) -> None:
    """The process kubelet joined as a node, with the scheduler binding pods to it; `images`
    are the `--image` mappings (`localcluster.kubelet.images.ImageEnv`)."""
    from localcluster.kubelet.local import start_node as start_local_node

    node = await start_local_node(kubeconfig, data_dir, images=images)
    stack.stops.append(node.stop)
    stack.hurry.append(node.kubelet.force_stop)
    stack.notes.append(f"kubelet     node {node.node_name}, logs on 127.0.0.1:{node.log_port}")
    for mapping in images:
        stack.notes.append(f"image       {mapping.pattern} runs with {mapping.env_dir}")
    network = node.kubelet.network
    if network.enabled:
        stack.notes.append(
            f"pod network {network.cidr} on bridge {network.names.bridge}: a network namespace "
            "per pod, Service names in each pod's /etc/hosts"
        )
    else:
        stack.notes.append(f"pod network none: {network.decision.banner()}")


def usable_webhook_certs(ca_file: Path, cert_file: Path, key_file: Path, now: Any) -> bool:
    """Whether the webhook's certificates from an earlier run can serve again: all three
    readable, the serving pair matching and signed by the CA, valid for 30 more days. They
    are `up`'s own, so anything else (a truncated or edited file) just means new ones."""
    from datetime import timedelta

    from cryptography import x509

    from certs import pki

    try:
        pair = pki.load_keypair(cert_file, key_file)
        cert = pair.certificate()
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_file.read_bytes()))
        matching = cert.public_key() == pair.private_key().public_key()
    except Exception:  # OSError, ValueError, cryptography's InvalidSignature, ...
        return False
    return matching and pair.not_after - now > timedelta(days=30)


async def _apply(client: Client, resource: Resource, body: dict[str, Any]) -> None:
    """Create, or replace (keeping the stored resourceVersion) when the content changed.

    The API server adds defaults to what it stores, so "changed" is decided by a hash of what
    `up` sent, kept in an annotation. Skipping unchanged objects matters on restart: replacing
    a CRD makes the API server rebuild its schema machinery (about a second for both kinds).
    """
    import hashlib
    import json

    from kube.errors import NotFound

    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    annotations = {**(body["metadata"].get("annotations") or {}), _HASH_ANNOTATION: digest}
    body = {**body, "metadata": {**body["metadata"], "annotations": annotations}}
    try:
        live = await client.get(resource, body["metadata"]["name"])
    except NotFound:
        await client.create(resource, body)
        return
    if (live["metadata"].get("annotations") or {}).get(_HASH_ANNOTATION) == digest:
        return
    meta = {**body["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}
    await client.replace(resource, {**body, "metadata": meta})


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
