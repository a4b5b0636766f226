"""Webhook configurations the API server refuses at creation, with its field paths and texts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from localcluster.admission.config import validate_webhook_configuration

REPO = Path(__file__).resolve().parents[2]


def webhook(**overrides: object) -> dict:
    hook = {
        "name": "validate.jobs.example.com",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"service": {"name": "hook", "namespace": "system", "path": "/validate"}},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                   "resources": ["pods"]}],
    }  # fmt: skip
    hook.update(overrides)
    return {"metadata": {"name": "c"}, "webhooks": [hook]}


def test_the_shipped_webhook_configurations_are_valid() -> None:
    for doc in yaml.safe_load_all((REPO / "deploy" / "webhook" / "webhooks.yaml").read_text()):
        if doc:
            mutating = doc["kind"] == "MutatingWebhookConfiguration"
            assert validate_webhook_configuration(doc, mutating=mutating) == []


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        pytest.param({"name": "hook"}, "webhooks[0].name",
                     'Invalid value: "hook": should be a domain with at least three segments '
                     "separated by dots", id="short-name"),
        pytest.param({"sideEffects": None}, "webhooks[0].sideEffects",
                     "Required value: must specify one of None, NoneOnDryRun", id="side-effects"),
        pytest.param({"sideEffects": "Some"}, "webhooks[0].sideEffects",
                     'Unsupported value: "Some": supported values: "None", "NoneOnDryRun"',
                     id="side-effects-some"),
        pytest.param({"admissionReviewVersions": []}, "webhooks[0].admissionReviewVersions",
                     "Required value: must specify one of v1, v1beta1", id="review-versions"),
        pytest.param({"timeoutSeconds": 31}, "webhooks[0].timeoutSeconds",
                     "Invalid value: 31: the timeout value must be between 1 and 30 seconds",
                     id="timeout"),
        pytest.param({"clientConfig": {"url": "http://127.0.0.1:8443/v"}},
                     "webhooks[0].clientConfig.url",
                     "Invalid value: \"http://127.0.0.1:8443/v\": 'https' is the only allowed URL "
                     "scheme", id="http-url"),
        pytest.param({"clientConfig": {}}, "webhooks[0].clientConfig",
                     "Required value: exactly one of url or service is required",
                     id="no-client-config"),
        pytest.param({"clientConfig": {"service": {"name": "hook", "namespace": "s",
                                                   "path": "validate"}}},
                     "webhooks[0].clientConfig.service.path",
                     "Invalid value: \"validate\": must start with a '/'", id="relative-path"),
        pytest.param({"rules": [{"operations": ["PATCH"], "apiGroups": [""],
                                 "apiVersions": ["v1"], "resources": ["pods"]}]},
                     "webhooks[0].rules[0].operations[0]",
                     'Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", '
                     '"DELETE", "UPDATE"', id="operation"),
        pytest.param({"reinvocationPolicy": "IfNeeded"}, "webhooks[0].reinvocationPolicy",
                     "Forbidden: only mutating webhooks may be reinvoked", id="reinvoke-validating"),
        pytest.param({"matchConditions": [{"name": "c", "expression": "object.("}]},
                     "webhooks[0].matchConditions[0].expression",
                     'Invalid value: "object.(": compilation failed', id="match-condition"),
        pytest.param({"namespaceSelector": {"matchExpressions": [
                         {"key": "a", "operator": "In"}]}},
                     "webhooks[0].namespaceSelector.matchExpressions[0].values",
                     "Required value: must be specified when `operator` is 'In' or 'NotIn'",
                     id="selector-values"),
    ],
)  # fmt: skip
def test_invalid_webhooks_get_the_api_servers_causes(
    overrides: dict, field: str, message: str
) -> None:
    causes = validate_webhook_configuration(webhook(**overrides), mutating=False)
    assert any(c["field"] == field and c["message"].startswith(message) for c in causes), causes


def test_duplicate_webhook_names_in_one_configuration() -> None:
    config = webhook()
    config["webhooks"].append(dict(config["webhooks"][0]))
    causes = validate_webhook_configuration(config, mutating=True)
    assert causes == [{"reason": "FieldValueDuplicate", "field": "webhooks[1].name",
                       "message": 'Duplicate value: "validate.jobs.example.com"'}]  # fmt: skip
