"""kubectl → API server → the webhook with `--pod-security`: a job whose pod templates break
its namespace's enforced Pod Security level is refused at once, naming the field, instead of
being admitted and then never getting a pod.

The webhook runs in-process on loopback (as tests/localcluster/test_kubectl_webhook.py) with a
`webhook.namespaces.NamespaceLevels` watching the test cluster's namespaces through `kube/`.
Runs on the embedded server and, in hack/reference-tests, on kube-apiserver.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs import pki
from tests.localcluster.test_kubectl_webhook import CRDS, WEBHOOKS, kubectl, registered
from tests.support.cluster import Cluster, eventually
from tests.support.manifests import documents
from webhook.namespaces import NamespaceLevels

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")

ENFORCE = "pod-security.kubernetes.io/enforce"
HARDENED = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "capabilities": {"drop": ["ALL"]},
}


class LevelsWebhook:
    """The webhook with namespace levels, on its own thread and event loop."""

    def __init__(self, cert_dir: Path, kubeconfig: Path) -> None:
        from webhook.app import Readiness, Settings
        from webhook.server import ServerConfig, start

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.levels = NamespaceLevels(str(kubeconfig))
        self._call(self.levels.prepare(Readiness()))
        config = ServerConfig(
            cert_dir=cert_dir, host="127.0.0.1", port=0, settings=Settings(level_of=self.levels)
        )
        self.running = self._call(start(config))

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def stop(self) -> None:
        self._call(self.running.close())
        self._call(self.levels.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def levels_webhook(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LevelsWebhook, bytes]]:
    for path in sorted(CRDS.glob("*.yaml")):
        kubectl(cluster, "apply", "--server-side", "-f", str(path))
        cluster.wait_established(documents(path)[0]["metadata"]["name"])
    ca = pki.new_ca("trainops-test-ca")
    cert_dir = tmp_path_factory.mktemp("webhook-certs")
    pki.write_bundle(cert_dir, ca, pki.new_serving_cert(ca, ["localhost"]))
    server = LevelsWebhook(cert_dir, cluster.kubeconfig)
    try:
        yield server, ca.cert_pem
    finally:
        server.stop()


def job(name: str, security: dict[str, Any] | None) -> str:
    container: dict[str, Any] = {"name": "tensorflow", "image": "busybox"}
    if security is not None:
        container["securityContext"] = security
    return json.dumps(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "TensorFlowTrainingJob",
            "metadata": {"name": name},
            "spec": {
                "replicaSpecs": [
                    {"type": "worker", "template": {"spec": {"containers": [container]}}}
                ]
            },
        }
    )


SC = "spec.replicaSpecs[0].template.spec.containers[0].securityContext"


def test_a_job_breaking_the_namespaces_level_is_refused_with_the_field_named(
    cluster: Cluster, namespace: str, levels_webhook: tuple[LevelsWebhook, bytes]
) -> None:
    server, ca_pem = levels_webhook
    config = registered(documents(WEBHOOKS), server.running.port, ca_pem, namespace)
    kubectl(cluster, "apply", "-f", "-", stdin=config)
    try:
        kubectl(cluster, "label", "namespace", namespace, f"{ENFORCE}=baseline")
        eventually(lambda: server.levels(namespace) == "baseline", timeout=10)

        denied = kubectl(
            cluster,
            *("-n", namespace, "create", "-f", "-"),
            stdin=job("privileged", {**HARDENED, "privileged": True}),
            check=False,
        )
        assert denied.returncode == 1
        # (kube-apiserver passes the denial's warnings on too: the error is the last line)
        assert denied.stderr.strip().splitlines()[-1] == (
            'Error from server (Forbidden): error when creating "STDIN": admission webhook '
            '"validate.trainingjobs.batch.tensorstack.dev" denied the request: '
            f"{SC}.privileged: Forbidden: privileged containers: the namespace enforces Pod "
            f'Security "baseline" ({ENFORCE}); unset it'
        ), denied.stderr
        # baseline lets a plain job through; restricted then wants the hardened one.
        kubectl(cluster, "-n", namespace, "create", "-f", "-", stdin=job("plain", None))
        kubectl(cluster, "label", "--overwrite", "namespace", namespace, f"{ENFORCE}=restricted")
        eventually(lambda: server.levels(namespace) == "restricted", timeout=10)
        refused = kubectl(
            cluster, "-n", namespace, "create", "-f", "-", stdin=job("bare", None), check=False
        )
        assert refused.returncode == 1
        for field in (
            "allowPrivilegeEscalation",
            "runAsNonRoot",
            "seccompProfile.type",
            "capabilities.drop",
        ):
            assert f"{SC}.{field}: Required value" in refused.stderr, refused.stderr
        kubectl(cluster, "-n", namespace, "create", "-f", "-", stdin=job("hardened", HARDENED))
        # The job stored under baseline can still be paused: UPDATE is not checked.
        kubectl(
            cluster,
            *("-n", namespace, "patch", "tensorflowtrainingjob", "plain", "--type=merge"),
            *("-p", '{"spec":{"runMode":{"pause":{"enabled":true}}}}'),
        )
        names = kubectl(cluster, "-n", namespace, "get", "tensorflowtrainingjobs", "-o", "name")
        assert sorted(names.stdout.split()) == [
            "tensorflowtrainingjob.batch.tensorstack.dev/hardened",
            "tensorflowtrainingjob.batch.tensorstack.dev/plain",
        ]
    finally:
        kubectl(cluster, "delete", "-f", "-", "--ignore-not-found", stdin=config)
