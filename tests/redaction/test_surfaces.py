"""Credentials in a repository URL never shown: `trainops up --verbose --repo URL` (a
subprocess, as a user runs it) with a password and a `?private_token=` in the URL, and a second
JobRepository with an `ssh://` password; the Git host is a closed loopback port, so git fails
and echoes the URL. Checked on every surface: up's output (banner and log lines, at DEBUG),
the HTTP API's JSON, the dashboard's HTML, the Events and the JobRepositories' `.status`."""

from __future__ import annotations

import json
import shutil
import socket
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.gitops.conftest import tf_job_yaml
from tests.up.conftest import Up, eventually, finish

PASSWORD = "pw-S3CRET-1"
QUERY_TOKEN = "qt-S3CRET-2"
SSH_PASSWORD = "ssh-S3CRET-3"
SECRETS = (PASSWORD, QUERY_TOKEN, SSH_PASSWORD)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} shown in {where}:\n{text}"


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Up, str]]:
    """A running `up --verbose --repo https://oauth2:PW@127.0.0.1:CLOSED/org/jobs.git?…`, a
    second repository `ssh://git:PW@…/org/other.git` created through the API, and the HTTP
    API's URL, once both repositories have a ComparisonError."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    port = _closed_port()
    url = f"https://oauth2:{PASSWORD}@127.0.0.1:{port}/org/jobs.git?private_token={QUERY_TOKEN}"
    up = Up(tmp_path_factory.mktemp("leaky") / "data")
    up.start(timeout=60, args=("--verbose", "--repo", url))
    try:
        custom = _custom(up)
        custom.create_namespaced_custom_object(
            "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories",
            {
                "apiVersion": "gitops.trainops.dev/v1alpha1",
                "kind": "JobRepository",
                "metadata": {"name": "other"},
                "spec": {"repoURL": f"ssh://git:{SSH_PASSWORD}@127.0.0.1:{port}/org/other.git"},
            },
        )  # fmt: skip
        for name in ("jobs", "other"):
            assert eventually(partial(_conditions, up, name), timeout=60), "".join(up.output)
        api = json.loads((up.data_dir / "api.json").read_text())["url"]
        yield up, api
    finally:
        finish(up)


def _custom(up: Up) -> Any:
    from kubernetes import client, config

    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(up.kubeconfig)))


def _repository(up: Up, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = _custom(up).get_namespaced_custom_object(
        "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories", name
    )
    return obj


def _conditions(up: Up, name: str) -> list[dict[str, Any]]:
    return list((_repository(up, name).get("status") or {}).get("conditions") or [])


def _get(up: Up, url: str) -> str:
    """GET with the token `up` gave its API (every read needs one)."""
    token = json.loads((up.data_dir / "api.json").read_text())["token"]
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as r:
        return str(r.read().decode())


def test_the_status_says_why_git_failed_with_the_url_masked(leaky: tuple[Up, str]) -> None:
    up, _ = leaky
    (jobs,) = _conditions(up, "jobs")
    assert jobs["type"] == "ComparisonError"
    # git is handed the URL without userinfo (it goes through the credential helper), and echoes the query.
    assert "/org/jobs.git?private_token=*** unable to access" in jobs["message"], jobs
    (other,) = _conditions(up, "other")
    assert other["type"] == "ComparisonError"
    for name in ("jobs", "other"):
        _no_secret(json.dumps(_repository(up, name)["status"]), f"{name}'s .status")


def test_events_name_the_repository_without_its_credentials(leaky: tuple[Up, str]) -> None:
    up, _ = leaky

    def warnings() -> list[str]:
        events = up.core().list_namespaced_event("default").items
        return [
            e.message
            for e in events
            if e.involved_object.kind == "JobRepository" and e.type == "Warning"
        ]

    messages: list[str] = eventually(
        lambda: warnings() if len(warnings()) >= 2 else False, timeout=20
    )
    assert any("private_token=***" in m for m in messages), messages
    _no_secret("\n".join(messages), "the Events")


def test_the_http_api_masks_the_url_in_spec_and_status(leaky: tuple[Up, str]) -> None:
    up, api = leaky
    listed = _get(up, api + "/api/v1/repositories")
    _no_secret(listed, "/api/v1/repositories")
    one = json.loads(_get(up, api + "/api/v1/repositories/default/jobs"))
    assert one["spec"]["repoURL"].startswith("https://***@127.0.0.1:")
    assert one["spec"]["repoURL"].endswith("/org/jobs.git?private_token=***")
    other = json.loads(_get(up, api + "/api/v1/repositories/default/other"))
    assert other["spec"]["repoURL"].startswith("ssh://git:***@127.0.0.1:")
    _no_secret(json.dumps([one, other]), "/api/v1/repositories/default/…")


def test_the_dashboard_pages_show_the_masked_url(leaky: tuple[Up, str]) -> None:
    up, api = leaky
    front = _get(up, api + "/")
    _no_secret(front, "the dashboard's front page")
    for name in ("jobs", "other"):
        page = _get(up, f"{api}/repositories/default/{name}")
        _no_secret(page, f"the dashboard page of {name}")
        assert "***@127.0.0.1:" in page


def test_up_output_and_log_lines_never_show_the_credentials(leaky: tuple[Up, str]) -> None:
    up, _ = leaky
    output = "".join(up.output)
    assert "gitops      default/jobs syncing https://***@127.0.0.1:" in output
    assert "private_token=***" in output  # the ComparisonError's log line
    assert "cannot compare with Git" in output
    _no_secret(output, "up's output")


def test_a_query_token_never_becomes_part_of_the_repositorys_name(
    leaky: tuple[Up, str], tmp_path: Path
) -> None:
    up, _ = leaky
    names = [o["metadata"]["name"] for o in _custom(up).list_namespaced_custom_object(
        "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories"
    )["items"]]  # fmt: skip
    assert sorted(names) == ["jobs", "other"]


def test_a_jobs_events_on_the_dashboard_and_its_api_are_masked(leaky: tuple[Up, str]) -> None:
    """Anyone may write an Event about a job; the job page and `/api/v1/jobs/…` mask it too."""
    up, api = leaky
    job = yaml.safe_load(tf_job_yaml("masked"))
    job["metadata"]["namespace"] = "default"
    created = _custom(up).create_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", job
    )
    url = f"https://127.0.0.1/data.tar?access_token={QUERY_TOKEN}"
    up.core().create_namespaced_event(
        "default",
        {
            "metadata": {"name": "masked.1"},
            "involvedObject": {
                "apiVersion": "batch.tensorstack.dev/v1beta1",
                "kind": "TensorFlowTrainingJob",
                "namespace": "default",
                "name": "masked",
                "uid": created["metadata"]["uid"],
            },
            "reason": "Downloading",
            "message": f"fetching {url}",
            "type": "Normal",
        },
    )
    path = "/jobs/default/tensorflowtrainingjobs/masked"

    def with_event() -> str | bool:
        text = _get(up, f"{api}/api/v1{path}")
        return text if "Downloading" in text else False

    body = eventually(with_event)
    assert isinstance(body, str)
    assert "access_token=***" in body
    _no_secret(body, f"/api/v1{path}")
    page = _get(up, api + path)
    assert "access_token=***" in page
    _no_secret(page, "the job page")
