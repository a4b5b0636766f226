"""localcluster.datadir: a data directory left readable by other users is tightened, and what
changed is reported; symlinks, other owners' files and claim data are left alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from localcluster import datadir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def loose_data_dir(root: Path) -> Path:
    """What an older version left: 0755 directories, 0644 files (0755 for an executable)."""
    data = root / "data"
    files = {
        "state.db": b"secrets in clear",
        "state.db-wal": b"wal",
        "state.db-shm": b"shm",
        "token": b"admin-token\n",
        "kubeconfig": b"token: admin-token\n",
        "pki/ca.key": b"key",
        "pki/ca.crt": b"cert",
        "webhook/tls.key": b"key",
        "pods/uid-1/containers/main/0/spec.json": b'{"env": {"PASSWORD": "x"}}',
        "pods/uid-1/logs/main/0.log": b"a log line\n",
        "pods/uid-1/volumes/creds/password": b"x",
        "volumes/default/claim/dataset.csv": b"user data",
        "git/abc.git/hooks/run": b"#!/bin/sh\n",
    }
    for name, content in files.items():
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(0o644)
    (data / "git/abc.git/hooks/run").chmod(0o755)
    for d in [data, *(p for p in data.rglob("*") if p.is_dir())]:
        d.chmod(0o755)
    return data


def test_a_loose_data_directory_becomes_owner_only_and_every_change_is_reported(
    tmp_path: Path,
) -> None:
    data = loose_data_dir(tmp_path)
    changed = datadir.secure(data)
    assert mode(data) == 0o700
    for name in ("state.db", "state.db-wal", "state.db-shm", "token", "kubeconfig"):
        assert mode(data / name) == 0o600, name
    for name in ("pki/ca.key", "pki/ca.crt", "webhook/tls.key"):
        assert mode(data / name) == 0o600, name
    for name in ("pods/uid-1/containers/main/0/spec.json", "pods/uid-1/logs/main/0.log"):
        assert mode(data / name) == 0o600, name
    assert mode(data / "pods/uid-1/volumes") == 0o700  # its contents are the pod's
    assert mode(data / "pods") == mode(data / "pods/uid-1") == mode(data / "pki") == 0o700
    assert mode(data / "git/abc.git/hooks/run") == 0o700  # the owner's bits are kept
    by_path = {c.path: (c.old, c.new) for c in changed}
    assert by_path["."] == (0o755, 0o700)
    assert by_path["state.db"] == (0o644, 0o600)
    assert by_path["state.db-wal"] == (0o644, 0o600)
    assert by_path["pods/uid-1/logs/main/0.log"] == (0o644, 0o600)
    assert changed[0].path == "."
    # A second start finds nothing to do.
    assert datadir.secure(data) == []


def test_claim_data_symlinks_and_pod_roots_are_not_walked(tmp_path: Path) -> None:
    data = loose_data_dir(tmp_path)
    outside = tmp_path / "host-file"
    outside.write_text("a host path a pod mounts")
    outside.chmod(0o644)
    root = data / "pods/uid-1/root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/config").symlink_to(outside)
    (root / "etc/own").write_text("x")
    (root / "etc/own").chmod(0o644)
    (data / "link-to-host").symlink_to(outside)
    datadir.secure(data)
    assert mode(outside) == 0o644  # never followed
    assert mode(root) == 0o700  # the root itself is tightened, its contents are the pod's
    assert mode(root / "etc/own") == 0o644
    assert mode(data / "volumes") == 0o700
    assert mode(data / "volumes/default/claim/dataset.csv") == 0o644
    assert mode(data / "pods/uid-1/volumes/creds/password") == 0o644


def test_describe_is_one_line_with_old_and_new_modes_and_a_count_of_the_rest() -> None:
    changes = [datadir.Tightened(f"f{i}", 0o644, 0o600) for i in range(10)]
    assert datadir.describe(changes[:2]) == "f0 0644→0600, f1 0644→0600"
    assert datadir.describe(changes, limit=3) == (
        "f0 0644→0600, f1 0644→0600, f2 0644→0600 (and 7 more)"
    )


def test_private_files_and_directories_are_created_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        datadir.make_private_dir(tmp_path / "a" / "b")
        datadir.make_private_file(tmp_path / "a" / "b" / "db", also=("-wal",))
    finally:
        os.umask(old)
    assert mode(tmp_path / "a" / "b") == 0o700
    assert mode(tmp_path / "a" / "b" / "db") == 0o600
    wal = tmp_path / "a" / "b" / "db-wal"
    wal.write_text("x")
    wal.chmod(0o644)
    datadir.make_private_file(tmp_path / "a" / "b" / "db", also=("-wal", "-shm"))
    assert mode(wal) == 0o600
    assert not (tmp_path / "a" / "b" / "db-shm").exists()
