"""The job fixtures: seed examples and one file per interesting state, each with its verdict.

Each fixture in `tests/fixtures/jobs/` documents itself in its header comment:

    # Verdict: admitted | denied | skipped     (skipped: not a T9k training job)
    # Expect: <Reason> <field>                 (denied: the exact set of violations)
    # Warn: <text the warning contains> | none (admitted: the exact warnings, in order)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

import policies

FIXTURES = Path(__file__).parent.parent / "fixtures" / "jobs"


def header(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if sep and key in ("Verdict", "Expect", "Warn"):
            out.setdefault(key, []).append(value.strip())
    return out


DOCUMENTED = sorted(p for p in FIXTURES.glob("*.yaml") if "Verdict" in header(p))


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def test_the_seed_examples_and_states_are_all_documented() -> None:
    names = {p.name for p in DOCUMENTED}
    assert {"tensorflow-seed-basic.yaml", "xgboost-seed-broken-worker.yaml"} <= names
    assert len(DOCUMENTED) >= 12


@pytest.mark.parametrize("path", DOCUMENTED, ids=[p.stem for p in DOCUMENTED])
def test_fixture_gets_its_documented_verdict(path: Path) -> None:
    meta = header(path)
    [verdict] = meta["Verdict"]
    obj = load(path)
    if verdict == "skipped":
        assert not policies.is_training_job(obj)
        return
    assert policies.is_training_job(obj)
    admission = policies.admit(obj)
    assert jsonpatch.apply_patch(obj, admission.patch) == admission.obj
    found = {f"{e.type.value} {e.field}" for e in admission.errors}
    if verdict == "denied":
        assert found == set(meta["Expect"])
        return
    assert verdict == "admitted"
    assert found == set()
    expected_warnings = [w for w in meta.get("Warn", []) if w != "none"]
    assert len(admission.warnings) == len(expected_warnings), admission.warnings
    for text, fragment in zip(admission.warnings, expected_warnings, strict=True):
        assert fragment in text


def test_the_basic_seed_is_defaulted_with_the_kubeflow_port_and_clean_up_policy() -> None:
    admission = policies.admit(load(FIXTURES / "tensorflow-seed-basic.yaml"))
    assert admission.patch == [
        {
            "op": "add",
            "path": "/spec/replicaSpecs/0/template/spec/containers/0/ports",
            "value": [{"name": "tfjob-port", "containerPort": 2222}],
        },
        {"op": "add", "path": "/spec/runPolicy", "value": {"cleanUpPolicy": "Unfinished"}},
    ]


def test_the_broken_xgboost_seed_names_the_template_and_the_unknown_field() -> None:
    admission = policies.admit(load(FIXTURES / "xgboost-seed-broken-worker.yaml"))
    texts = [str(e) for e in admission.errors]
    assert 'spec.replicaSpecs[1].template: Forbidden: unknown field "containers"' in texts
