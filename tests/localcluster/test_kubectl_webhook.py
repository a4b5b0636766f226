"""kubectl apply → the embedded API server → the real trainops webhook (issue #3) → kubectl's
error output: the admission round trip a user sees on a real cluster.

The webhook runs in-process on loopback with certificates from `certs.pki`; the webhook
configurations of deploy/webhook are registered with a `url` and `caBundle` and narrowed to the
test's namespace. (Skipped, with the reason, only when kubectl is not installed.)
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import shutil
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import Cluster
from tests.support.manifests import documents

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")

REPO = Path(__file__).resolve().parents[2]
CRDS = REPO / "deploy" / "crds"
WEBHOOKS = REPO / "deploy" / "webhook" / "webhooks.yaml"
DENIED = REPO / "examples" / "denied" / "limits-below-requests.yaml"
GOOD = REPO / "examples" / "tensorflow-mnist.yaml"
SERVICE_NS = "fidelity-webhooks"
SERVICE = f"hook.{SERVICE_NS}"


def kubectl(
    cluster: Cluster, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(*args, stdin=stdin, check=check)


class BackgroundWebhook:
    """The trainops webhook server on 127.0.0.1 in its own thread and event loop."""

    def __init__(self, cert_dir: Path) -> None:
        from webhook.server import ServerConfig, start

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        config = ServerConfig(cert_dir=cert_dir, host="127.0.0.1", port=0)
        self.running = asyncio.run_coroutine_threadsafe(start(config), self.loop).result(30)

    @property
    def port(self) -> int:
        return self.running.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.running.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


def registered(
    manifests: list[dict[str, Any]], port: int, ca_pem: bytes, ns: str, *, service: bool = False
) -> str:
    """deploy/webhook's configurations pointed at the loopback webhook (by `url`, or by a
    `service` reference when `service`), for namespace `ns` only."""
    suffix = uuid.uuid4().hex[:6]
    out = []
    for doc in manifests:
        doc = json.loads(json.dumps(doc))
        doc["metadata"]["name"] = f"{doc['metadata']['name']}-{suffix}"
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {
                "url": f"https://127.0.0.1:{port}{path}",
                "caBundle": base64.b64encode(ca_pem).decode(),
            }
            if service:
                name, namespace = SERVICE.split(".")
                del hook["clientConfig"]["url"]
                hook["clientConfig"]["service"] = {
                    "name": name, "namespace": namespace, "path": path, "port": 443,
                }  # fmt: skip
            hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
        out.append(doc)
    return yaml.safe_dump_all(out)


def test_kubectl_apply_of_a_denied_job_prints_the_webhooks_reason(
    cluster: Cluster,
    namespace: str,
    webhook: tuple[BackgroundWebhook, bytes],
    training_crds: None,
) -> None:
    server, ca_pem = webhook
    manifests = documents(WEBHOOKS)
    config = registered(manifests, server.port, ca_pem, namespace)
    kubectl(cluster, "apply", "-f", "-", stdin=config)
    try:
        denied = kubectl(cluster, "-n", namespace, "apply", "-f", str(DENIED), check=False)
        assert denied.returncode == 1
        assert re.fullmatch(
            r'Error from server \(Forbidden\): error when creating "[^"]*limits-below-requests'
            r'\.yaml": admission webhook "validate\.trainingjobs\.batch\.tensorstack\.dev" '
            r"denied the request: spec\.replicaSpecs\[0\]\.template\.spec\.containers\[0\]"
            r"\.resources\.limits\.cpu: .+",
            denied.stderr.strip(),
            flags=re.DOTALL,
        ), denied.stderr
        missing = kubectl(cluster, "-n", namespace, "get", "tensorflowtrainingjobs", "-o", "name")
        assert missing.stdout.strip() == ""

        created = kubectl(cluster, "-n", namespace, "apply", "-f", str(GOOD))
        assert created.stdout.strip().endswith("created")
        name = documents(GOOD)[0]["metadata"]["name"]
        job = json.loads(
            kubectl(
                cluster, "-n", namespace, "get", "tensorflowtrainingjob", name, "-o", "json"
            ).stdout
        )
        assert job["spec"]["replicaSpecs"], "the mutating webhook's patch was applied and stored"
    finally:
        kubectl(cluster, "delete", "-f", "-", "--ignore-not-found", stdin=config)


def test_an_unreachable_webhook_fails_the_request_with_the_api_servers_text(
    cluster: Cluster,
    namespace: str,
    webhook: tuple[BackgroundWebhook, bytes],
    training_crds: None,
) -> None:
    _, ca_pem = webhook
    manifests = documents(WEBHOOKS)[1:]  # validating
    config = registered(manifests, 1, ca_pem, namespace)
    kubectl(cluster, "apply", "-f", "-", stdin=config)
    try:
        failed = kubectl(cluster, "-n", namespace, "create", "-f", str(GOOD), check=False)
        assert failed.returncode == 1
        assert (
            'Error from server (InternalError): error when creating "' in failed.stderr
            and 'Internal error occurred: failed calling webhook "validate.trainingjobs.batch.'
            'tensorstack.dev": failed to call webhook: Post "https://127.0.0.1:1/validate?'
            'timeout=5s": dial tcp 127.0.0.1:1: connect: connection refused'
            in failed.stderr
        ), failed.stderr
    finally:
        kubectl(cluster, "delete", "-f", "-", "--ignore-not-found", stdin=config)


@pytest.mark.embedded_only(
    "routes the webhook Service to Endpoints at 127.0.0.1; kube-apiserver refuses loopback"
    " endpoint addresses (422) and dials the ClusterIP, which needs kube-proxy"
)
def test_service_references_reach_the_webhook_through_its_endpoints(
    cluster: Cluster,
    namespace: str,
    webhook: tuple[BackgroundWebhook, bytes],
    training_crds: None,
) -> None:
    server, ca_pem = webhook
    name, service_ns = SERVICE.split(".")
    kubectl(cluster, "create", "namespace", service_ns, check=False)
    endpoints = {
        "apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": server.port}]}],
    }  # fmt: skip
    kubectl(cluster, "-n", service_ns, "apply", "-f", "-", stdin=json.dumps(endpoints))
    manifests = documents(WEBHOOKS)[1:]  # validating
    config = registered(manifests, server.port, ca_pem, namespace, service=True)
    kubectl(cluster, "apply", "-f", "-", stdin=config)
    try:
        denied = kubectl(cluster, "-n", namespace, "create", "-f", str(DENIED), check=False)
        assert denied.returncode == 1
        assert (
            'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
            "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"
        ) in denied.stderr, denied.stderr
    finally:
        kubectl(cluster, "delete", "-f", "-", "--ignore-not-found", stdin=config)
