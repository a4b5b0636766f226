"""`trainops check`: the real CLI on the seed examples and crafted files, lines and exit codes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import jsonpatch
import pytest
import yaml

from trainops import cli

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "fixtures" / "seeds"


def run_check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    """Exit code, stdout lines without warnings, and stderr."""
    code = cli.main(["check", *args])
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if ": warning: " not in line]
    return code, lines, captured.err


SEED_VERDICTS = {
    "the TensorFlow reference example is admitted": (
        "tensorflow-reference.yaml",
        0,
        [],
    ),
    "the TensorFlow example with scheduler, TensorBoard, debug and pause is admitted": (
        "tensorflow-reference-with-options.yaml",
        0,
        [],
    ),
    "the user guide's resources snippet has no named main container": (
        "tensorflow-user-guide-resources.yaml",
        1,
        [
            "14: TensorFlowTrainingJob/tensorflow-example: spec.replicaSpecs[0].template.spec."
            'containers: Required value: a container named "tensorflow" runs the training',
            "15: TensorFlowTrainingJob/tensorflow-example: spec.replicaSpecs[0].template.spec."
            "containers[0].name: Required value",
        ],
    ),
    "the XGBoost reference example's worker template holds containers directly": (
        "xgboost-reference.yaml",
        1,
        [
            "30: XGBoostTrainingJob/training-iris-xgb: spec.replicaSpecs[1].template.spec: "
            "Required value: containers belong under template.spec, not directly under template",
            "31: XGBoostTrainingJob/training-iris-xgb: spec.replicaSpecs[1].template: "
            'Forbidden: unknown field "containers"',
        ],
    ),
}


@pytest.mark.parametrize(
    ("name", "code", "violations"), SEED_VERDICTS.values(), ids=SEED_VERDICTS.keys()
)
def test_seed_examples_get_their_documented_verdict(
    capsys: pytest.CaptureFixture[str], name: str, code: int, violations: list[str]
) -> None:
    path = SEEDS / name
    exit_code, lines, err = run_check(capsys, str(path))
    assert (exit_code, err) == (code, "")
    verdict = (
        "1 job checked: 1 admitted, 0 denied"
        if code == 0
        else ("1 job checked: 0 admitted, 1 denied")
    )
    assert lines == [f"{path}:{v}" for v in violations] + [verdict]


def test_a_directory_is_searched_recursively_in_sorted_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "job.yml").write_text((SEEDS / "xgboost-reference.yaml").read_text())
    (tmp_path / "a.yaml").write_text((SEEDS / "tensorflow-user-guide-resources.yaml").read_text())
    (tmp_path / "notes.txt").write_text("kind: [not yaml we read")
    code, lines, _ = run_check(capsys, str(tmp_path))
    assert code == 1
    assert [line.split(":")[0] for line in lines[:-1]] == [
        str(tmp_path / "a.yaml"),
        str(tmp_path / "a.yaml"),
        str(tmp_path / "b" / "job.yml"),
        str(tmp_path / "b" / "job.yml"),
    ]
    assert lines[-1] == "2 jobs checked: 0 admitted, 2 denied"


MULTI = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  a: "1"
---
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: demo
spec:
  replicaSpecs:
  - type: worker
    replicas: -1
    template:
      spec:
        containers:
        - name: tensorflow
          image: tf
---
"""


def test_other_kinds_are_skipped_and_lines_count_from_the_file_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "multi.yaml"
    path.write_text(MULTI)
    code, lines, _ = run_check(capsys, str(path))
    assert code == 1
    assert lines == [
        f"{path}:15: TensorFlowTrainingJob/demo: spec.replicaSpecs[0].replicas: "
        "Invalid value: -1: must be greater than or equal to 0",
        "1 job checked: 0 admitted, 1 denied; 1 other document skipped",
    ]


def test_a_syntax_error_exits_2_with_file_and_line_and_other_files_are_still_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: TensorFlowTrainingJob\nspec:\n  replicaSpecs: [\n    a: b: c\n")
    code, lines, err = run_check(capsys, str(bad), str(SEEDS / "tensorflow-reference.yaml"))
    assert code == 2
    assert err.startswith(f"{bad}:4: error: YAML syntax error: ")
    assert "Traceback" not in err
    assert lines == ["1 job checked: 1 admitted, 0 denied; 1 file with errors"]


def test_a_missing_path_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_check(capsys, str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err == f"{tmp_path / 'nope.yaml'}: error: no such file or directory\n"


def test_an_alias_bomb_is_refused_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = run_check(capsys, str(path))
    assert code == 2
    assert err.startswith(f"{path}:1: error: document expands to over 1000000 nodes")


def test_a_document_over_3_mib_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text("kind: ConfigMap\ndata:\n  a: '" + "x" * (3 * 1024 * 1024) + "'\n")
    code, _, err = run_check(capsys, str(path))
    assert code == 2
    assert "over the 3145728-byte (3 MiB) limit" in err


def test_a_duplicate_key_denies_the_job_at_the_second_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = (SEEDS / "tensorflow-reference.yaml").read_text()
    path = tmp_path / "dup.yaml"
    name = "          name: tensorflow\n"
    path.write_text(text.replace(name, name + name))
    code, lines, _ = run_check(capsys, str(path))
    assert code == 1
    assert lines == [
        f"{path}:19: TensorFlowTrainingJob/tensorflow-example: "
        "spec.replicaSpecs[0].template.spec.containers[0].name: "
        'Duplicate value: field "name" is given more than once (only the last would be kept)',
        "1 job checked: 0 admitted, 1 denied",
    ]


def test_json_output_lists_verdicts_with_lines_and_a_patch_that_defaults_the_job(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [SEEDS / "tensorflow-reference.yaml", SEEDS / "xgboost-reference.yaml"]
    code = cli.main(["check", "--output", "json", *map(str, files)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err == "2 jobs checked: 1 admitted, 1 denied\n"
    reports = json.loads(captured.out)
    assert [(r["file"], r["kind"], r["name"], r["allowed"]) for r in reports] == [
        (str(files[0]), "TensorFlowTrainingJob", "tensorflow-example", True),
        (str(files[1]), "XGBoostTrainingJob", "training-iris-xgb", False),
    ]
    assert reports[0]["violations"] == []
    defaulted = jsonpatch.apply_patch(yaml.safe_load(files[0].read_text()), reports[0]["patch"])
    container = defaulted["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"} in container["ports"]
    assert {
        "field": "spec.replicaSpecs[1].template",
        "reason": "Forbidden",
        "message": 'Forbidden: unknown field "containers"',
        "line": 31,
    } in reports[1]["violations"]


def test_standard_input_is_read_for_a_dash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO((SEEDS / "xgboost-reference.yaml").read_text()))
    code, lines, _ = run_check(capsys, "-")
    assert code == 1
    assert lines[1].startswith("<stdin>:31: XGBoostTrainingJob/training-iris-xgb: ")


def test_the_installed_command_runs_as_a_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainops", "check", str(SEEDS / "tensorflow-reference.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "1 job checked: 1 admitted, 0 denied"


HEAD = (
    "apiVersion: batch.tensorstack.dev/v1beta1\nkind: TensorFlowTrainingJob\nmetadata:\n  name: j\n"
)
CRAFTED = {
    "spec of the wrong type": (
        "spec: 5\n",
        ['5: TensorFlowTrainingJob/j: spec: Invalid value: "integer": must be of type object'],
    ),
    "an unknown top-level field is reported at its own line": (
        "spec:\n  replicaSpecs: []\nspecs: {}\n",
        [
            "6: TensorFlowTrainingJob/j: spec.replicaSpecs: Required value: "
            "at least one replica spec is required",
            '7: TensorFlowTrainingJob/j: Forbidden: unknown field "specs"',
        ],
    ),
    "items of the wrong type in a flow sequence": (
        "spec:\n  replicaSpecs: [1, {type: worker, template: {spec: {containers: 3}}}]\n",
        [
            '6: TensorFlowTrainingJob/j: spec.replicaSpecs[0]: Invalid value: "integer": '
            "must be of type object",
            "6: TensorFlowTrainingJob/j: spec.replicaSpecs[1].template.spec.containers: "
            'Invalid value: "integer": must be of type array',
        ],
    ),
    "a resource name with a domain is reported at its own line": (
        "spec:\n  replicaSpecs:\n  - type: worker\n    template:\n      spec:\n"
        "        containers:\n        - name: tensorflow\n          image: tf\n"
        "          resources:\n            requests: {cpu: 1}\n            limits:\n"
        "              cpu: 2\n              nvidia.com/gpu: 1.5\n",
        [
            "17: TensorFlowTrainingJob/j: spec.replicaSpecs[0].template.spec.containers[0]"
            '.resources.limits[nvidia.com/gpu]: Invalid value: "number": '
            'must be of type integer or string (quote it: "1.5")',
        ],
    ),
    "a plain resource name is a child of limits": (
        "spec:\n  replicaSpecs:\n  - type: worker\n    template:\n      spec:\n"
        "        containers:\n        - name: tensorflow\n          image: tf\n"
        "          resources:\n            requests: {cpu: 2}\n            limits:\n"
        "              cpu: 1\n",
        [
            "16: TensorFlowTrainingJob/j: spec.replicaSpecs[0].template.spec.containers[0]"
            ".resources.limits.cpu: Invalid value: 1: must be greater than or equal to cpu "
            "request of 2",
        ],
    ),
}


@pytest.mark.parametrize(("body", "expected"), CRAFTED.values(), ids=CRAFTED.keys())
def test_malformed_jobs_are_denied_with_lines_not_tracebacks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, body: str, expected: list[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(HEAD + body)
    code, lines, err = run_check(capsys, str(path))
    assert (code, err) == (1, "")
    assert lines == [f"{path}:{line}" for line in expected] + [
        "1 job checked: 0 admitted, 1 denied"
    ]


def test_a_warning_that_names_a_field_is_reported_at_that_fields_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = SEEDS / "tensorflow-reference-with-options.yaml"
    assert cli.main(["check", "--output", "json", str(path)]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    lines = {w["message"]: w["line"] for w in report["warnings"]}
    debug = [line for w, line in lines.items() if w.startswith("spec.runMode.debug.enabled: ")]
    pause = [line for w, line in lines.items() if w.startswith("spec.runMode.pause.enabled: ")]
    assert (debug, pause) == ([20], [26])


def test_a_job_named_by_a_number_is_reported_under_that_number(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: batch.tensorstack.dev/v1beta1\nkind: TensorFlowTrainingJob\n"
        "metadata: {name: 123}\nspec: {}\n"
    )
    code, lines, _ = run_check(capsys, str(path))
    assert code == 1
    assert lines[0].startswith(f"{path}:3: TensorFlowTrainingJob/123: metadata.name: ")


def test_a_directory_without_yaml_files_gets_a_warning_and_exit_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print('hi')\n")
    code, lines, err = run_check(capsys, str(tmp_path / "src"))
    assert code == 0
    assert err == f"{tmp_path / 'src'}: warning: no *.yaml or *.yml files found\n"
    assert lines == ["0 jobs checked: 0 admitted, 0 denied"]


def test_a_reader_that_stops_early_is_not_an_error(tmp_path: Path) -> None:
    # `trainops check -o json . | head`: more output than a pipe holds, reader gone early.
    job = (SEEDS / "tensorflow-reference.yaml").read_text()
    (tmp_path / "many.yaml").write_text("\n---\n".join([job] * 150))
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "check", "-o", "json", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"[\n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_pod_security_checks_the_templates_against_the_level_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--pod-security LEVEL` (check has no namespace to read a label from): the webhook's
    Pod Security refusals, at the field's line."""
    job = yaml.safe_load((ROOT / "examples" / "tensorflow-mnist.yaml").read_text())
    main = job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    main["securityContext"] = {"privileged": True}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job, sort_keys=False))
    line = path.read_text().splitlines().index("            privileged: true") + 1
    assert run_check(capsys, str(path))[0] == 0
    code, lines, _ = run_check(capsys, "--pod-security", "baseline", str(path))
    assert code == 1
    assert lines[0] == (
        f"{path}:{line}: TensorFlowTrainingJob/mnist: spec.replicaSpecs[0].template.spec."
        "containers[0].securityContext.privileged: Forbidden: privileged containers: the "
        'namespace enforces Pod Security "baseline" (pod-security.kubernetes.io/enforce); unset it'
    )
    assert run_check(capsys, "--pod-security", "privileged", str(path))[0] == 0
