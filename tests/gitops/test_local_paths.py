"""Local repository paths: the engine reads no working directory, so the command line makes a
relative path absolute (`gitops.engine.urls.absolute_local_path`) and the engine refuses one
that reaches it relative."""

from __future__ import annotations

import pytest

from gitops.engine.urls import (
    GitError,
    absolute_local_path,
    is_local_path,
    normalize_repo_url,
    split_url,
)

PATHS = {
    "relative": ("jobs", "/home/u/jobs"),
    "dot-relative": ("./team/../jobs.git", "/home/u/jobs.git"),
    "absolute, untouched": ("/srv/jobs", "/srv/jobs"),
    "https, untouched": ("https://git.example.com/jobs.git", "https://git.example.com/jobs.git"),
    "scp-like, untouched": ("git@host:org/jobs.git", "git@host:org/jobs.git"),
    "file URL, untouched": ("file:///srv/jobs", "file:///srv/jobs"),
}


@pytest.mark.parametrize(("given", "absolute"), PATHS.values(), ids=PATHS)
def test_the_command_line_makes_a_relative_path_absolute(given: str, absolute: str) -> None:
    assert absolute_local_path(given, "/home/u") == absolute


@pytest.mark.parametrize(
    ("text", "local"),
    [
        ("jobs", True),
        ("./jobs", True),
        ("/srv/j", True),
        ("host:org/j", False),
        ("ssh://h/j", False),
    ],
)
def test_what_counts_as_a_local_path(text: str, local: bool) -> None:
    assert is_local_path(text) is local


def test_an_absolute_path_becomes_a_normalised_file_url() -> None:
    assert split_url("/srv/a/../jobs.git") == ("file:///srv/jobs.git", None, None)
    assert split_url("/srv/ü.git") == ("file:///srv/%C3%BC.git", None, None)
    assert normalize_repo_url("/srv/x/../jobs.git/") == "file:///srv/jobs"


def test_a_relative_path_is_refused_by_the_engine() -> None:
    with pytest.raises(GitError, match="a local path must be absolute"):
        split_url("./jobs")
