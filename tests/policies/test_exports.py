"""The public surface of `policies`: the documented contract, re-exported from one place."""

from __future__ import annotations

import policies

CONTRACT = {
    "default",
    "default_patch",
    "validate",
    "admit",
    "is_training_job",
    "Admission",
    "GROUP",
    "VERSION",
    "KINDS",
}


def test_the_package_exports_the_documented_contract() -> None:
    assert set(policies.__all__) >= CONTRACT
    assert all(hasattr(policies, name) for name in policies.__all__)


def test_the_export_list_is_sorted() -> None:
    assert policies.__all__ == sorted(policies.__all__, key=lambda n: (not n.isupper(), n))


def test_the_group_version_and_kinds_are_the_t9k_ones() -> None:
    assert (policies.GROUP, policies.VERSION) == ("batch.tensorstack.dev", "v1beta1")
    assert policies.KINDS == ("TensorFlowTrainingJob", "XGBoostTrainingJob")
    assert policies.API_VERSION == "batch.tensorstack.dev/v1beta1"
