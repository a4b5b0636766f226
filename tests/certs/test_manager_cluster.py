"""The certificate manager against a real API server (the embedded one, or the cluster named by
TRAINOPS_TEST_KUBECONFIG): Secret, conditional writes and caBundle injection over the wire, and
the full path the API server takes — Service, Endpoints, TLS verified against the injected
bundle for `<service>.<namespace>.svc` — across a certificate renewal without a restart."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.manager import CertManager, ManagerConfig
from certs.rotation import RotationPolicy
from kube import resources
from kube.client import Client
from kube.resources import Resource
from tests.support.cluster import Cluster
from webhook.server import ServerConfig, start

REPO = Path(__file__).resolve().parents[2]
WEBHOOKS = REPO / "deploy" / "webhook" / "webhooks.yaml"
CRDS = REPO / "deploy" / "crds"
KUBECTL = shutil.which("kubectl")
SERVICE = "trainops-webhook"
SECRET = "trainops-webhook-certs"
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints", True)


async def _kubectl(cluster: Cluster, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        KUBECTL or "kubectl",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cluster.kubectl_env(),
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
    return proc.returncode or 0, out.decode(), err.decode()


def _configs(name: str, webhook_ns: str, job_ns: str) -> list[dict[str, Any]]:
    """deploy/webhook's configurations, renamed, calling the Service in `webhook_ns`, and only
    for objects in `job_ns` (the API server is shared with other tests)."""
    docs = [d for d in yaml.safe_load_all(WEBHOOKS.read_text()) if d]
    for doc in docs:
        doc["metadata"]["name"] = name
        for hook in doc["webhooks"]:
            hook["clientConfig"]["service"]["namespace"] = webhook_ns
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": job_ns}}
    return docs


@pytest.fixture
async def kube(cluster: Cluster) -> AsyncIterator[Client]:
    client = await Client.connect(cluster.kubeconfig, timeout=10.0)
    yield client
    await client.close()


@pytest.fixture
async def webhook_ns(kube: Client) -> AsyncIterator[str]:
    name = f"trainops-wh-{uuid.uuid4().hex[:6]}"
    await kube.create(
        resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    await kube.delete(resources.NAMESPACES, name)


HOOK_KINDS = (
    resources.MUTATING_WEBHOOK_CONFIGURATIONS,
    resources.VALIDATING_WEBHOOK_CONFIGURATIONS,
)


@pytest.fixture
async def registered(kube: Client, webhook_ns: str, namespace: str) -> AsyncIterator[str]:
    name = f"trainops-webhook-{uuid.uuid4().hex[:6]}"
    for resource, doc in zip(HOOK_KINDS, _configs(name, webhook_ns, namespace), strict=True):
        assert doc["kind"] == resource.kind
        await kube.create(resource, doc)
    yield name
    for resource in HOOK_KINDS:
        await kube.delete(resource, name)


def _manager(kube: Client, ns: str, config_name: str, cert_dir: Path, **policy: Any) -> CertManager:
    config = ManagerConfig(
        namespace=ns,
        service=SERVICE,
        secret_name=SECRET,
        cert_dir=cert_dir,
        webhook_configs=(config_name,),
        policy=RotationPolicy(**policy),
    )
    return CertManager(config, client=kube)


async def _bundles(kube: Client, name: str) -> set[str]:
    out = set()
    for resource in HOOK_KINDS:
        obj = await kube.get(resource, name)
        out |= {h["clientConfig"].get("caBundle", "") for h in obj["webhooks"]}
    return out


async def test_replicas_racing_on_a_real_api_server_converge_on_one_secret_and_bundle(
    cluster: Cluster, kube: Client, webhook_ns: str, registered: str, tmp_path: Path
) -> None:
    clients = [await Client.connect(cluster.kubeconfig, timeout=10.0) for _ in range(3)]
    try:
        managers = [
            _manager(c, webhook_ns, registered, tmp_path / f"replica-{i}")
            for i, c in enumerate(clients)
        ]
        results = await asyncio.gather(*(m.reconcile() for m in managers))
    finally:
        for c in clients:
            await c.close()
    secret = await kube.get(resources.SECRETS, SECRET, webhook_ns)
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert sorted(data) == ["ca-bundle.crt", "ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert {r.serial for r in results} == {results[0].serial}
    assert {(tmp_path / f"replica-{i}" / "tls.crt").read_bytes() for i in range(3)} == {
        data["tls.crt"]
    }
    assert await _bundles(kube, registered) == {base64.b64encode(data["ca-bundle.crt"]).decode()}
    again = await _manager(kube, webhook_ns, registered, tmp_path / "replica-0").reconcile()
    assert (again.rotated, again.injected, again.files_written) == ((), (), False)


@pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")
@pytest.mark.embedded_only(
    "routes the webhook Service to Endpoints at 127.0.0.1; kube-apiserver refuses loopback"
    " endpoint addresses (422) and dials the ClusterIP, which needs kube-proxy"
)
async def test_the_api_server_reaches_the_webhook_through_its_service_across_a_renewal(
    cluster: Cluster,
    kube: Client,
    webhook_ns: str,
    namespace: str,
    registered: str,
    tmp_path: Path,
) -> None:
    crd_files = sorted(CRDS.glob("*.yaml"))
    if not crd_files:
        pytest.skip("deploy/crds has no CRDs yet")
    for path in crd_files:
        code, _, err = await _kubectl(cluster, "apply", "--server-side", "-f", str(path))
        assert code == 0, err
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        await asyncio.to_thread(cluster.wait_established, name)

    # Renew on every pass, so the second pass below rotates the serving pair.
    manager = _manager(
        kube,
        webhook_ns,
        registered,
        tmp_path,
        serving_days=1,
        serving_renew_before=timedelta(days=2),
    )
    first = await manager.reconcile()
    server = await start(
        ServerConfig(cert_dir=tmp_path, host="127.0.0.1", port=0, reload_interval=0.05)
    )
    try:
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": webhook_ns},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": "https"}]},
        }
        endpoints = {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": {"name": SERVICE, "namespace": webhook_ns},
            "subsets": [
                {
                    "addresses": [{"ip": "127.0.0.1"}],
                    "ports": [{"name": "https", "port": server.port}],
                }
            ],
        }
        await kube.create(resources.SERVICES, service)
        await kube.create(ENDPOINTS, endpoints)

        denied = REPO / "examples" / "denied" / "limits-below-requests.yaml"
        code, _, err = await _kubectl(cluster, "-n", namespace, "create", "-f", str(denied))
        assert code == 1
        assert re.match(
            r'Error from server \(Forbidden\): error when creating "[^"]*limits-below-requests\.yaml": '
            r'admission webhook "validate\.trainingjobs\.batch\.tensorstack\.dev" denied the request: ',
            err,
        ), err

        second = await manager.reconcile()
        assert second.serial != first.serial and second.rotated
        async with asyncio.timeout(10):
            while server.tls.serial != second.serial:
                await asyncio.sleep(0.05)

        good = REPO / "examples" / "tensorflow-mnist.yaml"
        code, out, err = await _kubectl(cluster, "-n", namespace, "create", "-f", str(good))
        assert code == 0, err
        code, out, err = await _kubectl(
            cluster, "-n", namespace, "get", "tensorflowtrainingjob", "mnist", "-o", "json"
        )
        assert code == 0, err
        stored = json.loads(out)
        assert all("replicas" in r for r in stored["spec"]["replicaSpecs"]), (
            "defaults were patched in"
        )
    finally:
        await server.close()


async def test_certs_inject_sets_the_bundle_once_and_then_reports_it_current(
    cluster: Cluster, kube: Client, registered: str, tmp_path: Path
) -> None:
    from certs import pki

    ca_file = tmp_path / "ca.crt"
    ca_file.write_bytes(pki.new_ca().cert_pem)
    args = [
        "-m",
        "trainops",
        "certs",
        "inject",
        "--ca-file",
        str(ca_file),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--webhook-config-name",
        registered,
        "--crd",
        "absent.example.com",
    ]

    async def run() -> tuple[int, str]:
        import sys

        proc = await asyncio.create_subprocess_exec(
            sys.executable, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, out.decode()

    code, out = await run()
    assert code == 0, out
    assert f"MutatingWebhookConfiguration {registered}: caBundle set" in out
    assert f"ValidatingWebhookConfiguration {registered}: caBundle set" in out
    assert "CustomResourceDefinition absent.example.com: not found, skipped" in out
    assert await _bundles(kube, registered) == {base64.b64encode(ca_file.read_bytes()).decode()}
    code, out = await run()
    assert code == 0 and out.count("already up to date") == 2, out


async def test_the_webhook_command_with_manage_certs_becomes_ready_with_its_own_certificates(
    cluster: Cluster, kube: Client, webhook_ns: str, registered: str, tmp_path: Path
) -> None:
    import ssl
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainops",
        "webhook",
        "--cert-dir",
        str(tmp_path),
        "--host",
        "127.0.0.1",
        "--shutdown-delay",
        "0",
        "--port",
        "0",
        "--manage-certs",
        "--service",
        SERVICE,
        "--namespace",
        webhook_ns,
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--webhook-config-name",
        registered,
        "--crd",
        "absent.example.com",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        async with asyncio.timeout(30):
            seen = []
            while not (
                m := re.search(r"listening on https://127\.0\.0\.1:(\d+)", seen[-1] if seen else "")
            ):
                line = (await proc.stderr.readline()).decode()
                assert line, "webhook exited before listening:\n" + "".join(seen)
                seen.append(line)
            port = int(m.group(1))
            ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
            host = f"{SERVICE}.{webhook_ns}.svc"
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=ctx, server_hostname=host
            )
            writer.write(
                f"GET /readyz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
            )
            answer = await reader.read()
            writer.close()
        assert answer.startswith(b"HTTP/1.1 200 ")
        secret = await kube.get(resources.SECRETS, SECRET, webhook_ns)
        assert secret is not None
        bundle = base64.b64decode(secret["data"]["ca-bundle.crt"])
        assert (tmp_path / "ca.crt").read_bytes() == bundle
        assert await _bundles(kube, registered) == {base64.b64encode(bundle).decode()}
    finally:
        proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
