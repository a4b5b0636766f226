"""The webhook answers AdmissionReviews over real TLS the way the API server needs.

Every test posts a review shaped as the API server sends it and checks the content of the
answer: the patch applies and the patched object validates, denials name every field.
"""

from __future__ import annotations

import base64
import copy
import json

import jsonpatch
import pytest

import policies
from tests.webhook.conftest import Webhook
from tests.webhook.reviews import example, review

VALID = ["tensorflow-mnist", "xgboost-iris"]


def _patch_ops(response: dict) -> list[dict]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


@pytest.mark.parametrize("name", VALID)
async def test_mutate_returns_a_patch_that_applies_and_yields_a_valid_job(
    webhook: Webhook, name: str
) -> None:
    job = example(name)
    sent = review(job)
    status, body = await webhook.post("/mutate", sent)
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    response = body["response"]
    assert response["uid"] == sent["request"]["uid"]
    assert response["allowed"] is True
    patched = sent["request"]["object"]
    if "patch" in response:
        patched = jsonpatch.apply_patch(patched, _patch_ops(response))
    expected, _ = policies.default(sent["request"]["object"])
    assert patched == expected
    assert policies.admit(patched).errors == []

    status, again = await webhook.post("/mutate", review(patched))
    assert status == 200
    assert again["response"]["allowed"] is True
    assert "patch" not in again["response"] and "patchType" not in again["response"]


@pytest.mark.parametrize("name", VALID)
async def test_validate_allows_a_valid_job(webhook: Webhook, name: str) -> None:
    defaulted, _ = policies.default(example(name))
    status, body = await webhook.post("/validate", review(defaulted))
    assert status == 200
    assert body["response"]["allowed"] is True
    assert "status" not in body["response"]
    assert all(len(w) <= 120 for w in body["response"].get("warnings", []))


@pytest.mark.parametrize("name", ["denied/limits-below-requests", "denied/no-main-container"])
async def test_validate_denies_a_bad_job_naming_every_field(webhook: Webhook, name: str) -> None:
    # The validating webhook sees the object after mutation (defaults applied).
    job, _ = policies.default(example(name))
    expected, _ = policies.validate(job)
    assert expected, "the example must break a rule"
    status, body = await webhook.post("/validate", review(job))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is False
    st = response["status"]
    assert (st["code"], st["reason"], st["status"]) == (403, "Forbidden", "Failure")
    for err in expected:
        assert f"{err.field}: {err.message}" in st["message"]
    assert st["details"]["causes"] == [e.as_cause() for e in expected]
    assert st["details"]["kind"] == job["kind"]
    assert st["details"]["name"] == job["metadata"]["name"]
    if len(expected) == 1:
        assert st["message"] == str(expected[0])


async def test_a_dry_run_is_answered_exactly_like_a_real_request(webhook: Webhook) -> None:
    job = example("denied/no-main-container")
    real, dry = review(job), review(job, dry_run=True)
    dry["request"]["uid"] = real["request"]["uid"]
    for path in ("/mutate", "/validate"):
        assert await webhook.post(path, real) == await webhook.post(path, dry)


UPDATES = {
    "changing a replica count is denied": (
        lambda spec: spec["replicaSpecs"][1].__setitem__("replicas", 3),
        ["spec.replicaSpecs[1].replicas"],
    ),
    "changing the run policy is allowed": (
        lambda spec: spec["runPolicy"].__setitem__("backoffLimit", 5),
        [],
    ),
}


@pytest.mark.parametrize("change,denied_fields", UPDATES.values(), ids=UPDATES.keys())
async def test_update_rules_see_the_old_object(webhook: Webhook, change, denied_fields) -> None:
    old, _ = policies.default(example("tensorflow-mnist"))
    new = copy.deepcopy(old)
    change(new["spec"])
    status, body = await webhook.post("/validate", review(new, operation="UPDATE", old=old))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is (not denied_fields)
    if denied_fields:
        fields = [c["field"] for c in response["status"]["details"]["causes"]]
        assert fields == denied_fields


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
@pytest.mark.parametrize("path", ["/mutate", "/validate"])
async def test_delete_and_connect_are_allowed_untouched(
    webhook: Webhook, operation: str, path: str
) -> None:
    job = example("denied/no-main-container")
    sent = review(None, operation=operation, old=job)
    status, body = await webhook.post(path, sent)
    assert status == 200
    assert body["response"] == {"uid": sent["request"]["uid"], "allowed": True}


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
async def test_a_kind_we_do_not_handle_is_allowed_with_a_warning(
    webhook: Webhook, path: str
) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}
    status, body = await webhook.post(path, review(cm))
    assert status == 200
    response = body["response"]
    assert response["allowed"] is True and "patch" not in response
    assert len(response["warnings"]) == 1
    assert "ConfigMap" in response["warnings"][0] and len(response["warnings"][0]) <= 120


async def test_a_v1beta1_review_is_answered_in_v1beta1(webhook: Webhook) -> None:
    sent = review(example("denied/no-main-container"), api_version="admission.k8s.io/v1beta1")
    status, body = await webhook.post("/validate", sent)
    assert status == 200
    assert body["apiVersion"] == "admission.k8s.io/v1beta1"
    assert body["response"]["uid"] == sent["request"]["uid"]
    assert body["response"]["allowed"] is False


async def test_metrics_count_requests_by_kind_operation_and_verdict(webhook: Webhook) -> None:
    await webhook.post("/validate", review(example("denied/no-main-container")))
    await webhook.post("/validate", b"{not json")
    async with webhook.session.get(webhook.url + "/metrics") as resp:
        assert resp.status == 200
        text = await resp.text()
    assert (
        'trainops_webhook_requests_total{endpoint="validate",kind="TensorFlowTrainingJob",'
        'operation="CREATE",verdict="denied"} 1.0'
    ) in text
    assert 'verdict="bad_request"} 1.0' in text
    assert 'trainops_webhook_request_duration_seconds_count{endpoint="validate"} 2.0' in text
    expiry = next(
        line
        for line in text.splitlines()
        if line.startswith("trainops_webhook_certificate_expiry_seconds ")
    )
    assert 300 * 86400 < float(expiry.split()[1]) <= 365 * 86400


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_health_endpoints_answer_ok(webhook: Webhook, path: str) -> None:
    async with webhook.session.get(webhook.url + path) as resp:
        assert (resp.status, await resp.text()) == (200, "ok\n")
