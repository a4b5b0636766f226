"""The build's one optional step: with TRAINOPS_MYPYC=1 the admission rules are compiled.

mypyc (mypy's compiler, from the pinned mypy in constraints.txt) turns the modules below into
C extensions: the same source, type-checked, run without the interpreter's dispatch — the
rules of a typical job in ~40 % of the time (docs/POLICIES.md "Compiled"). The Dockerfile
builds the image this way; an editable install (the README's) stays pure Python, so an edited
rule takes effect without a rebuild. `hack/compiled-tests` runs the suites that exercise the
rules against a compiled build. Everything else about the package is in pyproject.toml.

    TRAINOPS_MYPYC=1 pip install --no-build-isolation -c constraints.txt .
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED = [
    "policies/advice.py",
    "policies/defaults.py",
    "policies/job.py",
    "policies/kinds.py",
    "policies/quantity.py",
    "policies/resources.py",
    "policies/restart.py",
    "policies/rules_common.py",
    "policies/tensorflow.py",
    "policies/update.py",
    "policies/xgboost.py",
]
"""The modules every admission runs. Not compiled: `fieldpath` (its path keys subclass `str`,
which mypyc does not support), `cel`, `crds`, `schema` and `structural` (CRD generation and the
strict schema walk, off the webhook's path)."""


def _ext_modules() -> list[Any]:
    if os.environ.get("TRAINOPS_MYPYC", "") in ("", "0"):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        sys.exit(
            "TRAINOPS_MYPYC=1 compiles with mypyc, which is not importable here: install "
            "mypy (constraints.txt's version) and build with pip's --no-build-isolation"
        )
    return mypycify(COMPILED, opt_level="3")


class _NotInPlace(build_ext):
    """Refuses to compile into the source tree (an editable install, `--inplace`): Python imports
    an extension before the source beside it, so every later edit of a rule would be ignored."""

    def run(self) -> None:
        if self.extensions and (self.inplace or getattr(self, "editable_mode", False)):
            sys.exit(
                "TRAINOPS_MYPYC=1 does not build into the source tree (an edited rule would be "
                "ignored): build a wheel (pip install/wheel without -e), or hack/compiled-tree"
            )
        super().run()


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": _NotInPlace})
