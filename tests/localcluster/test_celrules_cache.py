"""The CEL parser tables come from an on-disk cache after the first process built them; rules
evaluate the same either way (the literal callbacks survive the cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json
from localcluster.schema import celrules
schema = {"type": "object", "properties": {"flag": {"type": "boolean"}, "name": {"type": "string"}},
          "x-kubernetes-validations": [
              {"rule": "self.flag == true && !false", "message": "flag must be true"},
              {"rule": "self.name != 'falsey'", "message": "bad name"}]}
results = [[e.body for e in celrules.evaluate_rules(o, None, schema)]
           for o in ({"flag": True, "name": "x"}, {"flag": False, "name": "falsey"})]
print(json.dumps(results))
"""

EXPECTED = [[], ['Invalid value: "object": flag must be true', 'Invalid value: "object": bad name']]


def _run(cache_home: Path) -> list[list[str]]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)


def test_rules_evaluate_the_same_with_a_fresh_and_a_cached_parser(tmp_path: Path) -> None:
    fresh = _run(tmp_path)
    [cache] = list((tmp_path / "trainops").glob("cel-lark-*.cache"))
    cached = _run(tmp_path)
    assert fresh == cached == EXPECTED
    assert list((tmp_path / "trainops").iterdir()) == [cache], "no temporary files left"


def test_an_unwritable_cache_directory_only_costs_time(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert _run(blocked) == EXPECTED
