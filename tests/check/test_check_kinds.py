"""`trainops check` judges every document's kind with `gitops.engine.kinds`: typos fail with a
did-you-mean, third-party kinds warn, and JSON output carries load errors and warnings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainops import cli

TYPO = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
---
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorflowTrainingJob
metadata:
  name: demo
spec: {}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["check", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_typod_training_job_kind_fails_at_its_line_with_a_did_you_mean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(TYPO)
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert out.splitlines() == [
        f'{path}:7: TensorflowTrainingJob/demo: kind: unknown kind "TensorflowTrainingJob" in '
        'batch.tensorstack.dev/v1beta1: did you mean "TensorFlowTrainingJob"?',
        "0 jobs checked: 0 admitted, 0 denied; 1 document of an unknown kind; "
        "1 other document skipped",
    ]


def test_a_third_party_kind_is_skipped_with_a_warning_and_exit_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cert.yaml"
    path.write_text("apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: c\n")
    code, out, _ = run(capsys, str(path))
    assert code == 0
    assert out.splitlines() == [
        f'{path}:2: Certificate/c: warning: unknown kind "Certificate" in cert-manager.io/v1',
        "0 jobs checked: 0 admitted, 0 denied; 1 other document skipped",
    ]


def test_a_near_miss_of_a_builtin_kind_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: Configmap\nmetadata:\n  name: c\n")
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert 'did you mean "ConfigMap"?' in out


def test_json_output_reports_load_errors_mistaken_kinds_and_warnings_as_entries(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a.yaml").write_text(TYPO)
    (tmp_path / "b.yaml").write_text("a: [unclosed\n")
    (tmp_path / "c.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"
    )
    code, out, err = run(capsys, "--output", "json", str(tmp_path))
    assert code == 2
    entries = json.loads(out)
    assert [(e["type"], Path(e["file"]).name, e["allowed"]) for e in entries] == [
        ("error", "b.yaml", False),
        ("kind", "a.yaml", False),
        ("unknown-kind", "c.yaml", True),
    ]
    error, kind, unknown = entries
    assert error["violations"][0]["reason"] == "LoadError"
    assert error["violations"][0]["message"].startswith("YAML syntax error")
    assert kind["violations"][0]["line"] == 7
    assert unknown["warnings"] == [
        {"message": 'unknown kind "Widget" in example.com/v1', "line": 2}
    ]
    assert "b.yaml:" in err
