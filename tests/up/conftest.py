"""`trainops up` as a user runs it: a subprocess, driven over its kubeconfig.

With `TRAINOPS_TEST_KUBECONFIG` set, `up` runs as `trainops up --kubeconfig FILE --node` on that
cluster (`tests.support.upcluster`), and each fresh `Up` starts from a cleaned `default`
namespace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kubelet.conftest import eventually, kill_strays, stray_processes
from tests.support import upcluster

__all__ = ["Up", "eventually", "finish", "stray_processes"]


class Up:
    """One `trainops up` process on a data directory; start/stop it as often as needed."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []
        self.external = upcluster.external_kubeconfig()
        if self.external is not None:
            upcluster.reset_namespace(self.external)

    @property
    def kubeconfig(self) -> Path:
        return self.external or self.data_dir / "kubeconfig"

    def start(self, timeout: float = 30.0, args: tuple[str, ...] = ()) -> None:
        """Start `trainops up` (with `args` appended, e.g. `("--repo", url)`)."""
        self.output = []
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "trainops", "up", "--data-dir", str(self.data_dir)),
                *upcluster.up_args(self.external),
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        ready = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if "again to resume" in line:  # the banner's last line: all of it is read
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(timeout):
            self.stop(signal.SIGKILL)
            raise AssertionError("trainops up did not start:\n" + "".join(self.output))

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.proc = None
        return code

    def core(self) -> Any:
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))


def finish(instance: Up) -> None:
    """Stop `up`; if a failed test left pod processes behind, kill their process groups."""
    if instance.proc is not None:
        instance.stop()
    deadline = time.monotonic() + 10
    while stray_processes(instance.data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    kill_strays(instance.data_dir)


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    """A fresh `trainops up` (not started) on its own data directory."""
    instance = Up(tmp_path / "data")
    yield instance
    finish(instance)


@pytest.fixture(scope="module")
def running_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    """One started `trainops up` shared by a module's tests that do not restart it."""
    instance = Up(tmp_path_factory.mktemp("up") / "data")
    instance.start()
    yield instance
    finish(instance)


@pytest.fixture
def kubectl(running_up: Up) -> Callable[..., subprocess.CompletedProcess[str]]:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, "--kubeconfig", str(running_up.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=30,
        )

    return run
