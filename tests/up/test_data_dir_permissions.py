"""`trainops up`'s data directory is its user's alone: the store (every Secret in clear), the
token, keys, kubeconfig, the pods' specs (their environment), logs and mounted Secrets.
Checked on a real `up` (a subprocess) running a pod that mounts a Secret; an older version's loose data directory is tightened, and logged, at
the next start. Where this runs as root, a reader running as `nobody` (setpriv) proves it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster import datadir
from tests.up.conftest import Up, eventually, finish

SECRET_VALUE = "hunter2-in-a-volume"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def open_parent() -> Iterator[Path]:
    """A directory other users may traverse (0755, under /tmp): pytest's own temporary
    directories are 0700, which would hide a loose data directory from `nobody` anyway."""
    parent = Path(tempfile.mkdtemp(prefix="trainops-perm-", dir="/tmp"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def perm_up(open_parent: Path) -> Iterator[Up]:
    instance = Up(open_parent / "data")
    if instance.external is not None:
        pytest.skip("the data directory's store is the embedded API server's")
    yield instance
    finish(instance)


def _run_pod(up: Up) -> str:
    """A pod mounting a Secret (the embedded server has no TokenRequest, so service-account
    token files, written by the same code, are checked in tests/kubelet/test_volumes.py),
    printing a line; its uid once its log is on disk."""
    core = up.core()
    core.create_namespaced_secret(
        "default", {"metadata": {"name": "creds"}, "stringData": {"password": SECRET_VALUE}}
    )
    core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "reader"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", "echo log-line-of-reader umask $(umask); sleep 60"],
                        "volumeMounts": [{"name": "creds", "mountPath": "/etc/creds"}],
                    }
                ],
                "volumes": [{"name": "creds", "secret": {"secretName": "creds"}}],
            },
        },
    )
    uid: str = core.read_namespaced_pod("reader", "default").metadata.uid
    log = up.data_dir / "pods" / uid / "logs" / "main" / "0.log"
    try:
        eventually(lambda: log.exists() and "log-line-of-reader" in log.read_text(), 30)
        # up runs with umask 0077; the container gets the runtimes' usual one.
        assert "log-line-of-reader umask 0022" in log.read_text()
    except AssertionError as e:
        status = core.read_namespaced_pod("reader", "default").status
        raise AssertionError(f"{e}; the pod: {status}") from e
    return uid


def _others_can_read(path: Path) -> bool:
    return bool(mode(path) & 0o044)


def test_everything_up_writes_is_owner_only(perm_up: Up) -> None:
    up = perm_up
    up.start(timeout=60)
    uid = _run_pod(up)
    data = up.data_dir
    assert mode(data) == 0o700
    for name in ("state.db", "state.db-wal", "state.db-shm", "token", "kubeconfig"):
        assert mode(data / name) == 0o600, name
    for name in ("server.json", "api.json", "up.lock", "pki/ca.key", "pki/tls.key"):
        assert mode(data / name) == 0o600, name
    assert mode(data / "webhook/tls.key") == 0o600
    assert mode(data / "pki") == mode(data / "webhook") == mode(data / "pods") == 0o700
    pod = data / "pods" / uid
    assert mode(pod) == 0o700
    assert mode(pod / "logs/main/0.log") == 0o600
    assert mode(pod / "containers/main/0/spec.json") == 0o600
    assert (pod / "volumes/creds/password").read_text() == SECRET_VALUE
    assert not mode(pod / "volumes/creds/password") & 0o007
    assert mode(pod / "volumes") == mode(pod / "volumes/creds") == 0o700
    # Nothing up wrote is left for `secure` to tighten at the next start.
    assert datadir.secure(data) == []
    if os.geteuid() == 0 and shutil.which("setpriv"):
        _nobody_reads_nothing(data, [data / "state.db", data / "token", pod / "logs/main/0.log"])


def test_a_loose_data_directory_is_tightened_and_logged_at_start(perm_up: Up) -> None:
    up = perm_up
    up.start(timeout=60)
    _run_pod(up)
    assert up.stop() == 0
    # What an older version left behind: 0755 directories, 0644 files.
    up.data_dir.chmod(0o755)
    loosened = [up.data_dir]
    for path in up.data_dir.rglob("*"):
        if path.is_symlink() or "root" in path.relative_to(up.data_dir).parts:
            continue
        path.chmod(0o755 if path.is_dir() else 0o644)
        loosened.append(path)
    assert _others_can_read(up.data_dir / "state.db")
    up.start(timeout=60)
    output = "".join(up.output)
    (line,) = [ln for ln in output.splitlines() if "readable by other local users" in ln]
    assert f"{up.data_dir} was readable by other local users; tightened" in line
    assert ". 0755→0700" in line
    assert "state.db 0644→0600" in line
    assert "(and " in line  # many more files than the line names
    for path in loosened:
        rel = path.relative_to(up.data_dir).parts
        if len(rel) > 3 and rel[0] == "pods" and rel[2] == "volumes":
            continue  # inside a pod's volumes: the pod's files, behind 0700 directories
        assert not _others_can_read(path), path
    assert mode(up.data_dir) == 0o700
    for name in ("state.db", "state.db-wal", "token", "kubeconfig", "pki/ca.key"):
        assert mode(up.data_dir / name) == 0o600, name


def _nobody_reads_nothing(data: Path, files: list[Path]) -> None:
    """`nobody` can read a world-readable file beside the data directory (so the check can
    fail), but none of `files`, nor list the data directory."""
    control = data.parent / "readable"
    control.write_text("anyone may read this")
    control.chmod(0o644)

    def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv],
            capture_output=True,
            text=True,
            timeout=10,
        )

    assert as_nobody("cat", str(control)).stdout == "anyone may read this"
    listing = as_nobody("ls", str(data))
    assert listing.returncode != 0 and "Permission denied" in listing.stderr
    for path in files:
        read = as_nobody("cat", str(path))
        assert read.returncode != 0 and "Permission denied" in read.stderr, (path, read)
