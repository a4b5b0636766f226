"""Every job file we ship or test with gets exactly the recorded defaulting and verdict.

`tests/fixtures/policies/golden.json` holds, per job file (`tests/fixtures/jobs/`,
`tests/fixtures/seeds/`, `examples/`), the patch `default` returns, and the full text of every
error (as `trainops check` and the webhook print it, in order), every cause and every warning
that `validate` gives: on the defaulted job with and without the structural layer, on the job
as written, and on UPDATE against itself as written. It pins what no rule change should move
silently — the wording, the order, the paths — while the rules are rewritten for speed (the
file was recorded before the fast paths of issue #19 existed).

After a deliberate change of a message or a rule, rewrite it and review the diff:

    TRAINOPS_WRITE_GOLDEN=1 python -m pytest tests/policies/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import policies

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "policies" / "golden.json"
SOURCES = ("tests/fixtures/jobs", "tests/fixtures/seeds", "examples")


def job_files() -> list[Path]:
    return sorted(p for d in SOURCES for p in (ROOT / d).rglob("*.yaml"))


def verdict(errors: list[policies.FieldError], warnings: list[str]) -> dict[str, Any]:
    return {
        "errors": [str(e) for e in errors],
        "causes": [e.as_cause() for e in errors],
        "warnings": warnings,
    }


def record(obj: Any) -> dict[str, Any]:
    """What the policies say about one job, as plain JSON."""
    defaulted, patch = policies.default(obj)
    return {
        "patch": patch,
        "default_patch_agrees": policies.default_patch(obj) == patch,
        "validate": verdict(*policies.validate(defaulted)),
        "validate_schema_checked": verdict(*policies.validate(defaulted, schema_checked=True)),
        "validate_as_written": verdict(*policies.validate(obj)),
        "update_against_itself": verdict(*policies.validate(defaulted, obj, schema_checked=True)),
    }


def record_all() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in job_files():
        for n, doc in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if isinstance(doc, dict) and policies.is_training_job(doc):
                out[f"{path.relative_to(ROOT)}#{n}"] = record(doc)
    return out


def test_every_job_file_gets_its_recorded_patch_errors_and_warnings() -> None:
    found = json.loads(json.dumps(record_all()))  # tuples and the like as JSON has them
    if os.environ.get("TRAINOPS_WRITE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.skip(f"rewrote {GOLDEN.relative_to(ROOT)}")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert sorted(found) == sorted(expected)  # the same files: a new one needs recording
    for name in expected:
        assert found[name] == expected[name], name


def test_the_golden_file_covers_denials_warnings_and_patches() -> None:
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert len(expected) >= 15
    assert any(r["validate"]["errors"] for r in expected.values())
    assert any(r["validate"]["warnings"] for r in expected.values())
    assert any(r["patch"] for r in expected.values())
    assert any(not r["validate"]["errors"] for r in expected.values())
