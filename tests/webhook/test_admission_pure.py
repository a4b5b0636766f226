"""The pure core of the webhook: how denials and warnings are rendered."""

from __future__ import annotations

import pytest

from policies.fieldpath import Path, invalid, required
from webhook import admission
from webhook.admission import MAX_WARNING_LENGTH, denial_status


def test_one_violation_is_the_whole_message() -> None:
    err = required(Path.of("spec", "replicaSpecs"), "at least one replica type")
    status = denial_status([err], {"kind": "XGBoostTrainingJob", "metadata": {"name": "iris"}})
    assert status["message"] == "spec.replicaSpecs: Required value: at least one replica type"
    assert status["details"] == {
        "group": "batch.tensorstack.dev",
        "kind": "XGBoostTrainingJob",
        "name": "iris",
        "causes": [
            {
                "reason": "FieldValueRequired",
                "message": "Required value: at least one replica type",
                "field": "spec.replicaSpecs",
            }
        ],
    }


def test_several_violations_are_joined_like_an_apimachinery_error_list() -> None:
    errors = [
        invalid(Path.of("spec").child("runPolicy", "backoffLimit"), -1, "must be >= 0"),
        required(Path.of("metadata", "name")),
    ]
    status = denial_status(errors, {"kind": "TensorFlowTrainingJob", "metadata": {}})
    assert status["message"] == (
        "[spec.runPolicy.backoffLimit: Invalid value: -1: must be >= 0, "
        "metadata.name: Required value]"
    )
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.runPolicy.backoffLimit",
        "metadata.name",
    ]
    assert "name" not in status["details"]


WARNINGS = {
    "short": (["fine"], ["fine"]),
    "duplicates": (["same", "same"], ["same"]),
    "multi-line": (["two\nlines"], ["two lines"]),
    "too long": (["x" * 500], ["x" * (MAX_WARNING_LENGTH - 3) + "..."]),
    "empty": ([""], []),
}


@pytest.mark.parametrize("given,expected", WARNINGS.values(), ids=WARNINGS.keys())
def test_warnings_are_single_lines_of_at_most_120_characters(given, expected) -> None:
    assert admission._warnings(given) == expected


def test_a_review_without_an_object_on_create_is_a_review_error() -> None:
    doc = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE"},
    }
    with pytest.raises(admission.ReviewError, match=r"request\.object"):
        admission.review("validate", doc)


def test_an_error_message_never_echoes_a_huge_client_value() -> None:
    doc = {"apiVersion": "admission.k8s.io/v1", "kind": "x" * 100_000}
    with pytest.raises(admission.ReviewError) as caught:
        admission.review("mutate", doc)
    assert len(str(caught.value)) < 300


def _privileged_job() -> dict[str, object]:
    from tests.webhook.reviews import example

    job = example("tensorflow-mnist")
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["securityContext"] = {
        "privileged": True
    }
    return job


def test_a_create_is_checked_against_the_namespaces_pod_security_level() -> None:
    from tests.webhook.reviews import review

    asked: list[str] = []

    def level_of(namespace: str) -> str | None:
        asked.append(namespace)
        return "baseline"

    doc = review(_privileged_job(), namespace="team-a")
    response = admission.review("validate", doc, level_of=level_of).review["response"]
    assert asked == ["team-a"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        "spec.replicaSpecs[0].template.spec.containers[0].securityContext.privileged: Forbidden: "
        'privileged containers: the namespace enforces Pod Security "baseline" '
        "(pod-security.kubernetes.io/enforce); unset it"
    )
    # Without the lookup (the webhook without --pod-security) the same job passes.
    assert admission.review("validate", doc).review["response"]["allowed"] is True


def test_an_unknown_namespace_is_not_checked_and_the_answer_says_so() -> None:
    from tests.webhook.reviews import review

    doc = review(_privileged_job(), namespace="team-a")
    response = admission.review("validate", doc, level_of=lambda ns: None).review["response"]
    assert response["allowed"] is True
    assert response["warnings"] == [
        "namespace team-a: Pod Security labels not known yet; not checked"
    ]


def test_an_update_is_not_checked_against_the_level() -> None:
    from tests.webhook.reviews import review

    job = _privileged_job()
    doc = review(job, operation="UPDATE", old=job)
    response = admission.review("validate", doc, level_of=lambda ns: "restricted")
    assert response.review["response"]["allowed"] is True
