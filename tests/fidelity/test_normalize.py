"""Normalization replaces what legitimately differs between servers and runs, nothing else."""

from __future__ import annotations

import pytest

from tests.fidelity.compare import Verdict, compare, share_identical
from tests.fidelity.model import Outcome, Workflow, kc
from tests.fidelity.normalize import normalize, sort_causes

NS = "fid-x-abc123"

CASES = {
    "PEM certificates in YAML and JSON": (
        "ca.crt: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n"
        '{"ca.crt":"-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n"}',
        'ca.crt: |\n    <certificate>\n{"ca.crt":"<certificate>\\n"}',
    ),
    "namespace and uid": (
        f"namespace: {NS}\nuid: 0f8fad5b-d9cb-469f-a165-70867728950e",
        "namespace: <ns>\nuid: <uid>",
    ),
    "timestamps, managedFields times included": (
        'creationTimestamp: "2026-11-24T02:59:28Z"\n  time: "2026-11-24T02:59:28.123456Z"',
        'creationTimestamp: "<time>"\n  time: "<time>"',
    ),
    "resourceVersion in YAML and JSON": (
        'resourceVersion: "1234"\n{"resourceVersion":"77"}',
        'resourceVersion: "<rv>"\n{"resourceVersion":"<rv>"}',
    ),
    "generateName suffix": (
        '{"generateName":"gen-","name":"gen-x7k2p"}',
        '{"generateName":"gen-","name":"gen-<sfx>"}',
    ),
    "server address and port": (
        'Get "https://127.0.0.1:16443/api": refused; 127.0.0.1:45123',
        'Get "<server>/api": refused; <addr>',
    ),
    "age column, and widths the age moves": (
        "NAME       DATA   AGE   LABELS\nsettings   2      12s   app=web",
        "NAME   DATA   AGE   LABELS\nsettings   2   <age>   app=web",
    ),
    "age under its header when the cells before it are empty": (
        "NAME    PHASE   READY   AGE\nmnist                   1s",
        "NAME   PHASE   READY   AGE\nmnist   <age>",
    ),
    "quantities outside tables stay": ("cpu: 500m\nmemory: 1Gi", "cpu: 500m\nmemory: 1Gi"),
    "error text stays": (
        'Error from server (NotFound): configmaps "x" not found',
        'Error from server (NotFound): configmaps "x" not found',
    ),
}


@pytest.mark.parametrize(("raw", "expected"), CASES.values(), ids=CASES.keys())
def test_normalize_replaces_only_run_specific_values(raw: str, expected: str) -> None:
    assert normalize(raw, NS) == expected


def test_a_declared_difference_passes_and_a_vanished_one_fails() -> None:
    flow = Workflow("w", "", (kc("get cm"), kc("get cm", accept="why"), kc("get x", accept="y")))
    same, other = Outcome(0, "a", ""), Outcome(1, "", "b")
    verdicts = compare(flow, [same, same, same], [same, other, same])
    assert [v.verdict for v in verdicts] == [Verdict.IDENTICAL, Verdict.ACCEPTED, Verdict.STALE]
    assert [v.failed for v in verdicts] == [False, False, True]
    assert share_identical({"w": verdicts}) == (2, 3)


def test_sort_causes_orders_each_run_of_cause_lines_and_keeps_the_nil_cause_last() -> None:
    text = (
        'The X "a" is invalid: \n* spec.b: bad\n* spec.a: bad\n* <nil>: not checked\n'
        "after\n* z\n* y"
    )
    assert sort_causes(text) == (
        'The X "a" is invalid: \n* spec.a: bad\n* spec.b: bad\n* <nil>: not checked\n'
        "after\n* y\n* z"
    )
