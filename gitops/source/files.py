"""Manifest files on disk, for `trainops check`: the YAML files named or found under paths,
each read and handed to the pure loader (`gitops.engine.manifests.load_text`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from gitops.engine.manifests import Document, LoadError, load_text

__all__ = ["discover", "load_paths"]

_YAML_SUFFIXES = (".yaml", ".yml")


def discover(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[LoadError]]:
    """The YAML files named or found (recursively, `*.yaml`/`*.yml`, sorted) under `paths`."""
    files: list[Path] = []
    errors: list[LoadError] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [
                p
                for p in path.rglob("*")
                if p.suffix in _YAML_SUFFIXES and p.is_file() and not _hidden(p, path)
            ]
            files.extend(sorted(found))
        elif path.exists():  # a regular file, or a pipe such as /dev/stdin or <(cmd)
            files.append(path)
        else:
            errors.append(LoadError(str(path), None, "no such file or directory"))
    return files, errors


def _hidden(path: Path, root: Path) -> bool:
    """Whether `path` is inside a dot-directory (or is a dot-file) below `root`: `.git`,
    `.venv`, `.github` hold YAML that is not the user's manifests. Named paths are always read."""
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def load_paths(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[Document], list[LoadError]]:
    """Every document of every YAML file under `paths`, and what could not be loaded."""
    files, errors = discover(paths)
    documents: list[Document] = []
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as e:
            errors.append(LoadError(str(path), None, f"cannot read: {e.strerror}"))
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            errors.append(LoadError(str(path), None, f"not UTF-8 text: {e.reason}"))
            continue
        docs, errs = load_text(text, str(path))
        documents.extend(docs)
        errors.extend(errs)
    return documents, errors
