"""The compiled build (setup.py: mypyc, as the image has it) against this suite.

`hack/compiled-tests` runs the main suite in a tree whose hot modules are compiled and sets
TRAINOPS_EXPECT_COMPILED=1: there, every module setup.py lists must be the extension, or the
tier would be testing the interpreted source again without saying so.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os

import pytest

from tests.support.build import SETUP, compiled_modules


def test_setup_compiles_only_policies_modules_that_exist() -> None:
    modules = compiled_modules()
    assert "policies.rules_common" in modules and "policies.job" in modules
    for name in modules:
        package, _, module = name.partition(".")
        assert package == "policies"
        assert (SETUP.parent / package / f"{module}.py").is_file(), name


@pytest.mark.skipif(
    os.environ.get("TRAINOPS_EXPECT_COMPILED") != "1", reason="the compiled tier only"
)
def test_the_compiled_tier_imports_the_compiled_rules() -> None:
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for name in compiled_modules():
        path = importlib.import_module(name).__file__ or ""
        assert path.endswith(suffixes), path
