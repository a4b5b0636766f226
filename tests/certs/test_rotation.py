"""Certificate rotation planning, table-driven over instants: what changes when, and why."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509

from certs import pki
from certs.rotation import (
    BUNDLE_KEY,
    CA_CERT_KEY,
    CA_KEY_KEY,
    TLS_CERT_KEY,
    TLS_KEY_KEY,
    RotationPolicy,
    plan_rotation,
    service_sans,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
POLICY = RotationPolicy()
SANS = service_sans("trainops-webhook", "trainops-system")


def _fresh(now: datetime = T0) -> dict[str, bytes]:
    plan = plan_rotation(None, sans=SANS, now=now)
    assert plan is not None
    return plan.data


@pytest.fixture(scope="module")
def initial() -> dict[str, bytes]:
    return _fresh()


def _bundle(data: dict[str, bytes]) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(data[BUNDLE_KEY])


def test_an_empty_secret_gets_a_ca_a_bundle_and_a_serving_pair(initial) -> None:
    assert set(initial) == {CA_CERT_KEY, CA_KEY_KEY, BUNDLE_KEY, TLS_CERT_KEY, TLS_KEY_KEY}
    ca = x509.load_pem_x509_certificate(initial[CA_CERT_KEY])
    leaf = x509.load_pem_x509_certificate(initial[TLS_CERT_KEY])
    leaf.verify_directly_issued_by(ca)
    assert _bundle(initial) == [ca]
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "trainops-webhook.trainops-system.svc" in sans.get_values_for_type(x509.DNSName)


# Instants after T0 at which nothing may change, and at which something must.
STEADY = {
    "just after issue": T0 + DAY,
    "day before serving renewal": T0 + timedelta(days=365) - POLICY.serving_renew_before - DAY,
}


@pytest.mark.parametrize("now", STEADY.values(), ids=STEADY.keys())
def test_nothing_changes_while_everything_is_comfortably_valid(initial, now) -> None:
    assert plan_rotation(initial, sans=SANS, now=now) is None


def test_the_serving_certificate_is_renewed_well_before_expiry_by_the_same_ca(initial) -> None:
    now = T0 + timedelta(days=365) - POLICY.serving_renew_before + DAY
    plan = plan_rotation(initial, sans=SANS, now=now)
    assert plan is not None and "serving certificate expires" in plan.reasons[0]
    assert plan.data[CA_CERT_KEY] == initial[CA_CERT_KEY]
    assert plan.data[TLS_CERT_KEY] != initial[TLS_CERT_KEY]
    assert pki.not_after(plan.data[TLS_CERT_KEY]) == now + timedelta(days=365)
    assert plan_rotation(plan.data, sans=SANS, now=now) is None  # stable once written


def test_ca_rotation_keeps_the_old_ca_trusted_and_the_old_serving_pair_in_use(initial) -> None:
    # Walk forward renewing the serving pair as the manager would, until the CA is due.
    data, now = initial, T0
    ca_due = pki.not_after(initial[CA_CERT_KEY]) - POLICY.ca_renew_before
    while now < ca_due - DAY:
        now = min(now + 30 * DAY, ca_due - DAY)
        plan = plan_rotation(data, sans=SANS, now=now)
        data = plan.data if plan else data
    now = ca_due + DAY
    plan = plan_rotation(data, sans=SANS, now=now)
    assert plan is not None and plan.reasons[0].startswith("CA expires")
    old_ca = x509.load_pem_x509_certificate(data[CA_CERT_KEY])
    new_ca = x509.load_pem_x509_certificate(plan.data[CA_CERT_KEY])
    assert new_ca != old_ca
    assert _bundle(plan.data) == [new_ca, old_ca]
    # The serving pair signed by the old CA is still valid and trusted: kept.
    assert plan.data[TLS_CERT_KEY] == data[TLS_CERT_KEY]

    # Later the serving pair comes due and is signed by the new CA; the old CA stays trusted
    # until it expires, then leaves the bundle.
    renewal = pki.not_after(data[TLS_CERT_KEY]) - POLICY.serving_renew_before + DAY
    later = plan_rotation(plan.data, sans=SANS, now=max(renewal, now + DAY))
    assert later is not None
    x509.load_pem_x509_certificate(later.data[TLS_CERT_KEY]).verify_directly_issued_by(new_ca)
    assert _bundle(later.data) == [new_ca, old_ca]
    gone = plan_rotation(later.data, sans=SANS, now=old_ca.not_valid_after_utc + DAY)
    assert gone is not None and _bundle(gone.data) == [new_ca]


def _drop(key: str) -> Callable[[dict[str, bytes]], None]:
    return lambda d: d.pop(key)


def _swap_tls_key(d: dict[str, bytes]) -> None:
    d[TLS_KEY_KEY] = _fresh()[TLS_KEY_KEY]


def _foreign_serving(d: dict[str, bytes]) -> None:
    other = _fresh()
    d[TLS_CERT_KEY], d[TLS_KEY_KEY] = other[TLS_CERT_KEY], other[TLS_KEY_KEY]


DAMAGE = {
    "serving key missing": (_drop(TLS_KEY_KEY), "no serving certificate"),
    "serving key from another pair": (_swap_tls_key, "does not match"),
    "serving pair signed by an unknown CA": (_foreign_serving, "not signed by a trusted CA"),
    "serving certificate garbage": (
        lambda d: d.__setitem__(TLS_CERT_KEY, b"garbage"),
        "unreadable",
    ),
}


@pytest.mark.parametrize("damage,reason", DAMAGE.values(), ids=DAMAGE.keys())
def test_a_damaged_serving_pair_is_reissued_by_the_existing_ca(initial, damage, reason) -> None:
    data = dict(initial)
    damage(data)
    plan = plan_rotation(data, sans=SANS, now=T0 + DAY)
    assert plan is not None and reason in plan.reasons[0]
    assert plan.data[CA_CERT_KEY] == initial[CA_CERT_KEY]
    ca = x509.load_pem_x509_certificate(initial[CA_CERT_KEY])
    x509.load_pem_x509_certificate(plan.data[TLS_CERT_KEY]).verify_directly_issued_by(ca)


def test_a_new_service_name_gets_a_certificate_with_its_sans(initial) -> None:
    sans = service_sans("renamed", "trainops-system")
    plan = plan_rotation(initial, sans=sans, now=T0 + DAY)
    assert plan is not None and "lacks SANs" in plan.reasons[0]
    leaf = x509.load_pem_x509_certificate(plan.data[TLS_CERT_KEY])
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "renamed.trainops-system.svc" in names.get_values_for_type(x509.DNSName)


def test_a_lost_ca_key_means_a_new_ca_with_the_old_one_still_trusted(initial) -> None:
    data = dict(initial)
    data.pop(CA_KEY_KEY)
    plan = plan_rotation(data, sans=SANS, now=T0 + DAY)
    assert plan is not None and plan.reasons[0] == "no CA yet"
    old_ca = x509.load_pem_x509_certificate(initial[CA_CERT_KEY])
    assert _bundle(plan.data)[1:] == [old_ca]
    assert plan.data[TLS_CERT_KEY] == initial[TLS_CERT_KEY]


def test_unrelated_keys_in_the_secret_are_kept(initial) -> None:
    data = {**initial, "note": b"hello"}
    data.pop(TLS_CERT_KEY)
    plan = plan_rotation(data, sans=SANS, now=T0 + DAY)
    assert plan is not None and plan.data["note"] == b"hello"
