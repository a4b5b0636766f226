"""Bounded work per repository revision (gitops.engine.limits and where the source applies it):
each limit refuses the revision naming the limit, its flag and the file, before the work it
bounds — files and bytes before any blob is read, documents before any is parsed, objects and
depth before a document's data is built."""

from __future__ import annotations

import argparse
import tracemalloc
from pathlib import Path

import pytest
import yaml

from gitops.engine import entries, limits, manifests
from gitops.engine.limits import Exceeded, LimitExceeded, Limits
from gitops.source import checkout, incremental
from gitops.source.tree import TreeEntry
from trainops.commands import gitops_limits

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
HOSTILE = b"---\n{}\n" * 1000


def sha(i: int) -> str:
    return f"{i:040x}"


def files_of(contents: dict[str, bytes]) -> tuple[list[TreeEntry], dict[str, bytes]]:
    tree = [
        TreeEntry("100644", sha(i), len(data), path)
        for i, (path, data) in enumerate(sorted(contents.items()))
    ]
    return tree, {f.sha: contents[f.path] for f in tree}


# --- counting ---------------------------------------------------------------------------------

DOCUMENTS = {
    "empty": (b"", 0),
    "only a comment": (b"# nothing\n\n", 0),
    "one document, no marker": (b"a: 1\n", 1),
    "one document after a marker": (b"---\na: 1\n", 1),
    "content, then a marker": (b"a: 1\n---\nb: 2\n", 2),
    "the hostile file": (HOSTILE, 1000),
    "empty documents count": (b"---\n---\n---\n", 3),
    "a marker with a comment": (b"--- # first\na: 1\n", 1),
    "an indented --- is text": (b"a: |\n  ---\n  ---\n", 1),
    "---x is no marker": (b"a: 1\n---x: 2\n", 1),
    "an end marker counts as one more": (b"a: 1\n...\n---\nb: 2\n", 3),
    "CRLF line ends": (b"---\r\na: 1\r\n---\r\nb: 2\r\n", 2),
}


@pytest.mark.parametrize("data,expected", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_documents_are_counted_by_their_markers(data: bytes, expected: int) -> None:
    assert limits.count_documents(data) == expected


@pytest.mark.parametrize("data,_", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_the_count_is_never_below_what_the_parser_composes(data: bytes, _: int) -> None:
    assert len(list(yaml.compose_all(data))) <= limits.count_documents(data)


FILES = {
    "within both": ([("a", 10), ("b", 10)], Limits(files=2, bytes=20), None),
    "one file too many": ([("a", 1), ("b", 1), ("c", 1)], Limits(files=2), ("files", "c")),
    "bytes over in the second": ([("a", 15), ("b", 6)], Limits(bytes=20), ("bytes", "b")),
    "files win over bytes": ([("a", 30), ("b", 1)], Limits(files=1, bytes=20), ("files", "b")),
    "bytes in an earlier file than files": (
        [("a", 30), ("b", 1), ("c", 1)],
        Limits(files=2, bytes=20),
        ("files", "c"),
    ),
}


@pytest.mark.parametrize("listed,rules,expected", FILES.values(), ids=FILES.keys())
def test_files_and_bytes_are_judged_on_the_listing(
    listed: list[tuple[str, int]], rules: Limits, expected: tuple[str, str] | None
) -> None:
    found = limits.check_files(listed, rules)
    assert (None if found is None else (found.limit, found.file)) == expected


def test_the_documents_limit_names_the_file_where_the_total_goes_over() -> None:
    counts = [("a.yaml", 3), ("b.yaml", 3), ("c.yaml", 3)]
    assert limits.check_documents(counts, Limits(documents=9)) is None
    assert limits.check_documents(counts, Limits(documents=5)) == Exceeded("documents", "b.yaml", 5)


def test_a_refusal_names_the_limit_its_flag_and_the_file() -> None:
    text = Exceeded("documents", "jobs/a.yaml", 20_000).message
    assert text.startswith("jobs/a.yaml: more than 20000 YAML documents in the revision")
    assert "--max-repo-documents 20000" in text and "the last one synced stays applied" in text
    deep = Exceeded("depth", "x.yaml", 64, line=7).message
    assert deep.startswith("x.yaml:7: a document nested deeper than 64 levels")
    assert "--max-repo-depth" in deep


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="--max-repo-objects must be at least 1"):
        Limits(objects=0)


# --- the parse: depth and objects, on the node tree ----------------------------------------------

DEPTHS = {
    "a scalar": ("a\n", 0),
    "a flat mapping": ("a: 1\n", 1),
    "a list in a mapping": ("a: [1]\n", 2),
    "five levels": ("a: [[[[1]]]]\n", 5),
    "a training job": (None, 10),
}


@pytest.mark.parametrize("text,depth", DEPTHS.values(), ids=DEPTHS.keys())
def test_a_document_deeper_than_the_limit_is_refused_before_its_data_is_built(
    text: str | None, depth: int
) -> None:
    if text is None:
        text = (Path(__file__).parents[2] / "examples" / "tensorflow-mnist.yaml").read_text()
    docs, errors = manifests.load_text(text, "f.yaml", limits=Limits(depth=max(depth, 1)))
    assert not errors and len(docs) == 1
    if depth > 1:
        with pytest.raises(LimitExceeded) as info:
            manifests.load_text(text, "f.yaml", limits=Limits(depth=depth - 1))
        assert info.value.exceeded == Exceeded("depth", "f.yaml", depth - 1, line=docs[0].line)


def test_a_list_counts_its_items_before_they_are_built() -> None:
    items = "".join(
        f"  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n" for i in range(5)
    )
    text = CM.format(name="first") + "---\napiVersion: v1\nkind: List\nitems:\n" + items
    assert len(entries.entries_from_text("l.yaml", text, limits=Limits(objects=6))) == 6
    with pytest.raises(LimitExceeded) as info:
        entries.entries_from_text("l.yaml", text, limits=Limits(objects=5))
    assert info.value.exceeded == Exceeded("objects", "l.yaml", 5, line=6)
    with pytest.raises(LimitExceeded):  # objects of the files before count
        entries.entries_from_text("l.yaml", text, limits=Limits(objects=8), objects_before=3)
    # Empty documents are no objects.
    assert entries.entries_from_text(
        "e.yaml", "---\n---\n" + CM.format(name="a"), limits=Limits(objects=1)
    )


# --- a revision read by blob (gitops.source.incremental) ----------------------------------------


def test_over_the_files_or_bytes_limit_a_revision_is_refused_from_its_listing() -> None:
    tree, _ = files_of({f"jobs/{i}.yaml": CM.format(name=f"c{i}").encode() for i in range(4)})
    incremental.check_listing(tree, Limits(files=4, bytes=sum(f.size or 0 for f in tree)))
    with pytest.raises(LimitExceeded) as info:
        incremental.check_listing(tree, Limits(files=3))
    assert info.value.exceeded == Exceeded("files", "jobs/3.yaml", 3)
    with pytest.raises(LimitExceeded) as info:
        incremental.check_listing(tree, Limits(bytes=2 * (tree[0].size or 0) + 1))
    assert info.value.exceeded == Exceeded("bytes", "jobs/2.yaml", 2 * (tree[0].size or 0) + 1)


def test_a_file_over_the_per_file_cap_is_no_bytes_read() -> None:
    big = TreeEntry("100644", sha(9), entries.MAX_FILE_BYTES + 1, "huge.yaml")
    incremental.check_listing([big], Limits(bytes=1))


def test_the_hostile_repository_is_refused_on_its_bytes_before_anything_is_parsed() -> None:
    tree, read = files_of({f"f{i}.yaml": HOSTILE for i in range(5)})
    with pytest.raises(LimitExceeded) as info:
        incremental.assemble(tree, {}, read, Limits(documents=4_500))
    assert info.value.exceeded == Exceeded("documents", "f4.yaml", 4_500)
    checked, cache = incremental.assemble(tree, {}, read, Limits(documents=5_000))
    assert len(checked) == 5_000 and cache[tree[0].sha].documents == 1000


def test_blobs_from_the_memo_count_too() -> None:
    tree, read = files_of({"a.yaml": HOSTILE, "b.yaml": CM.format(name="b").encode()})
    _, cache = incremental.assemble(tree, {}, read, Limits(documents=1001, objects=1001))
    # The next commit reads only b.yaml's new content; a.yaml's 1000 documents come from the memo.
    new = [tree[0], TreeEntry("100644", sha(7), 10, "b.yaml")]
    more = {sha(7): (CM.format(name="b") + "---\n" + CM.format(name="c")).encode()}
    with pytest.raises(LimitExceeded) as info:
        incremental.assemble(new, cache, more, Limits(documents=1001))
    assert info.value.exceeded == Exceeded("documents", "b.yaml", 1001)
    with pytest.raises(LimitExceeded) as info:
        incremental.assemble(new, cache, more, Limits(objects=1001))
    assert info.value.exceeded.limit == "objects" and info.value.exceeded.file == "b.yaml"
    checked, _ = incremental.assemble(new, cache, more, Limits(documents=1002, objects=1002))
    assert len(checked) == 1002


def test_without_limits_nothing_is_refused() -> None:
    tree, read = files_of({"a.yaml": HOSTILE})
    checked, _ = incremental.assemble(tree, {}, read)
    assert len(checked) == 1000


# --- a revision read from a checkout (symlinks on the way) ---------------------------------------

CHECKOUT = {
    "files": (Limits(files=2), Exceeded("files", "jobs/c.yaml", 2)),
    "bytes": (Limits(bytes=30), Exceeded("bytes", "jobs/a.yaml", 30)),
    "documents": (Limits(documents=1001), Exceeded("documents", "jobs/c.yaml", 1001)),
    "objects": (Limits(objects=1001), Exceeded("objects", "jobs/c.yaml", 1001, line=1)),
    "depth": (Limits(depth=1), Exceeded("depth", "jobs/b.yaml", 1, line=1)),
}


@pytest.mark.parametrize("rules,expected", CHECKOUT.values(), ids=CHECKOUT.keys())
def test_a_checkout_is_held_to_the_same_limits(
    tmp_path: Path, rules: Limits, expected: Exceeded
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a.yaml").write_bytes(HOSTILE)
    (jobs / "b.yaml").write_text(CM.format(name="b") + "data:\n  x: '1'\n")
    (jobs / "c.yaml").write_text(CM.format(name="c"))
    assert len(checkout.load_directory(tmp_path, "jobs", limits=Limits())) == 1002
    with pytest.raises(LimitExceeded) as info:
        checkout.load_directory(tmp_path, "jobs", limits=rules)
    assert info.value.exceeded == expected


# --- the flags ----------------------------------------------------------------------------------


def test_each_limit_is_a_flag_with_its_default() -> None:
    parser = argparse.ArgumentParser()
    gitops_limits.add_limit_arguments(parser)
    assert gitops_limits.limits(parser.parse_args([])) == limits.DEFAULT
    args = parser.parse_args(
        [
            "--max-repo-files=5",
            "--max-repo-documents=6",
            "--max-repo-objects=7",
            "--max-repo-bytes=2Mi",
            "--max-repo-depth=8",
        ]
    )
    assert gitops_limits.limits(args) == Limits(
        files=5, documents=6, objects=7, bytes=2 * 1024 * 1024, depth=8
    )
    assert gitops_limits.limits(argparse.Namespace()) == limits.DEFAULT  # a command without them
    for bad in (["--max-repo-files=0"], ["--max-repo-bytes=lots"], ["--max-repo-depth=-1"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


@pytest.mark.parametrize("command", ["gitops", "up"])
def test_trainops_gitops_and_up_take_the_limit_flags(command: str) -> None:
    from trainops.cli import build_parser

    args = build_parser().parse_args(
        [command, "--max-repo-documents", "5", "--max-repo-bytes", "1Mi"]
    )
    assert gitops_limits.limits(args) == Limits(documents=5, bytes=1024 * 1024)
    assert gitops_limits.limits(build_parser().parse_args([command])) == limits.DEFAULT


# --- big texts: judged on parser events before any node is built ----------------------------------

PAD = "# " + "x" * 78 + "\n"
ITEMS = "".join(
    f"  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c{i}}}}}\n" for i in range(6)
)
SCANNED = {
    "a List, kind first": (f"apiVersion: v1\nkind: List\nitems:\n{ITEMS}", Limits(objects=5)),
    "a List, kind last": (f"apiVersion: v1\nitems:\n{ITEMS}kind: List\n", Limits(objects=5)),
    "a List within the limit": (f"apiVersion: v1\nkind: List\nitems:\n{ITEMS}", Limits(objects=6)),
    "items but no List": (f"apiVersion: v1\nkind: Other\nitems:\n{ITEMS}", Limits(objects=1)),
    "a list at the root": ("- kind\n- List\n- items\n- [1, 2, 3]\n", Limits(objects=1)),
    "documents add up": (CM.format(name="a") + "---\n" + CM.format(name="b"), Limits(objects=1)),
    "empty documents are none": ("---\n---\n" + CM.format(name="a"), Limits(objects=1)),
    "too deep": ("a: {b: [[{c: 1}]]}\n", Limits(depth=4)),
    "deep enough": ("a: {b: [[{c: 1}]]}\n", Limits(depth=5)),
    "depth through an alias": ("a: &x [[1]]\nb: [[*x]]\n", Limits(depth=3)),
    "a syntax error": ("a: [\n" + ITEMS, Limits(objects=1)),
}


def _verdict(text: str, rules: Limits) -> Exceeded | str:
    try:
        docs, errors = manifests.load_text(text, "f.yaml", limits=rules)
    except LimitExceeded as e:
        return e.exceeded
    return f"{len(docs)} documents, {len(errors)} errors"


@pytest.mark.parametrize("text,rules", SCANNED.values(), ids=SCANNED.keys())
def test_a_big_text_gets_the_verdict_its_nodes_would_give(text: str, rules: Limits) -> None:
    padded = PAD * (manifests.PRESCAN_CHARS // len(PAD) + 1) + text
    assert len(padded) > manifests.PRESCAN_CHARS
    small, big = _verdict(text, rules), _verdict(padded, rules)
    if isinstance(small, Exceeded):
        lines = padded.count("\n") - text.count("\n")
        assert isinstance(big, Exceeded)
        assert (big.limit, big.file, big.maximum) == (small.limit, small.file, small.maximum)
        assert big.line == (small.line or 0) + lines
    else:
        assert big == small


def test_a_3_mib_list_is_refused_on_its_events_before_memory_grows() -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n" + "- {}\n" * 600_000
    tracemalloc.start()
    try:
        with pytest.raises(LimitExceeded) as info:
            manifests.load_text(text, "l.yaml", limits=Limits())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.exceeded == Exceeded("objects", "l.yaml", 20_000, line=1)
    assert peak < 16 * 1024 * 1024  # its node tree: ~300 MB
