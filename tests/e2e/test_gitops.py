"""GitOps in the kind cluster (issue #28): deploy/'s two `trainops gitops` replicas syncing
JobRepositories from a Git host that runs as a pod of the cluster (tests/e2e/gitserver.py in
the product image, seeded from ConfigMaps: no registry, no internet), as tenant
ServiceAccounts; a user logging in to the dashboard through `kubectl port-forward` with a
`kubectl create token`, over HTTP and in chromium; `trainops repo` with nothing but a
kubeconfig (the API server's service proxy). The leader killed mid-sync:
test_gitops_failover.py.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest
import yaml

from tests.e2e.gitops_cluster import (
    REPO,
    SYSTEM,
    TF,
    apply,
    drop_namespace,
    make_tenant,
    new_namespace,
    repo_status,
    repository,
    synced,
)
from tests.e2e.kubectl import KUBECONFIG, get, kubectl, needs_cluster
from tests.support.cluster import eventually

pytestmark = needs_cluster


@dataclass
class Tenants:
    """Team a, whose repository `alpha-jobs` syncs `hello`, and team b, whose `bravo-jobs`
    (no automated sync) only compares."""

    a: str
    b: str
    git: str


@pytest.fixture(scope="module")
def tenants(git_url: str) -> Iterator[Tenants]:
    a, b = new_namespace("e2e-team-a"), new_namespace("e2e-team-b")
    try:
        make_tenant(a)
        make_tenant(b)
        apply(
            repository(a, "alpha-jobs", f"{git_url}/hello.git", automated=True),
            repository(b, "bravo-jobs", f"{git_url}/hello.git", automated=False),
        )
        yield Tenants(a, b, git_url)
    finally:
        drop_namespace(a)
        drop_namespace(b)


def test_a_tenant_repository_syncs_from_the_git_pod_and_its_job_succeeds(tenants: Tenants) -> None:
    status = eventually(lambda: synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    assert status is not None

    (resource,) = status["operationState"]["syncResult"]["resources"] or [None]
    assert resource["kind"] == "TensorFlowTrainingJob" and resource["name"] == "hello", status
    job = get("-n", tenants.a, TF, "hello")
    assert job["metadata"]["annotations"]["gitops.trainops.dev/repository"].endswith(
        "alpha-jobs"
    ), job

    def succeeded() -> bool:
        phase = get("-n", tenants.a, TF, "hello").get("status", {}).get("phase")
        assert phase != "Failed"
        return phase == "Succeeded"

    eventually(succeeded, timeout=300, interval=3)
    log = kubectl("-n", tenants.a, "logs", "hello-worker-0").stdout
    assert log.strip() == "hello from git", log
    # team b's repository, without automated sync, applied nothing.
    assert kubectl("-n", tenants.b, "get", TF, "-o", "name").stdout == ""


@pytest.fixture
def dashboard() -> Iterator[str]:
    """`kubectl port-forward svc/trainops-gitops` on a free local port: its base URL."""
    process = subprocess.Popen(
        [
            "kubectl",
            f"--kubeconfig={KUBECONFIG}",
            "-n",
            SYSTEM,
            "port-forward",
            "svc/trainops-gitops",
            ":8080",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        first = lines.get(timeout=30)
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", first)
        assert match, first
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _token(namespace: str, account: str) -> str:
    return kubectl("-n", namespace, "create", "token", account, "--duration=10m").stdout.strip()


def test_a_user_logs_in_through_port_forward_and_sees_only_their_namespace(
    tenants: Tenants, dashboard: str
) -> None:
    eventually(lambda: repo_status(tenants.b, "bravo-jobs").get("sync"), timeout=180, interval=2)
    token = _token(tenants.a, "alice")
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    form = urllib.parse.urlencode({"token": token, "next": "/"}).encode()
    with browser.open(urllib.request.Request(f"{dashboard}/login", data=form), timeout=30) as page:
        assert page.status == 200 and page.url == f"{dashboard}/", page.url
        front = page.read().decode()
    assert [c.name for c in jar] == ["trainops-token"]
    assert f"/repositories/{tenants.a}/alpha-jobs" in front, front
    assert "bravo-jobs" not in front and tenants.b not in front, front

    with browser.open(f"{dashboard}/api/v1/repositories", timeout=30) as answer:
        listed = json.load(answer)["items"]
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in listed] == [
        (tenants.a, "alpha-jobs")
    ]
    # team b's repository by its address: refused in the API server's words, nothing shown.
    try:
        browser.open(f"{dashboard}/api/v1/repositories/{tenants.b}/bravo-jobs", timeout=30)
        raise AssertionError("another namespace's repository was served")
    except urllib.error.HTTPError as refused:
        assert refused.code == 403, refused
        body = refused.read().decode()
        assert json.loads(body) == {
            "error": f'User "system:serviceaccount:{tenants.a}:alice" cannot get resource '
            f'"jobrepositories" in API group "gitops.trainops.dev" in the namespace "{tenants.b}"'
        }, body


def _trainops(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainops ARGS` as on a user's machine that has a kubeconfig and nothing else (no
    `trainops up`, no ~/.kube/config, no TRAINOPS_SERVER or TRAINOPS_TOKEN)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), KUBECONFIG=str(kubeconfig))
    return subprocess.run(
        [sys.executable, "-m", "trainops", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )


def test_trainops_repo_reaches_the_in_cluster_api_with_nothing_but_a_kubeconfig(
    tenants: Tenants, tmp_path: Path
) -> None:
    eventually(lambda: synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    # What the service proxy needs (docs/GITOPS.md, `trainops repo`), granted to alice.
    name = f"trainops-api-{tenants.a}"
    apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": SYSTEM},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services/proxy"],
                    "resourceNames": ["http:trainops-gitops:http"],
                    "verbs": ["get", "create", "delete"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": SYSTEM},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": tenants.a}],
        },
    )
    try:
        admin = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
        (cluster,) = admin["clusters"]
        alice = tmp_path / "alice.kubeconfig"
        alice.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "kind", "cluster": cluster["cluster"]}],
                    "users": [{"name": "alice", "user": {"token": _token(tenants.a, "alice")}}],
                    "contexts": [
                        {"name": "alice", "context": {"cluster": "kind", "user": "alice"}}
                    ],
                    "current-context": "alice",
                }
            )
        )

        listed = _trainops(alice, tmp_path, "repo", "list")
        assert listed.returncode == 0, listed.stderr
        header, *rows = listed.stdout.splitlines()
        assert header.split() == ["NAMESPACE", "NAME", "SYNC", "HEALTH", "REVISION", "AGE", "REPO"]
        assert [row.split()[:3] for row in rows] == [[tenants.a, "alpha-jobs", "Synced"]], rows
        assert rows[0].split()[-1] == f"{tenants.git}/hello.git", rows

        got = _trainops(alice, tmp_path, "repo", "get", f"{tenants.a}/alpha-jobs", "-o", "json")
        assert got.returncode == 0, got.stderr
        repository = json.loads(got.stdout)
        assert repository["metadata"]["name"] == "alpha-jobs"
        assert repository["status"]["sync"]["status"] == "Synced", repository["status"]

        asked_sync = _trainops(alice, tmp_path, "repo", "sync", f"{tenants.a}/alpha-jobs")
        assert asked_sync.returncode == 0, asked_sync.stderr
        assert asked_sync.stdout.strip() == f"sync of {tenants.a}/alpha-jobs requested", asked_sync
        asked = get("-n", tenants.a, "jobrepository", "alpha-jobs")["metadata"]["annotations"]
        token = asked["gitops.trainops.dev/sync-requested-at"]

        def carried_out() -> bool:
            handled = repo_status(tenants.a, "alpha-jobs").get("lastHandledRequest") or {}
            return bool(handled.get("syncRequestedAt") == token)

        eventually(carried_out, timeout=120, interval=1)

        # team b's repository: the trainops API refuses alice in the API server's words.
        other = _trainops(alice, tmp_path, "repo", "get", f"{tenants.b}/bravo-jobs")
        assert other.returncode == 1 and "cannot get resource" in other.stderr, other

        # The kind kubeconfig's own user has a client certificate, no token to pass on.
        kind_admin = _trainops(Path(str(KUBECONFIG)), tmp_path, "repo", "list")
        assert kind_admin.returncode == 1, kind_admin
        assert "has no bearer token (a client certificate?)" in kind_admin.stderr, kind_admin
    finally:
        kubectl("-n", SYSTEM, "delete", "rolebinding,role", name, check=False)


def test_a_user_logs_in_with_a_browser_through_port_forward(
    tenants: Tenants, dashboard: str
) -> None:
    """The same login in Debian's chromium (Playwright), as a user pasting a token does."""
    from playwright.sync_api import sync_playwright

    from tests.dashboard.conftest import launch_chromium, log_in, require_chromium

    require_chromium()
    eventually(lambda: synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            log_in(page, dashboard, _token(tenants.a, "alice"))
            link = page.locator(f'a[href="/repositories/{tenants.a}/alpha-jobs"]').first
            link.wait_for()
            text = page.locator("body").inner_text()
            assert "alpha-jobs" in text and "bravo-jobs" not in text and tenants.b not in text, text
            link.click()
            page.wait_for_url(f"{dashboard}/repositories/{tenants.a}/alpha-jobs")
            page.get_by_text("hello", exact=True).first.wait_for()
        finally:
            browser.close()
