"""UPDATE rules on jobs stored before their defaults existed (docs/POLICIES.md, issue #19).

The stored object here lacks every default `policies.defaults` adds: upper-case types (in
`replicaSpecs` and in the resume specs), no `replicas`, no `restartPolicy`, no `runPolicy`, no
main-container port (one replica has no `ports`, the other a list without the named port).
Every change the rules allow must be admitted against it, whether the new object arrives
defaulted (our mutating webhook ran first) or as written (only the validating configuration is
installed, or a caller validates what a user wrote): both sides are compared defaulted. The
CRD's transition rules must agree on what a server can store (lower-case types: the schema's
enum).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import policies
from policies import cel
from webhook import admission

Job = dict[str, Any]
KIND_FACTS = {
    "TensorFlowTrainingJob": ("tensorflow", ("Chief", "Worker")),
    "XGBoostTrainingJob": ("xgboost", ("Master", "Worker")),
}


def stored_without_defaults(kind: str, *, lower: bool = False) -> Job:
    """A job as an older release (or a server without our mutating webhook) stored it."""
    main, types = KIND_FACTS[kind]
    if lower:
        types = (types[0].lower(), types[1].lower())

    def container(ports: list[dict[str, Any]] | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": main,
            "image": "img:1",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
        }
        if ports is not None:
            out["ports"] = ports
        return out

    return {
        "apiVersion": policies.API_VERSION,
        "kind": kind,
        "metadata": {"name": "old", "namespace": "demo"},
        "spec": {
            "replicaSpecs": [
                {"type": types[0], "template": {"spec": {"containers": [container(None)]}}},
                {
                    "type": types[1],
                    "template": {
                        "spec": {
                            "containers": [container([{"name": "metrics", "containerPort": 80}])]
                        }
                    },
                },
            ],
            "runMode": {
                "pause": {"enabled": False, "resumeSpecs": [{"type": types[1], "command": ["sh"]}]}
            },
        },
    }


def _set_pause(job: Job) -> None:
    job["spec"]["runMode"]["pause"]["enabled"] = True


def _backoff(job: Job) -> None:
    job["spec"]["runPolicy"] = {"backoffLimit": 3}


def _deadline(job: Job) -> None:
    job["spec"]["runPolicy"] = {"activeDeadlineSeconds": 600}


def _clean_up(job: Job) -> None:
    job["spec"]["runPolicy"] = {"cleanUpPolicy": "All"}


def _tensorboard(job: Job) -> None:
    job["spec"]["tensorboardSpec"] = {"image": "tb:2", "trainingLogFilesets": ["t9k://pvc/logs/a"]}


def _labels(job: Job) -> None:
    job["metadata"]["labels"] = {"team": "vision"}
    job["metadata"]["annotations"] = {"note": "moved"}


# Every field docs/POLICIES.md lists as mutable, one change each.
MUTABLE_CHANGES: dict[str, Callable[[Job], None]] = {
    "spec.runMode.pause.enabled toggled": _set_pause,
    "spec.runPolicy.backoffLimit set": _backoff,
    "spec.runPolicy.activeDeadlineSeconds set": _deadline,
    "spec.runPolicy.cleanUpPolicy set": _clean_up,
    "spec.tensorboardSpec added": _tensorboard,
    "metadata labels and annotations": _labels,
}
KINDS = list(KIND_FACTS)


def changed(old: Job, change: Callable[[Job], None]) -> Job:
    new = copy.deepcopy(old)
    change(new)
    return new


def update_errors(new: Job, old: Job) -> list[tuple[str, str]]:
    """Only the UPDATE rules' verdict (CREATE rules judge the new object alone)."""
    errors, _ = policies.validate(new, old)
    return [(e.type.value, e.field) for e in errors if e.type.value == "Forbidden"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", MUTABLE_CHANGES.values(), ids=MUTABLE_CHANGES.keys())
def test_a_mutable_change_to_a_job_stored_without_defaults_is_admitted_when_defaulted(
    kind: str, change: Callable[[Job], None]
) -> None:
    old = stored_without_defaults(kind)
    assert policies.default(old)[1], "the stored object must lack defaults"
    admission_ = policies.admit(changed(old, change), old)
    assert admission_.errors == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", MUTABLE_CHANGES.values(), ids=MUTABLE_CHANGES.keys())
def test_a_mutable_change_validated_as_written_is_not_called_a_change_of_a_frozen_field(
    kind: str, change: Callable[[Job], None]
) -> None:
    """No mutating webhook in front: the new object arrives as undefaulted as the old one."""
    old = stored_without_defaults(kind)
    assert update_errors(changed(old, change), old) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_stored_job_without_defaults_and_its_defaulted_form_are_the_same_job(kind: str) -> None:
    """Either side defaulted, the other not, in both directions: no change."""
    raw = stored_without_defaults(kind)
    defaulted = policies.default(raw)[0]
    assert update_errors(defaulted, raw) == []
    assert update_errors(raw, defaulted) == []


@pytest.mark.parametrize("kind", KINDS)
def test_a_frozen_change_is_still_denied_whichever_side_is_defaulted(kind: str) -> None:
    old = stored_without_defaults(kind)
    new = copy.deepcopy(old)
    new["spec"]["replicaSpecs"][1]["restartPolicy"] = "Always"
    new["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["image"] = "img:2"
    expected = [
        ("Forbidden", "spec.replicaSpecs[0].template"),
        ("Forbidden", "spec.replicaSpecs[1].restartPolicy"),
    ]
    assert sorted(update_errors(new, old)) == expected
    assert sorted(update_errors(policies.default(new)[0], old)) == expected
    assert sorted(update_errors(new, policies.default(old)[0])) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", MUTABLE_CHANGES.values(), ids=MUTABLE_CHANGES.keys())
def test_the_validating_webhook_admits_a_mutable_change_without_the_mutating_one(
    kind: str, change: Callable[[Job], None]
) -> None:
    """The webhook's /validate on an undefaulted object (only the validating configuration
    installed): CREATE rules may still object to upper-case types, the UPDATE rules do not."""
    old = stored_without_defaults(kind, lower=True)
    request = {
        "uid": "u1",
        "operation": "UPDATE",
        "object": changed(old, change),
        "oldObject": old,
    }
    response, verdict = admission.validate(request)  # type: ignore[arg-type]
    assert (verdict, response.get("status")) == ("allowed", None)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("change", MUTABLE_CHANGES.values(), ids=MUTABLE_CHANGES.keys())
def test_the_crd_rules_admit_a_mutable_change_to_a_job_stored_without_defaults(
    kind: str, change: Callable[[Job], None]
) -> None:
    """What a cluster whose webhook is down enforces: the CEL transition rules, on the object
    after the mutating webhook (when it is up) and without it."""
    old = stored_without_defaults(kind, lower=True)
    new = changed(old, change)
    assert cel.evaluate(kind, policies.default(new)[0], old) == []
    assert cel.evaluate(kind, new, old) == []
