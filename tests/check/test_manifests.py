"""Safe YAML loading with line tracking (`gitops.engine.manifests`, `gitops.source.files`)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitops.engine.manifests import MAX_DOCUMENT_BYTES, expand_lists, load_text
from gitops.source.files import discover, load_paths

TEXT = """\
# a comment
apiVersion: v1
kind: Thing
spec:
  items:
  - name: a
    when: 2023-12-19T02:40:25Z
  - name: b
  1: one
  yes: no
---
---
second: &shared {x: 1}
third: *shared
"""


def test_every_key_and_item_has_its_line() -> None:
    docs, errors = load_text(TEXT, "t.yaml")
    assert errors == []
    first = docs[0]
    assert (first.file, first.index, first.line) == ("t.yaml", 0, 2)
    assert first.line_of(("spec", "items", 1, "name")) == 8
    assert first.line_of(("spec", "items", 0)) == 6
    assert first.line_of(("spec",)) == 4


LINE_FALLBACKS = {
    "a missing leaf falls back to its parent": (("spec", "items", 1, "image"), 8),
    "a missing index falls back to the list": (("spec", "items", 7, "name"), 5),
    "a missing top-level field falls back to the document": (("status", "phase"), 2),
    "the empty path is the document": ((), 2),
}


@pytest.mark.parametrize(("parts", "line"), LINE_FALLBACKS.values(), ids=LINE_FALLBACKS.keys())
def test_a_missing_field_maps_to_its_nearest_ancestor(
    parts: tuple[str | int, ...], line: int
) -> None:
    (first, _), _ = load_text(TEXT)
    assert first.line_of(parts) == line


def test_values_are_converted_as_kubernetes_converts_yaml_to_json() -> None:
    (first, second), _ = load_text(TEXT)
    items = first.obj["spec"]["items"]
    assert items[0]["when"] == "2023-12-19T02:40:25Z"
    assert first.obj["spec"]["1"] == "one"
    assert first.obj["spec"]["true"] is False
    assert second.obj == {"second": {"x": 1}, "third": {"x": 1}}
    assert second.index == 2  # the position in the file: the empty document counts


def test_duplicate_keys_are_recorded_with_the_line_of_the_repeat() -> None:
    (doc,), _ = load_text("a: 1\nb:\n  c: 1\n  c: 2\n")
    assert doc.obj == {"a": 1, "b": {"c": 2}}
    assert [(d.path, d.line) for d in doc.duplicates] == [(("b", "c"), 4)]


REFUSED = {
    "a syntax error": ("a: [1,\nb: c: d\n", 2, "YAML syntax error"),
    "a recursive alias": ("a: &a [*a]\n", 1, "recursive YAML alias"),
    "an alias bomb": (
        'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        + "".join(
            f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
            for p, n in zip("abcdefgh", "bcdefghi", strict=True)
        ),
        1,
        "alias bomb",
    ),
    "an oversized document": ("a: '" + "x" * MAX_DOCUMENT_BYTES + "'\n", 1, "3 MiB"),
    "a python object tag": ("a: !!python/object:os.system {}\n", 1, "YAML syntax error"),
    "a list as a mapping key": ("a: 1\n? [x, y]\n: z\n", 2, "keys must be strings"),
    "a mapping as a mapping key": ("a:\n  ? {k: v}\n  : 2\n", 2, "keys must be strings"),
}


@pytest.mark.parametrize(("text", "line", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_bad_documents_become_errors_with_a_line(text: str, line: int, words: str) -> None:
    docs, errors = load_text(text, "bad.yaml")
    assert docs == []
    assert [(e.file, e.line) for e in errors] == [("bad.yaml", line)]
    assert words in errors[0].message


def test_documents_before_a_syntax_error_are_kept() -> None:
    docs, errors = load_text("a: 1\n---\nb: [\n")
    assert [d.obj for d in docs] == [{"a": 1}]
    assert len(errors) == 1


def test_an_oversized_document_does_not_hide_the_next_one() -> None:
    docs, errors = load_text("a: '" + "x" * MAX_DOCUMENT_BYTES + "'\n---\nb: 1\n")
    assert [d.obj for d in docs] == [{"b": 1}]
    assert [e.line for e in errors] == [1]


def test_directories_are_searched_for_yaml_files_in_sorted_order(tmp_path: Path) -> None:
    for name in ("z.yaml", "a/b.yml", "a/c.json", "m.YAML.txt", "a.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("k: v\n")
    files, errors = discover([tmp_path])
    assert errors == []
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["a/b.yml", "a.yaml", "z.yaml"]


def test_unreadable_and_non_utf8_files_are_errors_not_exceptions(tmp_path: Path) -> None:
    (tmp_path / "latin.yaml").write_bytes(b"a: \xff\n")
    docs, errors = load_paths([tmp_path / "latin.yaml", tmp_path / "missing.yaml"])
    assert docs == []
    assert [(Path(e.file).name, e.line) for e in errors] == [
        ("missing.yaml", None),
        ("latin.yaml", None),
    ]
    assert "not UTF-8" in errors[1].message


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: " + "[" * 5000 + "]" * 5000 + "\n", id="flow"),
        pytest.param(
            "a:\n" + "".join(" " * depth + "b:\n" for depth in range(1, 1500)), id="block"
        ),
    ],
)
def test_a_document_nested_too_deeply_is_one_error_naming_the_file(text: str) -> None:
    # PyYAML before 6.0.4 recurses until Python's limit (no line is known then); 6.0.4 and later
    # stop at libyaml's own depth limit and know the line. Either way: no document, one error.
    docs, errors = load_text(text, "deep.yaml")
    assert docs == []
    assert [(e.file, e.message) for e in errors] == [
        ("deep.yaml", "document is nested too deeply to load")
    ]
    assert errors[0].line is None or 1 <= errors[0].line <= text.count("\n")


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab:- \n[]{},&*!'\"#|>%@`?\t1.~")) | st.characters(),
        max_size=80,
    )
)
def test_arbitrary_text_never_raises(text: str) -> None:
    docs, errors = load_text(text, "fuzz.yaml")
    for doc in docs:
        assert doc.line_of(("a", 0, "b")) >= 1
    for error in errors:
        assert str(error).startswith("fuzz.yaml")


LIST = """\
apiVersion: v1
kind: List
items:
- kind: A
  spec:
    x: 1
- kind: B
  spec:
    y: 2
    y: 3
"""


def test_a_list_document_expands_into_its_items_with_their_own_lines() -> None:
    docs, _ = load_text(LIST, "list.yaml")
    a, b = expand_lists(docs)
    assert (a.obj["kind"], a.line, a.line_of(("spec", "x"))) == ("A", 4, 6)
    assert (b.obj["kind"], b.line, b.line_of(("spec", "y"))) == ("B", 7, 9)
    assert [(d.path, d.line) for d in b.duplicates] == [(("spec", "y"), 10)]


def test_other_documents_are_kept_as_they_are() -> None:
    docs, _ = load_text("kind: List\nitems: 3\n---\nkind: C\n")
    assert expand_lists(docs) == docs


def test_an_oversized_document_is_refused_unparsed_and_later_lines_keep_their_numbers() -> None:
    # Many short lines, and a syntax error inside: refused for its size before any parsing,
    # so the error does not stop the documents after it from loading.
    rows = MAX_DOCUMENT_BYTES // 10 + 1
    huge = "data:\n" + "".join(f"  k{i}: v\n" for i in range(rows)) + "  bad: [\n"
    text = "a: 1\n---\n" + huge + "---\n# next\nb: 2\n"
    docs, errors = load_text(text, "big.yaml")
    assert [(e.line, "3 MiB" in e.message) for e in errors] == [(3, True)]
    assert [(d.obj, d.line) for d in docs] == [({"a": 1}, 1), ({"b": 2}, rows + 7)]


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        pytest.param("a:\n\tb: 1\n", 2, 1, id="tab-indented-key"),
        pytest.param("a:\n  b: 1\n\tc: 2\n", 3, 1, id="tab-after-spaces-block"),
        pytest.param("l:\n  - 1\n  -\t- 2\n", 3, 4, id="tab-after-a-dash"),
    ],
)
def test_a_tab_used_for_indentation_is_named_as_such(text: str, line: int, column: int) -> None:
    _, errors = load_text(text, "tabs.yaml")
    assert [(e.line, e.message) for e in errors] == [
        (line, f"YAML syntax error: a tab character at column {column}; YAML indents with spaces")
    ]


def test_dot_directories_are_not_searched_unless_named(tmp_path: Path) -> None:
    for name in (".git/config.yaml", ".venv/lib/x.yaml", ".hidden.yaml", "jobs/job.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("k: v\n")
    files, _ = discover([tmp_path])
    assert [p.relative_to(tmp_path).as_posix() for p in files] == ["jobs/job.yaml"]
    files, _ = discover([tmp_path / ".venv", tmp_path / ".hidden.yaml"])
    assert [p.relative_to(tmp_path).as_posix() for p in files] == [
        ".venv/lib/x.yaml",
        ".hidden.yaml",
    ]


def test_a_named_pipe_is_read_like_a_file(tmp_path: Path) -> None:
    # `trainops check <(kustomize build .)` and `/dev/stdin` name pipes, not regular files.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("w") as f:
            f.write("kind: ConfigMap\napiVersion: v1\n")

    writer = threading.Thread(target=feed)
    writer.start()
    docs, errors = load_paths([fifo])
    if writer.is_alive():  # nothing read the pipe: release the writer before failing
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    writer.join(timeout=5)
    assert errors == []
    assert [d.obj["kind"] for d in docs] == ["ConfigMap"]


def test_a_yaml_set_becomes_a_mapping_to_nulls_as_in_json() -> None:
    docs, errors = load_text("labels: !!set {x, y}\n")
    assert errors == []
    assert docs[0].obj == {"labels": {"x": None, "y": None}}
