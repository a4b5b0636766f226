"""The webhook configurations `trainops up` registers: named and labelled as asked (each `up`
instance its own), never `deploy/`'s name unless asked for."""

from __future__ import annotations

from webhook import configurations


def test_by_url_uses_the_given_name_and_labels_for_both_kinds() -> None:
    labels = {"trainops.tensorstack.dev/up-instance": "0a1b2c3d"}
    bodies = configurations.by_url(
        "https://127.0.0.1:1234", "Q0E=", name="trainops-up-0a1b2c3d", labels=labels
    )
    assert [(b["kind"], b["metadata"]) for b in bodies] == [
        ("MutatingWebhookConfiguration", {"name": "trainops-up-0a1b2c3d", "labels": labels}),
        ("ValidatingWebhookConfiguration", {"name": "trainops-up-0a1b2c3d", "labels": labels}),
    ]
    urls = [b["webhooks"][0]["clientConfig"]["url"] for b in bodies]
    assert urls == ["https://127.0.0.1:1234/mutate", "https://127.0.0.1:1234/validate"]


def test_by_url_defaults_to_the_shared_name_without_labels() -> None:
    bodies = configurations.by_url("https://127.0.0.1:1234", "Q0E=")
    assert {b["metadata"]["name"] for b in bodies} == {configurations.CONFIGURATION_NAME}
    assert all("labels" not in b["metadata"] for b in bodies)
