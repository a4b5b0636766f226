"""`trainops repo …` end to end: the real command in a subprocess against the real API served on
loopback over `FakeHub` (tests/gitops/test_api.py)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from gitops.api import routes as api
from tests.gitops.test_api import DIFF, TOKEN, FakeHub, fixture_repositories, masked
from trainops.commands.repo_output import age, describe, table

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@asynccontextmanager
async def server(hub: FakeHub, token: str | None = None) -> AsyncIterator[str]:
    app = api.create_app(hub, token=token, webhook_secret=None, allow_remote_writes=False)
    runner, port = await api.serve(app, "127.0.0.1", 0)
    try:
        yield api.base_url("127.0.0.1", port)
    finally:
        await runner.cleanup()


async def trainops(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    """`python -m trainops repo ARGS` with a private home (no real api.json is found)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    environ.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "xdg"), **(env or {}))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainops",
        "repo",
        *args,
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    result = Result(proc.returncode, out.decode(), err.decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


async def test_list_prints_a_kubectl_table(tmp_path: Path) -> None:
    async with server(FakeHub()) as url:
        result = await trainops(tmp_path, "list", "--server", url)
    assert result.returncode == 0, result.stderr
    table = rows(result.stdout)
    assert table[0] == ["NAMESPACE", "NAME", "SYNC", "HEALTH", "REVISION", "AGE", "REPO"]
    assert [r[:5] for r in table[1:]] == [
        ["default", "jobs", "Synced", "Healthy", "0123456"],
        ["default", "private", "OutOfSync", "Progressing", "fedcba9"],
        ["team-a", "models", "Synced", "Healthy", "0123456"],
    ]
    assert [r[6] for r in table[1:]] == [
        "https://github.com/org/jobs.git",
        "https://***@github.com/org/private.git",
        "git@gitlab.example.com:g/models.git",
    ]
    assert all(re.fullmatch(r"[0-9]+d|[0-9]+y([0-9]+d)?", r[5]) for r in table[1:])  # 2024
    # Columns line up: every cell starts where its header does.
    lines = result.stdout.splitlines()
    start = lines[0].index("REVISION")
    assert all(line[start : start + 7] in ("0123456", "fedcba9") for line in lines[1:])


async def test_list_in_one_namespace_and_as_json_and_yaml(tmp_path: Path) -> None:
    async with server(FakeHub()) as url:
        one = await trainops(tmp_path, "list", "--server", url, "-n", "team-a")
        as_json = await trainops(tmp_path, "list", "--server", url, "-o", "json")
        as_yaml = await trainops(tmp_path, "--server", url, "list", "-o", "yaml")
        empty = await trainops(tmp_path, "list", "--server", url, "-n", "nobody")
    assert [r[:2] for r in rows(one.stdout)[1:]] == [["team-a", "models"]]
    expected = [masked(r) for r in fixture_repositories()]
    assert json.loads(as_json.stdout) == {"apiVersion": "v1", "kind": "List", "items": expected}
    assert yaml.safe_load(as_yaml.stdout)["items"] == expected
    assert empty.returncode == 0
    assert empty.stdout == ""
    assert "No JobRepositories found in namespace nobody." in empty.stderr


async def test_get_describes_one_whole_object_and_not_found(tmp_path: Path) -> None:
    async with server(FakeHub()) as url:
        described = await trainops(tmp_path, "get", "jobs", "--server", url)
        whole = await trainops(tmp_path, "get", "team-a/models", "--server", url, "-o", "yaml")
        other_ns = await trainops(tmp_path, "get", "models", "-n", "team-a", "--server", url)
        missing = await trainops(tmp_path, "get", "x", "--server", url)
    assert described.returncode == 0
    assert described.stdout.startswith("Name:             default/jobs\n")
    assert "Repository:       https://github.com/org/jobs.git\n" in described.stdout
    assert "Sync status:      Synced to 0123456" in described.stdout
    assert yaml.safe_load(whole.stdout) == fixture_repositories()[2]
    assert other_ns.stdout.startswith("Name:             team-a/models\n")
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert missing.stderr.strip() == "trainops repo: jobrepository default/x not found"


async def test_output_leaves_managed_fields_out_unless_asked(tmp_path: Path) -> None:
    managed = [{"manager": "trainops-gitops", "operation": "Update", "subresource": "status"}]
    repos = fixture_repositories()
    for repo in repos:
        repo["metadata"]["managedFields"] = managed
    async with server(FakeHub(repos)) as url:
        listed = await trainops(tmp_path, "list", "--server", url, "-o", "yaml")
        got = await trainops(tmp_path, "get", "team-a/models", "--server", url, "-o", "json")
        shown = await trainops(
            tmp_path, "get", "team-a/models", "--server", url, "-o", "json", "--show-managed-fields"
        )
    items = yaml.safe_load(listed.stdout)["items"]
    assert [i["metadata"]["name"] for i in items] == ["jobs", "private", "models"]
    assert all("managedFields" not in i["metadata"] for i in items)
    assert "managedFields" not in json.loads(got.stdout)["metadata"]
    assert json.loads(got.stdout)["metadata"]["name"] == "models"
    assert json.loads(shown.stdout)["metadata"]["managedFields"] == managed


async def test_sync_and_refresh_are_requested(tmp_path: Path) -> None:
    hub = FakeHub()
    async with server(hub) as url:
        plain = await trainops(tmp_path, "sync", "jobs", "--server", url)
        pinned = await trainops(
            tmp_path, "sync", "default/jobs", "--revision", "abc1234", "--server", url
        )
        refresh = await trainops(tmp_path, "refresh", "private", "--server", url)
        bad = await trainops(tmp_path, "sync", "jobs", "--revision", "a..b", "--server", url)
        missing = await trainops(tmp_path, "sync", "team-a/jobs", "--server", url)
    assert plain.stdout == "sync of default/jobs requested\n"
    assert pinned.stdout == "sync of default/jobs requested (revision abc1234)\n"
    assert refresh.stdout == "refresh of default/private requested\n"
    assert (plain.returncode, pinned.returncode, refresh.returncode) == (0, 0, 0)
    assert bad.returncode == 1
    assert bad.stderr.startswith(
        f"trainops repo: the trainops API at {url} answered 400: invalid revision"
    )
    assert missing.returncode == 1
    assert missing.stderr.strip() == "trainops repo: jobrepository team-a/jobs not found"
    assert hub.calls == [
        ("sync", "default", "jobs", None),
        ("sync", "default", "jobs", "abc1234"),
        ("refresh", "default", "private"),
    ]


async def test_delete_removes_a_repository_and_names_an_unknown_one(tmp_path: Path) -> None:
    hub = FakeHub()
    async with server(hub) as url:
        deleted = await trainops(tmp_path, "delete", "private", "--server", url)
        again = await trainops(tmp_path, "delete", "default/private", "--server", url)
    assert (deleted.returncode, deleted.stdout) == (0, "jobrepository default/private deleted\n")
    assert again.returncode == 1
    assert again.stderr.strip() == "trainops repo: jobrepository default/private not found"
    assert hub.calls == [("delete", "default", "private")]


async def test_diff_prints_headers_and_diffs_and_exits_like_kubectl_diff(tmp_path: Path) -> None:
    async with server(FakeHub()) as url:
        differs = await trainops(tmp_path, "diff", "private", "--server", url)
        same = await trainops(tmp_path, "diff", "jobs", "--server", url)
        missing = await trainops(tmp_path, "diff", "nope", "--server", url)
    assert differs.returncode == 1
    assert differs.stdout == f"# jobs/mnist.yaml:4 TensorFlowTrainingJob/mnist\n{DIFF.text}"
    assert (same.returncode, same.stdout) == (0, "")
    assert missing.returncode == 2
    assert "jobrepository default/nope not found" in missing.stderr


async def test_a_token_from_the_flag_the_environment_or_api_json(tmp_path: Path) -> None:
    hub = FakeHub()
    async with server(hub, token=TOKEN) as url:
        refused = await trainops(tmp_path, "sync", "jobs", "--server", url)
        flag = await trainops(tmp_path, "sync", "jobs", "--server", url, "--token", TOKEN)
        env = await trainops(
            tmp_path, "sync", "jobs", env={"TRAINOPS_SERVER": url, "TRAINOPS_TOKEN": TOKEN}
        )
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        api.write_address(data_dir, url, TOKEN)
        recorded = await trainops(tmp_path, "sync", "jobs", "--data-dir", str(data_dir))
        listed = await trainops(tmp_path, "list", "--data-dir", str(data_dir))
        # The token of api.json goes to the server named there only.
        elsewhere = await trainops(
            tmp_path, "sync", "jobs", "--data-dir", str(data_dir), "--server", url
        )
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"trainops repo: the trainops API at {url} refused the request (a bearer token is "
        "required): pass --token or set $TRAINOPS_TOKEN"
    )
    assert [r.returncode for r in (flag, env, recorded, listed)] == [0, 0, 0, 0]
    assert len(rows(listed.stdout)) == 4
    assert elsewhere.returncode == 1
    assert len(hub.calls) == 3


async def test_the_default_data_dir_is_ups(tmp_path: Path) -> None:
    async with server(FakeHub()) as url:
        data_dir = tmp_path / "xdg" / "trainops"  # up's default under XDG_DATA_HOME
        data_dir.mkdir(parents=True)
        api.write_address(data_dir, url, None)
        result = await trainops(tmp_path, "list")
    assert result.returncode == 0, result.stderr
    assert rows(result.stdout)[1][:2] == ["default", "jobs"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_an_unreachable_or_unknown_server_is_one_line_naming_it(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    unreachable = await trainops(tmp_path, "list", "--server", url)
    assert unreachable.returncode == 1
    assert unreachable.stderr == (
        f"trainops repo: cannot reach the trainops API at {url} (connection refused): start it "
        "with `trainops up --repo GIT_URL`, or pass --server URL or --kubeconfig FILE\n"
    )
    nothing = await trainops(tmp_path, "get", "jobs", "--data-dir", str(tmp_path / "empty"))
    assert nothing.returncode == 1
    assert nothing.stderr.startswith("trainops repo: no trainops API is running for ")
    assert "trainops up --repo GIT_URL" in nothing.stderr
    diff = await trainops(tmp_path, "diff", "jobs", "--server", url)
    assert diff.returncode == 2  # kubectl diff: >1 is an error, 1 means differences


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get", "a/b/c"], "invalid name 'a/b/c': use NAME or NAMESPACE/NAME"),
        (["get", "a/b", "-n", "c"], "a/b names namespace a, but -n says c"),
    ],
)
async def test_bad_names_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    result = await trainops(tmp_path, *args, "--server", "http://127.0.0.1:1")
    assert result.returncode == 1
    assert result.stderr.strip() == f"trainops repo: {message}"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (330, "5m30s"),
        (45 * 60, "45m"),
        (3 * 3600 + 120, "3h2m"),
        (20 * 3600, "20h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (400 * 86400, "400d"),
        (3 * 365 * 86400 + 5 * 86400, "3y5d"),
        (10 * 365 * 86400, "10y"),
    ],
)
def test_age_is_kubectls(seconds: int, shown: str) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    then = (now - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert age(then, now) == shown


def test_a_table_of_an_object_without_status_shows_none() -> None:
    obj = {"metadata": {"namespace": "ns", "name": "n"}, "spec": {"repoURL": "https://h/r"}}
    assert table([obj]).splitlines()[1].split() == [
        "ns",
        "n",
        "<none>",
        "<none>",
        "<none>",
        "<unknown>",
        "https://h/r",
    ]


async def test_diff_of_a_repository_that_cannot_be_compared_is_an_error(tmp_path: Path) -> None:
    broken = fixture_repositories()
    broken[0]["status"]["conditions"] = [
        {"type": "ComparisonError", "status": "True", "message": "path 'jobs' does not exist"}
    ]
    async with server(FakeHub(broken)) as url:
        result = await trainops(tmp_path, "diff", "jobs", "--server", url)
        fine = await trainops(tmp_path, "diff", "private", "--server", url)
    assert result.returncode == 2 and result.stdout == ""
    assert "default/jobs cannot be compared with Git: path 'jobs' does not exist" in result.stderr
    assert fine.returncode == 1  # the others are as before


def test_get_describes_source_policy_status_conditions_and_each_resource_at_its_line() -> None:
    obj = {
        "metadata": {
            "namespace": "ns",
            "name": "jobs",
            "creationTimestamp": "2029-12-31T23:00:00Z",
        },
        "spec": {
            "repoURL": "https://h/r.git",
            "path": "jobs",
            "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
        },
        "status": {
            "sync": {"status": "OutOfSync", "revision": "0123456789abcdef0123"},
            "health": {"status": "Degraded", "message": "1 denied"},
            "operationState": {
                "phase": "Failed",
                "finishedAt": "2029-12-31T23:59:00Z",
                "message": "1 resource denied",
            },
            "conditions": [{"type": "SyncError", "message": "boom"}],
            "resources": [
                {
                    "kind": "TensorFlowTrainingJob",
                    "namespace": "ns",
                    "name": "bad",
                    "status": "OutOfSync",
                    "health": "Missing",
                    "message": "spec.replicaSpecs[0].replicas: must be at least 1",
                    "file": "jobs/bad.yaml",
                    "line": 7,
                },
                {"kind": "ConfigMap", "namespace": "ns", "name": "cm", "status": "Synced"},
            ],
        },
    }
    text = describe(obj, now=datetime(2030, 1, 1, tzinfo=UTC))
    assert text.splitlines()[:10] == [
        "Name:             ns/jobs",
        "Created:          2029-12-31T23:00:00Z (60m ago)",
        "Repository:       https://h/r.git",
        "Path:             jobs",
        "Target revision:  <the remote's HEAD>",
        "Sync policy:      automated (prune, self-heal)",
        "Sync status:      OutOfSync to 0123456789ab",
        "Health status:    Degraded: 1 denied",
        "Last sync:        Failed at 2029-12-31T23:59:00Z: 1 resource denied",
        "Condition:        SyncError: boom",
    ]
    assert [line.split()[:6] for line in text.splitlines()[11:]] == [
        ["FILE:LINE", "KIND", "NAMESPACE", "NAME", "STATUS", "HEALTH"],
        ["jobs/bad.yaml:7", "TensorFlowTrainingJob", "ns", "bad", "OutOfSync", "Missing"],
        ["<live", "only>", "ConfigMap", "ns", "cm", "Synced"],
    ]
    assert "must be at least 1" in text.splitlines()[12]
    manual = describe({"metadata": {"namespace": "a", "name": "b"}, "spec": {}})
    assert "Sync policy:      manual" in manual
    assert manual.endswith("\nNo resources.\n")
