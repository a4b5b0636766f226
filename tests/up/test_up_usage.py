"""`trainops up` refuses bad flags and unusable data directories in the user's terms, and a
Ctrl-C while it starts stops what started without announcing a running system."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.up.conftest import Up, stray_processes


def _up(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainops", "up", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        pytest.param("--port", "99999", "99999 is not a port number (0-65535)", id="port-too-big"),
        pytest.param("--port", "-1", "-1 is not a port number (0-65535)", id="port-negative"),
        pytest.param(
            "--dashboard-port", "0", "0 is not a port number (1-65535)", id="dashboard-port-zero"
        ),
        pytest.param(
            "--dashboard-port", "http", "'http' is not a port number", id="dashboard-port-text"
        ),
        pytest.param("--image", "python", "'python' is not IMAGE=ENV_DIR", id="image-without-env"),
        pytest.param(
            "--image",
            "python:*=/nonexistent/venv",
            "/nonexistent/venv: no such Python environment (a directory with bin/ is expected)",
            id="image-env-missing",
        ),
    ],
)
def test_a_port_out_of_range_is_a_usage_error_naming_the_flag(
    tmp_path: Path, flag: str, value: str, message: str
) -> None:
    done = _up("--data-dir", str(tmp_path / "data"), f"{flag}={value}")
    assert done.returncode == 2
    assert f"argument {flag}: {message}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data").exists()


def test_a_data_dir_that_is_a_file_is_refused_as_not_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "state"
    file.write_text("not a directory")
    done = _up("--data-dir", str(file))
    assert done.returncode == 2
    assert done.stderr.strip() == f"trainops up: --data-dir {file} is not a directory"
    assert file.read_text() == "not a directory"


def test_a_port_taken_by_another_program_names_the_flag_to_change(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _up("--data-dir", str(tmp_path / "data"), "--port", str(port))
    assert done.returncode == 1
    assert f"--port {port}: the port is in use by another program" in done.stderr
    assert "Errno" not in done.stderr and "Traceback" not in done.stderr


def test_ctrl_c_while_starting_stops_everything_without_a_banner(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("trainops up: starting")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGINT
    assert "interrupted while starting" in err
    assert "export KUBECONFIG" not in out
    assert "Traceback" not in err
    assert stray_processes(data_dir) == []


def test_an_unreadable_store_is_reported_and_left_as_it_was(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "state.db").write_bytes(b"not a database, but maybe someone's data\n" * 100)
    before = (data_dir / "state.db").read_bytes()
    done = _up("--data-dir", str(data_dir))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"trainops up: the stored state in {data_dir} cannot be read (file is not a database); "
        "nothing was changed: move the directory aside to start afresh, or use another --data-dir"
    )
    assert (data_dir / "state.db").read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--port", "70000"], "argument --port: 70000 is not a port number", id="port"),
        pytest.param(["--host", "999.1.1.1"], "--host 999.1.1.1: '999.1.1.1'", id="bad-host"),
    ],
)
def test_apiserver_flags_are_checked_without_a_traceback(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trainops", "apiserver", "--data-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_dashboard_port_is_a_start_error_naming_the_flag(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _up("--data-dir", str(data_dir), "--dashboard-port", str(port))
    assert done.returncode == 1
    assert (
        f"trainops up: --dashboard-port {port}: the port is in use by another program; "
        "choose another, or leave --dashboard-port out to pick a free one"
    ) in done.stderr
    assert "Traceback" not in done.stderr
    assert stray_processes(data_dir) == []


def test_the_api_answers_on_the_dashboard_port_and_up_records_its_address(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "trainops", "up", "--data-dir", str(data_dir)),
            *("--dashboard-port", str(port), "--repo", "https://example.com/jobs.git"),
            *("--path", "jobs", "--revision", "main"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        banner = []
        for line in proc.stdout:
            banner.append(line.strip())
            if line.startswith("Stop with"):
                break
        url = f"http://127.0.0.1:{port}"
        address = json.loads((data_dir / "api.json").read_text())
        token = (data_dir / "api-token").read_text().strip()
        assert address == {"url": url, "token": token}
        assert (data_dir / "api-token").stat().st_mode & 0o777 == 0o600
        # Without a token: 401, nothing listed.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/api/v1/repositories", timeout=10)
        assert refused.value.code == 401
        assert refused.value.headers["WWW-Authenticate"] == 'Bearer realm="trainops"'
        assert json.load(refused.value) == {"error": "a bearer token is required"}
        listing = urllib.request.Request(
            f"{url}/api/v1/repositories", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(listing, timeout=10) as r:
            items = json.load(r)["items"]
        assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items] == [
            ("default", "jobs")
        ]
        with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
            text = r.read().decode()
        assert "trainops_controller_reconciles" in text
        assert "trainops_gitops" in text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert f"API         {url}/api/v1/repositories, /api/v1/jobs, /metrics" in banner
    assert f"dashboard   {url}/?token={token}" in banner  # the one-time login link
    assert (
        "gitops      default/jobs syncing https://example.com/jobs.git path jobs at main "
        "(kubectl get jobrepo)"
    ) in banner
    # One line says whether pods get networks of their own, and what does not work if not.
    (network,) = [line for line in banner if line.startswith("pod network ")]
    assert " on bridge tnops" in network or "pod network none: pods share the host network (" in (
        network
    )
    assert not (data_dir / "api.json").exists()
    assert stray_processes(data_dir) == []


def _dashboard_port(output: list[str]) -> int:
    (line,) = [line for line in output if line.strip().startswith("dashboard ")]
    url = line.split()[1]  # http://127.0.0.1:PORT/?token=… (the login link)
    return int(url.split("/")[2].rsplit(":", 1)[1])


def test_the_dashboard_keeps_its_port_across_restarts_unless_it_is_taken(up: Up) -> None:
    up.start()
    first = _dashboard_port(up.output)
    assert up.stop() == 0
    up.start()
    assert _dashboard_port(up.output) == first
    assert up.stop() == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        up.start()
        moved = _dashboard_port(up.output)
    assert moved != first
    assert f"the dashboard's last port {first} is in use; it moves to a free one" in "".join(
        up.output
    )
    assert (up.data_dir / "dashboard.port").read_text() == f"{moved}\n"
