"""The `trainops` command line: every subcommand is reachable and documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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


def test_repo_without_a_known_server_says_how_to_start_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    result = subprocess.run(
        [sys.executable, "-m", "trainops", "repo", "list", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"trainops repo: no trainops API is running for {tmp_path} (no api.json there): start "
        "it with `trainops up --repo GIT_URL`, or pass --server URL or --kubeconfig FILE\n"
    )


def _up_usage(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(tmp_path / "d"), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_up_no_node_without_kubeconfig_is_refused_before_starting(tmp_path: Path) -> None:
    result = _up_usage(tmp_path, "--no-node")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "trainops up: --no-node needs --kubeconfig: the embedded API server has no other node"
    )
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("ref", ["only-a-name", "/name", "ns/", "a/b/c"])
def test_up_git_webhook_secret_of_the_wrong_form_is_a_usage_error(tmp_path: Path, ref: str) -> None:
    result = _up_usage(tmp_path, "--git-webhook-secret", ref)
    assert result.returncode == 2
    assert f"argument --git-webhook-secret: {ref!r}: name the Secret as NAMESPACE/NAME" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr
    assert "starting" not in result.stderr
    assert not (tmp_path / "d").exists()
