"""Whether the embedded cluster (`localcluster`, the `local` extra) is installed: `trainops up`
and `trainops apiserver` need it; the image and a `pip install .` without the extra do not
carry it, and those commands then say how to get it instead of failing on an import."""

from __future__ import annotations

import importlib.util

__all__ = ["missing"]

_PARTS = ("localcluster", "kubernetes_validate")
"""The embedded cluster's code, and the built-in types' schemas it serves (the extra's one
dependency)."""


def missing(command: str) -> str | None:
    """One line saying what to install, or None when everything `command` needs is there."""
    absent = [name for name in _PARTS if importlib.util.find_spec(name) is None]
    if not absent:
        return None
    return (
        f"{command}: the embedded cluster is not installed ({', '.join(absent)} missing): "
        "install the `local` extra, e.g. `pip install 'trainops[local]'` or, from a checkout, "
        "`pip install '.[local]'`; the image and deploy/ run without it"
    )
