"""Fixtures for the dashboard in a real browser: Debian's chromium driven by Playwright, against
`trainops up --repo <a real git repository>` run as a user runs it (a subprocess).

The browser is module-scoped, not session-scoped: Playwright's sync API marks its event loop as
running in the main thread between calls, so a browser left open while pytest-asyncio tests run
(later modules, or the builder's async unit tests here) would make them fail with "another loop
is running". Each test gets a fresh browser context (no shared cookies, storage or cache).

Tests skip, saying why, only when /usr/bin/chromium is missing (`.ci/run` installs it).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.gitops.conftest import Remote
from tests.up.conftest import Up, eventually, finish

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "HOSTILE_LOG_LINE",
    "Dashboard",
    "api_token",
    "api_url",
    "browser",
    "launch_chromium",
    "log_in",
    "page",
    "require_chromium",
    "short_job",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these chromium phones home at start, and this closed network refuses it.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}


def require_chromium() -> None:
    """Skip, saying why, when Debian's chromium is not installed (before starting anything)."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (Debian's chromium package; .ci/run installs it)")


def short_job(name: str, *lines: str) -> str:
    """A TensorFlowTrainingJob whose one chief prints `lines` and exits 0 (the process kubelet
    runs the command on this machine; the image is only recorded)."""
    script = "; ".join(f"print({line!r})" for line in lines)
    return f"""\
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata:
  name: {name}
spec:
  replicaSpecs:
    - type: chief
      template:
        spec:
          containers:
            - name: tensorflow
              image: tensorflow/tensorflow:2.11.0
              command: ["python3", "-c", {json.dumps(script)}]
"""


HOSTILE_LOG_LINE = '<img src=x onerror="window.__pwned=1">'
"""A log line a page that did not escape would run."""


def api_url(up: Up, timeout: float = 30) -> str:
    """The HTTP API's (and the dashboard's) base URL, from `DATA_DIR/api.json`."""
    path = up.data_dir / "api.json"
    url: str = eventually(lambda: json.loads(path.read_text())["url"], timeout=timeout)
    return url


def api_token(up: Up) -> str:
    """The token `up` gave the API's user (`DATA_DIR/api.json`, the same as `api-token`)."""
    token: str = json.loads((up.data_dir / "api.json").read_text())["token"]
    assert token == (up.data_dir / "api-token").read_text().strip()
    return token


def log_in(page: Page, url: str, token: str) -> None:
    """Log in through the login form, as a user pasting a token does."""
    page.goto(url + "/")
    page.wait_for_url(url + "/login")
    page.locator("#login-token").fill(token)
    page.locator("#login-form button[type=submit]").click()
    page.wait_for_url(url + "/")


@dataclass
class Dashboard:
    """A running `trainops up --repo` and what tests need to reach it."""

    up: Up
    remote: Remote
    url: str
    first_commit: str
    repo: str = "default/origin"

    @property
    def token(self) -> str:
        return api_token(self.up)

    def get(self, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.load(r)

    def post(
        self,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        *,
        token: bool = True,
    ) -> Any:
        data = json.dumps(body if body is not None else {}).encode()
        auth = {"Authorization": f"Bearer {self.token}"} if token else {}
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", **auth, **(headers or {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def push_hook(self, sha: str) -> None:
        """What a Git host sends on a push (GitHub's shape; `up` has no webhook secret here)."""
        status, answer = self.post(
            "/api/v1/webhooks/git",
            {"ref": "refs/heads/main", "after": sha, "repository": {"clone_url": self.remote.url}},
            {"X-GitHub-Event": "push"},
            token=False,  # the push hook needs none: its own signature (none configured here)
        )
        assert (status, answer) == (202, {"refreshed": 1}), (status, answer)

    def custom(self) -> Any:
        """A kubernetes CustomObjectsApi on up's kubeconfig."""
        from kubernetes import client, config

        api = config.new_client_from_config(config_file=str(self.up.kubeconfig))
        return client.CustomObjectsApi(api)

    def tf_job(self, name: str, namespace: str = "default") -> dict[str, Any]:
        job: dict[str, Any] = self.custom().get_namespaced_custom_object(
            "batch.tensorstack.dev", "v1beta1", namespace, "tensorflowtrainingjobs", name
        )
        return job

    def repository(self) -> dict[str, Any]:
        namespace, name = self.repo.split("/")
        repo: dict[str, Any] = self.get(f"/api/v1/repositories/{namespace}/{name}")
        return repo


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """`trainops up --repo file://…/origin.git --path jobs` with one short job committed, shared
    by a module's tests (they run in file order: later tests may push more commits)."""
    require_chromium()
    root = tmp_path_factory.mktemp("dashboard")
    remote = Remote(root / "remote")
    first = remote.commit(
        "Add the mnist job",
        {"jobs/mnist.yaml": short_job("mnist", "epoch 1/1 - loss 0.25", HOSTILE_LOG_LINE)},
    )
    up = Up(root / "data")
    up.start(timeout=60, args=("--repo", remote.url, "--path", "jobs"))
    try:
        yield Dashboard(up, remote, api_url(up), first)
    finally:
        finish(up)


def launch_chromium(playwright: Any) -> Browser:
    browser: Browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
    )
    return browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        running = launch_chromium(playwright)
        try:
            yield running
        finally:
            running.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in a fresh context at 1280×800, logged in to the `dashboard` when the test uses
    it (through the login form). Fails the test at teardown if the page threw an uncaught
    error or the browser reported a Content-Security-Policy violation."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"uncaught error: {error}"))

    def console(message: Any) -> None:
        if "Content Security Policy" in message.text:
            problems.append(f"CSP: {message.text}")

    page.on("console", console)
    if "dashboard" in request.fixturenames:
        running: Dashboard = request.getfixturevalue("dashboard")
        log_in(page, running.url, running.token)
    try:
        yield page
    finally:
        context.close()
    assert not problems, problems
