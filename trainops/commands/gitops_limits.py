"""The flags of what one revision of a JobRepository may hold (`gitops.engine.limits.Limits`),
shared by `trainops gitops` and `trainops up`: `--max-repo-files`, `--max-repo-documents`,
`--max-repo-objects`, `--max-repo-bytes`, `--max-repo-depth` (docs/GITOPS.md, "Limits per
revision")."""

from __future__ import annotations

import argparse
import re
from typing import Any

__all__ = ["add_limit_arguments", "byte_size", "limits"]

_HELP = {
    "files": "most manifest files (*.yaml, *.yml, *.json under spec.path) in a revision",
    "documents": "most YAML documents (empty ones too) in a revision's manifest files",
    "objects": "most objects in a revision, after kind: List expansion",
    "bytes": "most bytes of manifest files in a revision (e.g. 32Mi)",
    "depth": "most mappings and lists nested in any one document",
}
_UNITS = {"": 1, "k": 1000, "ki": 1024, "m": 1000**2, "mi": 1024**2, "g": 1000**3, "gi": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([kKmMgG]i?)?\s*$")


def byte_size(text: str) -> int:
    """`32Mi`, `500k`, `1048576`: a size in bytes, at least 1 (argparse type)."""
    m = _SIZE.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 33554432, 32Mi, 500k)")
    value = int(m.group(1)) * _UNITS[(m.group(2) or "").lower()]
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1 byte")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    from gitops.engine.limits import DEFAULT, FLAGS

    group = parser.add_argument_group(
        "GitOps limits per revision",
        "What one revision of one JobRepository may hold. A revision over any of them is "
        "refused (a ComparisonError naming the limit and the file); the last revision synced "
        "stays applied and nothing is pruned. The defaults fit 10,000 training jobs twice over.",
    )
    for name, flag in FLAGS.items():
        default = getattr(DEFAULT, name)
        shown = f"{default // (1024 * 1024)}Mi" if name == "bytes" else f"{default:,}"
        group.add_argument(
            flag,
            dest=f"max_repo_{name}",
            type=byte_size if name == "bytes" else _positive,
            default=default,
            metavar="BYTES" if name == "bytes" else "N",
            help=f"{_HELP[name]} (default {shown})",
        )


def limits(args: argparse.Namespace) -> Any:
    """The `gitops.engine.limits.Limits` of the flags (the defaults where a command has none)."""
    from gitops.engine.limits import DEFAULT, FLAGS, Limits

    return Limits(
        **{name: getattr(args, f"max_repo_{name}", getattr(DEFAULT, name)) for name in FLAGS}
    )
