"""`trainops up`'s wiring onto an API server, whichever it is: the embedded one or `--kubeconfig`.

`up` first gets a kubeconfig — by starting the embedded API server, or from `--kubeconfig` —
and then runs the same steps against it: connect (reachability and credentials checked first,
so a wrong file or server is one line, not a traceback half-way through), install the CRDs,
serve the webhook on a loopback port and register it by URL with its CA bundle, and optionally
join the process kubelet as a node. Nothing here asks which server it talks to.

The webhook configurations are removed again when `up` stops: they point at a port on this
machine with `failurePolicy: Fail`, so left behind on a shared cluster they would refuse every
training job until the next `up`. (A crashed `up` leaves them; the next start replaces them.)

Several installs may share one cluster (`deploy/`'s, other users' `up`s), so everything `up`
creates there is its own: each data directory has an instance id (`DATA_DIR/instance-id`), the
webhook configurations are named `trainops-up-<id>` and labelled
`trainops.tensorstack.dev/up-instance=<id>`, a node joined with `--kubeconfig` is
`trainops-<id>`, and the leader-election identity is `trainops-up-<id>@<host>`. On stop only
objects with that label and a uid `up` recorded are deleted. The controllers' Leases keep their
shared names (one job controller per cluster is the point of them): one held by another install
stops `up` with its holder named, unless `--no-controller` / `--no-gitops` says to run without.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
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
    "INSTANCE_LABEL",
    "Instance",
    "StartError",
    "check_leases",
    "connect",
    "describe_api_error",
    "install_crds",
    "instance",
    "is_loopback",
    "release_leases",
    "start_node",
    "start_webhook",
    "usable_webhook_certs",
    "webhook_reach_problem",
]

log = logging.getLogger("trainops.up")

_ESTABLISHED_TIMEOUT = 30.0
_HASH_ANNOTATION = "trainops.tensorstack.dev/applied-hash"
INSTANCE_LABEL = "trainops.tensorstack.dev/up-instance"
_ID_LENGTH = 8


@dataclass(frozen=True)
class Instance:
    """One data directory's identity on a cluster; every name `up` creates derives from it."""

    id: str
    host: str

    @property
    def name(self) -> str:
        """The webhook configurations' name."""
        return f"trainops-up-{self.id}"

    @property
    def node_name(self) -> str:
        return f"trainops-{self.id}"

    @property
    def identity(self) -> str:
        """The leader-election identity: stable across restarts (a restarted `up` holds its
        Lease again at once), distinct from every other data directory's."""
        return f"{self.name}@{self.host}"

    @property
    def labels(self) -> dict[str, str]:
        return {INSTANCE_LABEL: self.id}


def instance(data_dir: Path) -> Instance:
    """The data directory's instance id, made on first use (`DATA_DIR/instance-id`)."""
    import re
    import secrets
    import socket

    from certs import pki

    path = data_dir / "instance-id"
    try:
        text = path.read_text().strip()
    except OSError:
        text = ""
    if not re.fullmatch(f"[0-9a-f]{{{_ID_LENGTH}}}", text):
        text = secrets.token_hex(_ID_LENGTH // 2)
        pki.atomic_write(path, text.encode() + b"\n", 0o600)
    return Instance(text, socket.gethostname())


# The Leases `up`'s controllers elect their leader with (their settings' defaults).
DEPLOYED_LEASE_NAMESPACE = "trainops-system"
"""Where deploy/'s controller and GitOps Deployments keep the same Leases (`--lease-namespace
$(POD_NAMESPACE)`): `up` looks there too before it starts a controller."""
_LEASES = {
    "controller": ("job controller", "kube-system", "trainops-controller", "--no-controller"),
    "gitops": ("GitOps reconciler", "kube-system", "trainops-gitops", "--no-gitops"),
}


async def release_leases(client: Client, me: Instance) -> None:
    """Clear the holder of the controllers' Leases this instance still holds. The controllers
    release on a clean stop, but one stopped while its acquiring write was in flight leaves the
    Lease held, and every other install would then be refused for its duration."""
    from kube import errors, resources

    for _, namespace, name, _ in _LEASES.values():
        try:
            lease = await client.get(resources.LEASES, name, namespace, timeout=5)
        except errors.NotFound:
            continue
        spec = dict(lease.get("spec") or {})
        if spec.get("holderIdentity") != me.identity:
            continue
        spec["holderIdentity"] = None
        with contextlib.suppress(errors.Conflict, errors.NotFound):
            await client.replace(resources.LEASES, {**lease, "spec": spec}, timeout=5)


async def check_leases(client: Client, me: Instance, wanted: Sequence[str]) -> None:
    """Refuse (StartError naming the holder) to start a controller of `wanted` whose Lease
    another install holds: two job controllers would fight over the same jobs, and standing by
    silently would look like a working `up` that runs nothing."""
    from datetime import UTC, datetime

    from kube import errors, resources
    from kube.leader import current_holder

    places = [(k, ns) for k in wanted for ns in (_LEASES[k][1], DEPLOYED_LEASE_NAMESPACE)]
    for key, namespace in places:
        what, _, name, flag = _LEASES[key]
        try:
            lease = await client.get(resources.LEASES, name, namespace)
        except (errors.NotFound, errors.Forbidden):
            continue
        holder = current_holder(lease, datetime.now(UTC))
        if not holder or holder == me.identity:
            continue
        who = (
            "another `trainops up`"
            if holder.startswith("trainops-up-")
            else "another install (e.g. deploy/'s controller)"
        )
        raise StartError(
            f"the {what}'s Lease {namespace}/{name} is held by {holder}: {who} runs the "
            f"{what} on this cluster; stop it first, or add {flag} to run without the {what}"
        )


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


def webhook_reach_problem(kubeconfig: Path, webhook_url: str | None) -> str | None:
    """Why the API server in `kubeconfig` could not call the webhook `up` would register, or
    None. Decided from the file alone (no connection): a server that is not on this machine
    cannot reach 127.0.0.1, so it would refuse every training job (failurePolicy Fail)."""
    from trainops.commands.kubeconnect import server_of

    if webhook_url is not None:
        parts = urlsplit(webhook_url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if parts.scheme != "https" or not parts.hostname or port is None or parts.path.strip("/"):
            return f"--webhook-url {webhook_url}: give it as https://HOST:PORT"
        return None
    server = server_of(kubeconfig)
    if server is None or is_loopback(server):
        return None
    return (
        f"the API server {server} (from {kubeconfig}) is not on this machine, so it cannot "
        "call the webhook on 127.0.0.1; add --webhook-url https://HOST:PORT with an address "
        "of this machine it reaches (the webhook listens there), or run `up` where the API "
        "server runs, or install deploy/ in the cluster instead"
    )


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


async def start_webhook(
    stack: Any, client: Client, data_dir: Path, me: Instance, public_url: str | None = None
) -> str:
    """The admission webhook, registered by URL as `me.name`; returns the URL. It listens on a
    loopback port, or with `public_url` (`https://HOST:PORT`) on HOST:PORT, which its serving
    certificate then names."""
    from datetime import UTC, datetime

    from certs import pki
    from certs.inject import ca_bundle_b64
    from localcluster import datadir
    from webhook import configurations
    from webhook.server import ServerConfig, start

    host, port, sans = "127.0.0.1", 0, ["localhost", "127.0.0.1"]
    if public_url is not None:
        parts = urlsplit(public_url)
        name = parts.hostname or ""
        sans.append(name)
        port = parts.port or 443
        host = name if _is_ip(name) else "0.0.0.0"
    cert_dir = data_dir / "webhook"
    datadir.make_private_dir(cert_dir)  # the serving key
    ca_file, cert_file, key_file = (
        cert_dir / n for n in (pki.CA_FILE, pki.CERT_FILE, pki.KEY_FILE)
    )
    now = datetime.now(UTC)
    if not usable_webhook_certs(ca_file, cert_file, key_file, now, sans=sans):
        ca = pki.new_ca("trainops-local-webhook-ca")
        pki.write_bundle(
            cert_dir, ca, pki.new_serving_cert(ca, sans), cert_mode=datadir.PRIVATE_FILE
        )
    running = await start(ServerConfig(cert_dir=cert_dir, host=host, port=port))
    stack.stops.append(running.close)
    url = public_url.rstrip("/") if public_url else f"https://127.0.0.1:{running.port}"
    bundle = ca_bundle_b64(ca_file.read_bytes())
    bodies = configurations.by_url(url, bundle, name=me.name, labels=me.labels)
    await _register(stack, client, me, bodies)
    return url


async def _register(stack: Any, client: Client, me: Instance, bodies: list[dict[str, Any]]) -> None:
    """Apply the webhook configurations, recording their uids; on stop delete exactly those
    (this instance's label, a recorded uid): never `deploy/`'s or another `up`'s."""
    from kube import errors, resources

    kinds = {
        "MutatingWebhookConfiguration": resources.MUTATING_WEBHOOK_CONFIGURATIONS,
        "ValidatingWebhookConfiguration": resources.VALIDATING_WEBHOOK_CONFIGURATIONS,
    }
    created: dict[str, set[str]] = {kind: set() for kind in kinds}

    async def unregister() -> None:
        selector = f"{INSTANCE_LABEL}={me.id}"
        for kind, resource in kinds.items():
            listed = await client.list(resource, label_selector=selector, timeout=5)
            for item in listed.get("items") or []:
                meta = item.get("metadata") or {}
                uid = str(meta.get("uid") or "")
                if uid not in created[kind]:
                    continue
                with contextlib.suppress(errors.NotFound, errors.Conflict):
                    await client.delete(
                        resource, meta["name"], preconditions={"uid": uid}, timeout=5
                    )

    # Registered before applying: a start that fails half-way still removes what it wrote.
    stack.stops.append(unregister)
    for body in bodies:
        resource = kinds[body["kind"]]
        live = await _apply(client, resource, body, owner=me)
        created[body["kind"]].add(str(live["metadata"].get("uid") or ""))


async def start_node(
    stack: Any,
    kubeconfig: Path,
    data_dir: Path,
    *,
    node_name: str = "trainops",
    node_labels: dict[str, str] | None = None,
    client_ca: Path | None = None,
    images: tuple[Any, ...] = (),
) -> None:
    """The process kubelet joined as a node, with the scheduler binding pods to it. Its log
    endpoint accepts the client certificates of `client_ca` (default: the kubeconfig's CA);
    `images` are the `--image` mappings (`localcluster.kubelet.images.ImageEnv`)."""
    from localcluster.kubelet.local import NodeStartError
    from localcluster.kubelet.local import start_node as start_local_node

    try:
        ca_pem = client_ca.read_bytes() if client_ca is not None else None
    except OSError as e:
        raise StartError(f"--kubelet-client-ca {client_ca}: {e.strerror or e}") from None
    try:
        node = await start_local_node(
            kubeconfig,
            data_dir,
            node_name=node_name,
            node_labels=node_labels,
            client_ca=ca_pem,
            images=images,
        )
    except NodeStartError as e:
        raise StartError(str(e)) from None
    stack.stops.append(node.stop)
    stack.hurry.append(node.kubelet.force_stop)
    stack.notes.append(f"kubelet     node {node.node_name}, logs on 127.0.0.1:{node.log_port}")
    for mapping in images:
        stack.notes.append(f"image       {mapping.pattern} runs with {mapping.env_dir}")
    network = node.kubelet.network
    if network.enabled:
        stack.pod_gateway = str(next(ipaddress.ip_network(network.cidr).hosts()))
        stack.notes.append(
            f"pod network {network.cidr} on bridge {network.names.bridge}: a network namespace "
            "per pod, Service names in each pod's /etc/hosts"
        )
    else:
        stack.notes.append(f"pod network none: {network.decision.banner()}")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def usable_webhook_certs(
    ca_file: Path, cert_file: Path, key_file: Path, now: Any, *, sans: Sequence[str] = ()
) -> bool:
    """Whether the webhook's certificates from an earlier run can serve again: all three
    readable, the serving pair matching and signed by the CA, valid for 30 more days, naming
    every one of `sans`. They are `up`'s own, so anything else (a truncated or edited file)
    just means new ones."""
    from datetime import timedelta

    from cryptography import x509

    from certs import pki

    try:
        pair = pki.load_keypair(cert_file, key_file)
        cert = pair.certificate()
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_file.read_bytes()))
        matching = cert.public_key() == pair.private_key().public_key()
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        named = {str(v) for v in names.get_values_for_type(x509.DNSName)}
        named |= {str(v) for v in names.get_values_for_type(x509.IPAddress)}
    except Exception:  # OSError, ValueError, cryptography's InvalidSignature, ...
        return False
    if not set(sans) <= named:
        return False
    return matching and pair.not_after - now > timedelta(days=30)


async def _apply(
    client: Client, resource: Resource, body: dict[str, Any], *, owner: Instance | None = None
) -> dict[str, Any]:
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
        return await client.create(resource, body)
    if owner is not None and (live["metadata"].get("labels") or {}).get(INSTANCE_LABEL) != owner.id:
        raise StartError(
            f"{resource.kind} {body['metadata']['name']} exists and is not this `up`'s "
            f"(no label {INSTANCE_LABEL}={owner.id}); it is left alone: delete it, or use "
            "another --data-dir"
        )
    if (live["metadata"].get("annotations") or {}).get(_HASH_ANNOTATION) == digest:
        return live
    meta = {**body["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}
    return await client.replace(resource, {**body, "metadata": meta})


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)
