"""The `trainops` command line: every subcommand is reachable and documented."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainops import cli


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out


def test_no_subcommand_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "usage: trainops" in capsys.readouterr().err


def test_module_entry_point_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.startswith("trainops ")


def test_an_out_of_range_webhook_port_is_a_usage_error_not_a_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "webhook", "--cert-dir", ".", "--port", "99999"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "argument --port: 99999 is not a port number (0-65535)" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    result = subprocess.run(
        f"{sys.executable} -m trainops crds | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert len(result.stdout) == 10
    assert "Traceback" not in result.stderr
    assert "BrokenPipe" not in result.stderr
