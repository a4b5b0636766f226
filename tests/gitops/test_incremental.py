"""Reading a commit's manifests by blob (gitops.source.incremental, gittree's parsers, Git.files and
Git.blobs): the same entries as a checkout read by gitops.source.checkout, only new blobs parsed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitops.engine import entries
from gitops.engine.preflight import Checked, preflight
from gitops.engine.spec import RepoSpec, read_spec
from gitops.source import checkout, incremental, reading
from gitops.source import tree as gittree
from gitops.source.git import Git
from gitops.source.tree import TreeEntry
from tests.gitops.conftest import Remote, tf_job_yaml

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  v: '1'\n"
BAD_JOB = tf_job_yaml("bad").replace("replicas: 1", "replicas: -1")


def blob(path: str, sha: str = "a" * 40, mode: str = "100644", size: int = 10) -> TreeEntry:
    return TreeEntry(mode, sha, size, path)


TREE = [
    blob("apps/a.yaml"),
    blob("apps/b.yml"),
    blob("apps/c.json"),
    blob("apps/README.md"),
    blob("apps/deep/d.yaml"),
    blob("apps/.hidden.yaml"),
    blob("apps-old/x.yaml"),
    blob("top.yaml"),
    TreeEntry(gittree.GITLINK_MODE, "b" * 40, None, "apps/vendored"),
]

SELECTIONS = {
    "a directory, recursively": (
        "apps",
        True,
        ["apps/.hidden.yaml", "apps/a.yaml", "apps/b.yml", "apps/c.json", "apps/deep/d.yaml"],
    ),
    "a directory, not recursively": (
        "./apps/",
        False,
        ["apps/.hidden.yaml", "apps/a.yaml", "apps/b.yml", "apps/c.json"],
    ),
    "the root": (
        ".",
        False,
        ["top.yaml"],
    ),
    "one file": ("apps/deep/d.yaml", True, ["apps/deep/d.yaml"]),
    "a file that is no manifest": ("apps/README.md", True, []),
}


@pytest.mark.parametrize(("path", "recurse", "expected"), SELECTIONS.values(), ids=list(SELECTIONS))
def test_the_files_read_are_those_a_checkout_would_give_in_path_order(
    path: str, recurse: bool, expected: list[str]
) -> None:
    files = incremental.manifest_files(TREE, path, recurse=recurse)
    assert files is not None
    assert [f.path for f in files] == expected


FALLBACKS = {
    "a symlink under path": ([*TREE, blob("apps/link.yaml", mode="120000")], "apps"),
    "a symlink as path's parent": ([blob("apps", mode="120000"), blob("x/a.yaml")], "apps/sub"),
    "a symlink anywhere, path the root": ([blob("docs/l", mode="120000"), blob("a.yaml")], "."),
    "path leaving the root": (TREE, "../elsewhere"),
    "an absolute path": (TREE, "/apps"),
    "path a submodule": (TREE, "apps/vendored"),
}


@pytest.mark.parametrize(("tree", "path"), FALLBACKS.values(), ids=list(FALLBACKS))
def test_only_a_checkout_can_tell_with_symlinks_on_the_way_or_odd_paths(
    tree: list[TreeEntry], path: str
) -> None:
    assert incremental.manifest_files(tree, path, recurse=True) is None


def test_a_symlink_outside_path_does_not_force_a_checkout() -> None:
    tree = [*TREE, blob("docs/link", mode="120000")]
    files = incremental.manifest_files(tree, "apps", recurse=True)
    assert files is not None and len(files) == 5


def test_a_path_missing_from_the_commit_is_a_sources_error() -> None:
    with pytest.raises(checkout.SourcesError, match="path 'app' does not exist"):
        incremental.manifest_files(TREE, "app", recurse=True)


def test_ls_tree_and_cat_file_output_are_parsed_missing_blobs_left_out() -> None:
    out = (
        b"100644 blob " + b"1" * 40 + b"     12\tdir/a b.yaml\0"
        b"160000 commit " + b"2" * 40 + b"       -\tsub\0"
    )
    assert gittree.parse_ls_tree(out) == [
        TreeEntry("100644", "1" * 40, 12, "dir/a b.yaml"),
        TreeEntry("160000", "2" * 40, None, "sub"),
    ]
    batch = (
        b"1" * 40 + b" blob 5\nab\ncd\n" + b"3" * 40 + b" missing\n" + b"4" * 40 + b" blob 0\n\n"
    )
    assert gittree.parse_cat_file(batch) == {"1" * 40: b"ab\ncd", "4" * 40: b""}


def _checked(file: str, text: str) -> list[Checked]:
    return preflight(entries.entries_from_text(file, text))


def test_cached_blobs_are_not_parsed_again_and_a_renamed_file_keeps_its_lines() -> None:
    old = _checked("jobs/bad.yaml", BAD_JOB)
    assert old[0].error is not None and old[0].line > 1
    files = [blob("jobs/a.yaml", sha="c" * 40), blob("moved/bad.yaml", sha="d" * 40)]
    memo = {"d" * 40: incremental.Parsed(old, 1)}
    checked, cache = incremental.assemble(files, memo, {"c" * 40: CM.format(name="a").encode()})
    assert incremental.unread(files, memo) == ["c" * 40]
    assert [c.where for c in checked] == ["jobs/a.yaml:1", f"moved/bad.yaml:{old[0].line}"]
    moved = checked[1]
    assert moved.error == old[0].error and moved.desired is None
    assert moved.entry.document is not None and moved.entry.document.file == "moved/bad.yaml"
    # this commit's blobs only
    assert cache == {
        "c" * 40: incremental.Parsed([checked[0]], 1),
        "d" * 40: incremental.Parsed([moved], 1),
    }
    again, _ = incremental.assemble([blob("moved/bad.yaml", sha="d" * 40)], cache, {})
    assert again[0] is moved  # same path: the very same entry, nothing copied


def test_a_blob_over_the_limit_is_refused_unread() -> None:
    big = TreeEntry("100644", "e" * 40, entries.MAX_FILE_BYTES + 1, "huge.yaml")
    assert incremental.unread([big], {}) == []
    checked, _ = incremental.assemble([big], {}, {})
    assert checked[0].error is not None and "over the 3145728-byte" in checked[0].error


async def test_reading_by_blob_gives_what_a_checkout_read_by_sources_gives(
    remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit(
        "many kinds of files",
        {
            "jobs/a.yaml": CM.format(name="a"),
            "jobs/b.yaml": BAD_JOB,
            "jobs/list.yaml": "apiVersion: v1\nkind: List\nitems:\n"
            + "".join(
                f"  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: l{i}}}}}\n"
                for i in range(2)
            ),
            "jobs/broken.yaml": "a: [\n",
            "jobs/latin1.yaml": b"name: \xe9\n",
            "jobs/sub/two.yml": CM.format(name="s") + "---\n" + CM.format(name="t"),
            "jobs/note.txt": "not a manifest\n",
            "other/c.yaml": CM.format(name="c"),
        },
    )
    client = Git(tmp_path / "cache")
    await client.fetch(remote.url, "main")
    listed = await client.files(remote.url, sha)
    files = incremental.manifest_files(listed, "jobs", recurse=True)
    assert files is not None
    read = await client.blobs(remote.url, incremental.unread(files, {}))
    checked, cache = incremental.assemble(files, {}, read)
    root = await client.export(remote.url, sha, tmp_path / "tree", path="jobs")
    expected = preflight(checkout.load_directory(root, "jobs", recurse=True))
    shown = [(c.where, c.error, c.desired) for c in checked]
    assert shown == [(c.where, c.error, c.desired) for c in expected]
    assert len(shown) == 8 and len(cache) == 6


async def test_git_reads_no_blob_twice_for_a_commit_that_changed_one_file(
    remote: Remote, tmp_path: Path
) -> None:
    files: dict[str, str | bytes | None] = {
        f"jobs/cm-{i}.yaml": CM.format(name=f"cm-{i}") for i in range(20)
    }
    first = remote.commit("twenty", files)
    second = remote.commit(
        "one changed, one renamed",
        {
            "jobs/cm-3.yaml": CM.format(name="cm-3").replace("'1'", "'2'"),
            "jobs/cm-4.yaml": None,
            "jobs/renamed.yaml": CM.format(name="cm-4"),
        },
    )
    client = Git(tmp_path / "cache")

    async def read(
        sha: str, cache: dict[str, incremental.Parsed]
    ) -> tuple[list[str], list[Checked]]:
        await client.fetch(remote.url, sha)
        files = incremental.manifest_files(
            await client.files(remote.url, sha), "jobs", recurse=True
        )
        assert files is not None
        wanted = incremental.unread(files, cache)
        checked, cache2 = incremental.assemble(files, cache, await client.blobs(remote.url, wanted))
        cache.clear()
        cache.update(cache2)
        return wanted, checked

    cache: dict[str, incremental.Parsed] = {}
    wanted, _ = await read(first, cache)
    assert len(wanted) == 20
    wanted, checked = await read(second, cache)
    assert len(wanted) == 1  # cm-3's new content; the rename is the same blob
    renamed = next(c for c in checked if c.file == "jobs/renamed.yaml")
    assert renamed.desired is not None and renamed.desired["metadata"]["name"] == "cm-4"
    assert len(checked) == 20 and len(cache) == 20


async def test_the_files_of_a_path_are_listed_literally_and_alone(
    remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit(
        "three directories",
        {"jobs/a.yaml": CM.format(name="a"), "j*/b.yaml": CM.format(name="b"), "c.yaml": "x: 1\n"},
    )
    client = Git(tmp_path / "cache")
    await client.fetch(remote.url, "main")
    assert [f.path for f in await client.files(remote.url, sha, path="./jobs/")] == ["jobs/a.yaml"]
    assert [f.path for f in await client.files(remote.url, sha, path="j*")] == ["j*/b.yaml"]
    assert await client.files(remote.url, sha, path="missing") == []
    assert len(await client.files(remote.url, sha)) == 3


def spec_of(url: str, path: str) -> RepoSpec:
    return read_spec({"metadata": {"name": "r"}, "spec": {"repoURL": url, "path": path}})


async def test_a_commit_is_read_by_blob_or_through_a_checkout_when_a_symlink_is_on_the_way(
    remote: Remote, tmp_path: Path
) -> None:
    sha = remote.commit(
        "links",
        {"jobs/a.yaml": CM.format(name="a"), "shared/b.yaml": CM.format(name="b")},
    )
    client = Git(tmp_path / "cache")
    await client.fetch(remote.url, "main")
    os.symlink("../shared/b.yaml", remote.work / "jobs" / "b.yaml")
    os.symlink("jobs", remote.work / "alias")
    linked = remote.commit("two symlinks", {})
    await client.fetch(remote.url, "main")
    checked, blobs = await reading.load(client, spec_of(remote.url, "jobs"), sha, {})
    assert [c.where for c in checked] == ["jobs/a.yaml:1"] and len(blobs) == 1
    for path, expected in (("jobs", ["jobs/a.yaml:1", "jobs/b.yaml:1"]), ("alias", None)):
        checked, blobs = await reading.load(client, spec_of(remote.url, path), linked, blobs)
        names = [c.desired["metadata"]["name"] for c in checked if c.desired]
        assert names == ["a", "b"] and blobs == {}  # followed inside the repository
        if expected is not None:
            assert [c.where for c in checked] == expected
    with pytest.raises(checkout.SourcesError, match="'nowhere' does not exist"):
        await reading.load(client, spec_of(remote.url, "nowhere"), linked, {})
