"""CA bundle injection into webhook configurations and CRDs: pure, idempotent."""

from __future__ import annotations

import base64

import pytest

from certs import pki
from certs.inject import ca_bundle_b64, crd_with_ca_bundle, webhook_config_with_ca_bundle

BUNDLE = base64.b64encode(b"new").decode()


def _config(*bundles: str | None) -> dict:
    hooks = []
    for i, b in enumerate(bundles):
        client = {"service": {"name": "trainops-webhook", "namespace": "ns", "path": "/validate"}}
        if b is not None:
            client["caBundle"] = b
        hooks.append({"name": f"h{i}.trainops.dev", "clientConfig": client})
    return {"metadata": {"name": "trainops-webhook", "resourceVersion": "7"}, "webhooks": hooks}


CONFIGS = {
    "no bundle yet": (_config(None, None), True),
    "one stale bundle": (_config(BUNDLE, "b2xk"), True),
    "all current": (_config(BUNDLE, BUNDLE), False),
}


@pytest.mark.parametrize("config,changes", CONFIGS.values(), ids=CONFIGS.keys())
def test_every_webhook_gets_the_bundle_and_nothing_is_written_when_current(config, changes) -> None:
    updated = webhook_config_with_ca_bundle(config, BUNDLE)
    if not changes:
        assert updated is None
        return
    assert updated is not None
    assert [h["clientConfig"]["caBundle"] for h in updated["webhooks"]] == [BUNDLE, BUNDLE]
    assert updated["metadata"]["resourceVersion"] == "7"  # the write stays conditional
    assert updated["webhooks"][0]["clientConfig"]["service"]["path"] == "/validate"
    assert config != updated  # the input is not modified
    assert webhook_config_with_ca_bundle(updated, BUNDLE) is None


CRDS = {
    "no conversion": ({"spec": {}}, False),
    "strategy None": ({"spec": {"conversion": {"strategy": "None"}}}, False),
    "conversion webhook": (
        {"spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {}}}}},
        True,
    ),
}


@pytest.mark.parametrize("crd,changes", CRDS.values(), ids=CRDS.keys())
def test_only_crds_with_a_conversion_webhook_get_the_bundle(crd, changes) -> None:
    updated = crd_with_ca_bundle(crd, BUNDLE)
    assert (updated is not None) is changes
    if updated:
        assert updated["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == BUNDLE
        assert crd_with_ca_bundle(updated, BUNDLE) is None


def test_a_bundle_must_hold_certificates() -> None:
    with pytest.raises(ValueError, match="no PEM certificate"):
        ca_bundle_b64(b"hello")
    pem = pki.new_ca().cert_pem
    assert base64.b64decode(ca_bundle_b64(pem)) == pem
