"""Sources: every document of a checkout as an entry with file and line, never skipped
silently; pre-flight: training jobs admitted by the webhook's code, denials at their line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.engine import kinds
from gitops.engine.entries import ManifestEntry, entries_from_bytes, entries_from_text
from gitops.engine.preflight import denial_message, preflight
from gitops.source.checkout import SourcesError, load_directory

JOB = """\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: demo
spec:
  replicaSpecs:
  - type: worker
    replicas: {replicas}
    template:
      spec:
        containers:
        - name: tensorflow
          image: tf
"""


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_files_are_found_sorted_recursively_skipping_git_and_other_suffixes(tmp_path: Path) -> None:
    write(tmp_path, "b/job.yml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
    write(tmp_path, "a.json", '{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}}')
    write(tmp_path, ".git/config.yaml", "x: 1\n")
    write(tmp_path, "notes.txt", "kind: [\n")
    entries = load_directory(tmp_path)
    assert [(e.file, e.line, e.error) for e in entries] == [
        ("a.json", 1, None),
        ("b/job.yml", 1, None),
    ]
    assert [e.file for e in load_directory(tmp_path, ".", recurse=False)] == ["a.json"]
    assert [e.file for e in load_directory(tmp_path, "b")] == ["b/job.yml"]


def test_symlinks_leaving_the_repository_are_ignored(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "secret.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n")
    repo = tmp_path / "repo"
    write(repo, "in.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    os.symlink(outside / "secret.yaml", repo / "link.yaml")
    os.symlink(outside, repo / "linkdir")
    os.symlink(repo / "in.yaml", repo / "alias.yaml")  # inside: followed
    os.symlink(repo, repo / "loop")  # a cycle: read once
    assert [e.file for e in load_directory(repo)] == ["alias.yaml", "in.yaml"]


def test_a_path_leaving_the_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SourcesError, match="leaves the repository"):
        load_directory(tmp_path, "../")
    with pytest.raises(SourcesError, match="does not exist"):
        load_directory(tmp_path, "nope")


def test_a_file_over_3_mib_is_refused_and_the_others_are_loaded(tmp_path: Path) -> None:
    write(tmp_path, "big.yaml", "a: " + "x" * (3 * 1024 * 1024) + "\n")
    write(tmp_path, "ok.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    big, ok = load_directory(tmp_path)
    assert big.file == "big.yaml" and big.error is not None and "3 MiB" in big.error
    assert ok.error is None


def test_an_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    (entry,) = entries_from_text("bomb.yaml", "\n".join(lines) + "\n")
    assert entry.obj is None and entry.error is not None and "alias bomb" in entry.error


def test_a_list_is_expanded_and_items_keep_their_lines() -> None:
    text = (
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n"
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b}\n"
    )
    entries = entries_from_text("list.yaml", text)
    assert [(e.line, e.obj and e.obj["metadata"]["name"]) for e in entries] == [(4, "a"), (7, "b")]


ERRORS = {
    "a YAML syntax error with its line": ("ok: 1\nbad: [\n", 3, "YAML syntax error"),
    "not an object": ("- a\n- b\n", 1, "a manifest must be an object, not a list"),
    "missing fields": ("kind: ConfigMap\nmetadata: {}\n", 1, "missing apiVersion, metadata.name"),
    "a typo'd training-job kind": (
        "apiVersion: batch.tensorstack.dev/v1beta1\nmetadata: {name: j}\nkind: TensorflowTrainingJob\n",
        3,
        'unknown kind "TensorflowTrainingJob" in batch.tensorstack.dev/v1beta1: '
        'did you mean "TensorFlowTrainingJob"?',
    ),
    "an unknown kind in an unknown group": (
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n",
        2,
        'unknown kind "Widget" in example.com/v1',
    ),
    "a duplicate key": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {}\ndata: {}\n",
        5,
        'field "data" is given more than once',
    ),
}


@pytest.mark.parametrize(("text", "line", "message"), ERRORS.values(), ids=ERRORS.keys())
def test_problem_documents_become_entries_with_line_and_error(
    text: str, line: int, message: str
) -> None:
    (entry,) = entries_from_text("f.yaml", text)
    assert entry.line == line
    assert entry.error is not None and entry.error.startswith(message)


def test_unknown_kinds_keep_their_object_and_class_for_the_sync_engine() -> None:
    (entry,) = entries_from_text(
        "w.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    )
    assert entry.obj is not None and entry.kind_class is kinds.KindClass.UNKNOWN


def test_unreadable_bytes_become_an_entry() -> None:
    (entry,) = entries_from_bytes("bin.yaml", b"\xff\xfe\x00")
    assert entry.error is not None and entry.error.startswith("not UTF-8 text")


def test_an_admitted_job_is_desired_in_its_defaulted_form() -> None:
    (checked,) = preflight(entries_from_text("job.yaml", JOB.format(replicas=1)))
    assert checked.error is None and checked.desired is not None
    container = checked.desired["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]
    assert container["ports"]  # the webhook's default port is there: never drift


def test_a_denied_job_gets_the_webhooks_words_at_the_fields_line() -> None:
    (checked,) = preflight(entries_from_text("jobs/job.yaml", JOB.format(replicas=-1)))
    assert checked.desired is None
    assert checked.where == "jobs/job.yaml:8"
    assert checked.error == (
        'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
        "spec.replicaSpecs[0].replicas: Invalid value: -1: must be greater than or equal to 0"
    )


def test_other_entries_pass_through_unchanged() -> None:
    entries = entries_from_text("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    (checked,) = preflight(entries)
    assert checked.desired == entries[0].obj and checked.error is None
    bad = ManifestEntry("x.yaml", 3, None, "broken")
    assert preflight([bad])[0].error == "broken"


def test_several_violations_render_as_an_aggregate() -> None:
    import policies

    errors = policies.admit(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "TensorFlowTrainingJob",
            "metadata": {"name": "x"},
        }
    ).errors
    assert len(errors) >= 1
    text = denial_message(errors * 2)
    assert text.split("denied the request: ")[1].startswith("[")


def test_a_very_deep_tree_is_read_with_links_judged_by_where_they_lead(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    deep = root.joinpath(*(["d"] * 600))
    deep.mkdir(parents=True)
    (deep / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\n")
    (tmp_path / "outside.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    os.symlink(tmp_path / "outside.yaml", deep / "leaves.yaml")
    entries = load_directory(root, ".")
    assert [(e.file.count("/"), e.obj["metadata"]["name"]) for e in entries if e.obj] == [
        (600, "deep")
    ]
