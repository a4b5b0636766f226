"""`trainops gitops` as a user runs it: its help, its one-line refusals, and a started service
against the session's API server serving /readyz, the login page and an authenticated API,
carrying out a sync asked through that API, and stopping on SIGTERM with its lease released."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path

import aiohttp
import pytest

from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import resources
from kube.client import Client
from tests.gitops.conftest import (
    Remote,
    create_repository,
    get_or_none,
    repository,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import Cluster, aeventually
from trainops.cli import main

pytestmark = pytest.mark.usefixtures("repo_crd")


def test_help_names_every_flag_and_what_the_service_serves(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["gitops", "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--kubeconfig FILE",
        "--port PORT",
        "--bind ADDR",
        "--cache-dir DIR",
        "--namespace NS",
        "--leader-elect, --no-leader-elect",
        "--lease-namespace NS",
        "--git-webhook-secret NAMESPACE/NAME",
        "--git-webhook-secret-file FILE",
        "--default-service-account NAME",
        "--ls-remote-timeout SECONDS",
        "--max-rounds-per-namespace N",
    ):
        assert flag in out, flag
    assert "default: in-cluster credentials" in out
    assert "/healthz, /readyz, /metrics" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--port", "99999"], 2, "argument --port: 99999 is not a port number (0-65535)"),
        (["--workers", "0"], 2, "trainops gitops: --workers must be at least 1"),
        (
            ["--max-rounds-per-namespace", "0"],
            2,
            "trainops gitops: --max-rounds-per-namespace must be at least 1",
        ),
        (
            ["--ls-remote-timeout", "0"],
            2,
            "trainops gitops: --ls-remote-timeout must be more than 0 seconds",
        ),
        (["--log-level", "LOUD"], 2, "trainops gitops: --log-level LOUD: use DEBUG, INFO"),
        (
            ["--git-webhook-secret", "nonamespace"],
            2,
            "argument --git-webhook-secret: 'nonamespace': name the Secret as NAMESPACE/NAME",
        ),
        (
            ["--kubeconfig", "/nonexistent/kubeconfig"],
            1,
            "trainops gitops: --kubeconfig /nonexistent/kubeconfig: No such file or directory",
        ),
    ],
)
def test_bad_flags_are_one_line_and_no_traceback(
    args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        got = main(["gitops", *args])
    except SystemExit as e:  # argparse's usage errors
        got = int(e.code or 0)
    err = capsys.readouterr().err
    assert got == code
    assert message in err
    assert "Traceback" not in err


async def _start(
    cluster: Cluster, namespace: str, tmp_path: Path, *extra: str
) -> tuple[asyncio.subprocess.Process, int]:
    env = {**os.environ, "TRAINOPS_GIT_WEBHOOK_SECRET": "s3cret"}
    env.pop("KUBERNETES_SERVICE_HOST", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "trainops",
        "gitops",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--namespace",
        namespace,
        "--lease-namespace",
        namespace,
        *extra,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(30):
            while True:
                line = (await process.stderr.readline()).decode()
                assert line, "trainops gitops ended before serving:\n" + "".join(seen)
                seen.append(line)
                found = re.search(r"on 127\.0\.0\.1:(\d+)", line)
                if found:
                    return process, int(found.group(1))
    except BaseException:
        process.kill()
        await process.wait()
        raise


async def test_a_started_service_serves_probes_the_login_page_and_the_authenticated_api(
    cluster: Cluster, namespace: str, tmp_path: Path
) -> None:
    process, port = await _start(cluster, namespace, tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:

            async def ready() -> bool:
                async with http.get(f"{base}/readyz") as response:
                    return (
                        response.status == 200 and await response.text() == "ok"
                    )  # as kube-apiserver and the controller answer

            await aeventually(ready, timeout=20)
            async with http.get(f"{base}/healthz") as response:
                assert response.status == 200
            async with http.get(f"{base}/login") as response:
                assert response.status == 200
                page = await response.text()
                assert 'name="token"' in page and "<form" in page
            async with http.get(f"{base}/api/v1/repositories") as response:
                assert response.status == 401
            bearer = {"Authorization": f"Bearer {cluster.token}"}
            async with http.get(f"{base}/api/v1/repositories", headers=bearer) as response:
                assert response.status == 200
                assert await response.json() == {"items": []}
            # The push hook's secret came from the environment: an unsigned push is refused.
            async with http.post(f"{base}/api/v1/webhooks/git", json={}) as response:
                assert response.status == 401
            async with http.get(f"{base}/metrics") as response:
                assert "trainops_gitops_syncs_total" in await response.text()
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert process.stderr is not None
            rest = (await process.stderr.read()).decode()
            code = await process.wait()
    assert code == 0, rest
    assert "released lease" in rest and "Traceback" not in rest


async def test_the_started_service_carries_out_a_sync_asked_through_its_api(
    cluster: Cluster, namespace: str, tmp_path: Path, remote: Remote
) -> None:
    from gitops.engine import triggers

    client = await Client.connect(cluster.kubeconfig)
    process, port = await _start(
        cluster, namespace, tmp_path, "--allow-local-repos", "--allow-reconciler-identity"
    )
    try:
        sha = remote.commit("one", {"a.yaml": tf_job_yaml("a")})
        body = repository(namespace, remote.url)
        del body["spec"]["syncPolicy"]["automated"]  # synced only when asked
        await create_repository(client, body)
        st = await wait_status(client, namespace, lambda s: (s.get("sync") or {}).get("revision"))
        assert st["sync"]["revision"] == sha and st["sync"]["status"] == "OutOfSync"
        bearer = {"Authorization": f"Bearer {cluster.token}"}
        url = f"http://127.0.0.1:{port}/api/v1/repositories/{namespace}/jobs/sync"
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.post(url, json={}, headers=bearer) as response,
        ):
            assert response.status == 202, await response.text()
        obj = await client.get(JOB_REPOSITORIES, "jobs", namespace)
        asked = obj["metadata"]["annotations"][triggers.SYNC_REQUESTED_AT]
        st = await wait_status(
            client,
            namespace,
            lambda s: (s.get(triggers.HANDLED) or {}).get("syncRequestedAt") == asked,
            timeout=30,
        )
        assert st["sync"]["status"] == "Synced"
        assert st["operationState"]["phase"] == "Succeeded"
        assert await get_or_none(client, resources.TFJOBS, "a", namespace) is not None
        # Its rounds are counted and timed (a no-op round included: it writes nothing else).
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
            http.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        rounds = re.search(r'^trainops_gitops_rounds_total\{result="success"\} (\S+)$', text, re.M)
        assert rounds is not None and float(rounds.group(1)) >= 2  # the first round, the sync
        assert "trainops_gitops_round_duration_seconds_bucket" in text
    finally:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            await process.wait()
        await client.close()
