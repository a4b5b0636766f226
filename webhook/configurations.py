"""The Mutating and ValidatingWebhookConfigurations that send training jobs to this webhook.

The names here are shared by everything that registers or patches them: `trainops up`
registers `by_url` (the webhook on a loopback port, called by URL) under its own per-instance
name (`trainops-up-<id>`, so it never replaces or deletes `deploy/`'s), `trainops certs inject` and
`trainops webhook --manage-certs` patch the `caBundle` of the configurations named
`CONFIGURATION_NAME` and of the `TRAINING_JOB_CRDS`. `deploy/webhook/webhooks.yaml` is the
in-cluster form (called through the Service).
"""

from __future__ import annotations

from typing import Any

import policies

__all__ = ["CONFIGURATION_NAME", "TRAINING_JOB_CRDS", "by_url"]

CONFIGURATION_NAME = "trainops-webhook"
TRAINING_JOB_CRDS = tuple(f"{kind.lower()}s.{policies.GROUP}" for kind in policies.KINDS)


def by_url(
    url: str,
    ca_bundle_b64: str,
    *,
    name: str = CONFIGURATION_NAME,
    labels: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Mutating and validating configurations for both job kinds, called by URL, named `name`
    (`trainops up` passes its instance's own name, never `deploy/`'s) with `labels`."""
    rules = [
        {
            "apiGroups": [policies.GROUP],
            "apiVersions": [policies.VERSION],
            "operations": ["CREATE", "UPDATE"],
            "resources": [k.lower() + "s" for k in policies.KINDS],
            "scope": "Namespaced",
        }
    ]

    def hook(name: str, path: str) -> dict[str, Any]:
        return {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": f"{url}{path}", "caBundle": ca_bundle_b64},
            "rules": rules,
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": 5,
        }

    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    mutating = hook(policies.MUTATING_WEBHOOK, "/mutate")
    mutating["reinvocationPolicy"] = "IfNeeded"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": metadata,
            "webhooks": [mutating],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": dict(metadata),
            "webhooks": [hook(policies.VALIDATING_WEBHOOK, "/validate")],
        },
    ]
