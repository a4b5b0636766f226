"""Fixtures for the localcluster tests (the `cluster` and `namespace` ones are shared)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from certs import pki
from tests.localcluster._http import Http
from tests.localcluster.test_kubectl_webhook import CRDS, SERVICE, BackgroundWebhook, kubectl
from tests.support.cluster import Cluster
from tests.support.manifests import documents


@pytest.fixture
def http(cluster: Cluster) -> Http:
    return Http(cluster)


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BackgroundWebhook, bytes]]:
    ca = pki.new_ca("trainops-test-ca")
    serving = pki.new_serving_cert(ca, ["trainops-webhook.trainops-system.svc", f"{SERVICE}.svc"])
    cert_dir = tmp_path_factory.mktemp("webhook-certs")
    pki.write_bundle(cert_dir, ca, serving)
    server = BackgroundWebhook(cert_dir)
    try:
        yield server, ca.cert_pem
    finally:
        server.stop()


@pytest.fixture(scope="module")
def training_crds(cluster: Cluster) -> None:
    if not list(CRDS.glob("*.yaml")):
        pytest.skip("deploy/crds has no CRDs yet")
    for path in sorted(CRDS.glob("*.yaml")):
        kubectl(cluster, "apply", "--server-side", "-f", str(path))
        name = documents(path)[0]["metadata"]["name"]
        cluster.wait_established(name)
