"""`trainops controller` with a cluster configuration it cannot use: one line naming the file or
the server, exit 1, before anything starts (no traceback, no endless retry)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml


def _controller(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(home)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "trainops",
            "controller",
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_a_missing_kubeconfig_is_one_line_naming_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    line = _one_line(_controller("--kubeconfig", str(missing), home=tmp_path))
    assert line == f"trainops controller: --kubeconfig {missing}: No such file or directory"


def test_no_kubeconfig_at_all_names_the_default_file(tmp_path: Path) -> None:
    line = _one_line(_controller(home=tmp_path))
    default = tmp_path / ".kube" / "config"
    assert line == f"trainops controller: kubeconfig {default}: No such file or directory"


def test_a_file_that_is_not_a_kubeconfig_is_one_line_naming_the_file(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("{{{ not: [yaml\n")
    line = _one_line(_controller("--kubeconfig", str(garbage), home=tmp_path))
    assert line.startswith(
        f"trainops controller: --kubeconfig {garbage}: not a usable kubeconfig ("
    )


def test_a_refused_connection_is_one_line_naming_server_and_file(tmp_path: Path) -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    line = _one_line(_controller("--kubeconfig", str(config), home=tmp_path))
    assert line.startswith(
        f"trainops controller: cannot reach the API server {server} (from {config}) within 10 s"
    )


def test_a_negative_or_nan_lost_node_grace_is_refused_in_one_line(tmp_path: Path) -> None:
    for value in ("-1", "nan"):
        done = _controller(f"--lost-node-grace={value}", home=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == "trainops controller: --lost-node-grace must be at least 0"
