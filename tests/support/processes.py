"""`trainops` commands as subprocesses of a test, each with its output in a log file.

The process gets nothing from the test's environment (PATH is the system's, for git): no
`$KUBECONFIG`, no in-cluster credentials, so what it can reach is what its command line names
(a `--kubeconfig` holding one ServiceAccount's token, in tests/reference/). `refusals` finds
the lines of a log that say the API server refused something.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["REFUSAL_MARKERS", "Process", "refusals", "start_trainops"]

ROOT = Path(__file__).resolve().parents[2]
# What a refusal in a log looks like: kube.errors prints `403 Forbidden: …` / `401 Unauthorized`,
# kube-apiserver `… is forbidden: …` (bare status codes would match timestamps and serials).
REFUSAL_MARKERS = ("forbidden", "unauthorized")


@dataclass
class Process:
    """A `trainops` command running with its output in a log file."""

    popen: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then its exit status (an AssertionError, after a SIGKILL, when it does not
        stop within `timeout`)."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
            raise AssertionError(
                f"{self.log.name}: did not stop on SIGTERM:\n{self.text()}"
            ) from None

    def kill(self) -> None:
        """SIGKILL (a node lost, an OOM kill): nothing is released."""
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)


def start_trainops(log: Path, *args: str) -> Process:
    """`python -m trainops ARGS…` from the repository, output (both streams) into `log`."""
    out = log.open("wb")
    try:
        popen = subprocess.Popen(
            [sys.executable, "-m", "trainops", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Nothing but what the command line names: no in-cluster, no $KUBECONFIG.
            env={"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1", "HOME": str(log.parent)},
        )
    finally:
        out.close()
    return Process(popen, log)


def refusals(log: str) -> list[str]:
    """The lines of `log` that report a refusal by the API server."""
    return [line for line in log.splitlines() if any(m in line.lower() for m in REFUSAL_MARKERS)]
