"""Regenerate the dashboard screenshots in docs/screenshots/ (the README shows them).

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

Runs what a new user runs: a bare Git repository in a temporary directory (git CLI) with two
commits — the examples' mnist and XGBoost jobs, then a job the admission webhook denies (its
CPU limit below its request) — and `trainops up --repo file://…/jobs.git` on a temporary data
dir; a job that runs until stopped is added with the API (as `kubectl apply` would). Once the
repository has synced the second commit and the mnist job has Succeeded, Debian's chromium
(through Playwright, no browser download) saves, at 1280×800:

    front.png        the front page: the repository, its badges, every job
    repository.png   the repository page (whole): resources, the denial at its file:line, history
    job.png          the mnist job page (whole): timeline, replicas, events, log
    front-phone.png  the front page at a phone's width (390×844)

Everything it starts is stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from tests.dashboard.conftest import CHROMIUM, api_token, api_url, launch_chromium  # noqa: E402
from tests.gitops.conftest import Remote  # noqa: E402
from tests.up.conftest import Up, eventually, finish  # noqa: E402

EXAMPLES = REPO / "examples"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
FULL_PAGE = {"repository.png", "job.png"}


def _custom(up: Up) -> Any:
    from kubernetes import client, config

    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(up.kubeconfig)))


def _phase(up: Up, plural: str, name: str) -> str | None:
    job = _custom(up).get_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", "default", plural, name
    )
    phase: str | None = (job.get("status") or {}).get("phase")
    return phase


def _synced_at(url: str, sha: str) -> bool:
    import json

    with urllib.request.urlopen(url + "/api/v1/repositories/default/origin", timeout=10) as r:
        status = json.load(r).get("status") or {}
    return bool((status.get("sync") or {}).get("revision") == sha)


def stage(root: Path) -> tuple[Up, str]:
    """The demo: a repository with good jobs and a denied one, `up` syncing it."""
    remote = Remote(root / "jobs")
    remote.commit(
        "Train mnist and iris",
        {
            "mnist.yaml": (EXAMPLES / "tensorflow-mnist.yaml").read_text(),
            "iris.yaml": (EXAMPLES / "xgboost-iris.yaml").read_text(),
        },
    )
    up = Up(root / "data")
    up.start(timeout=60, args=("--repo", remote.url))
    try:
        url = api_url(up)
        opener = urllib.request.build_opener()  # every API request needs up's token
        opener.addheaders = [("Authorization", f"Bearer {api_token(up)}")]
        urllib.request.install_opener(opener)
        eventually(lambda: _phase(up, "tensorflowtrainingjobs", "mnist") == "Succeeded", 90)
        second = remote.commit(
            "Add a bigger model (limits below requests)",
            {"too-small.yaml": (EXAMPLES / "denied" / "limits-below-requests.yaml").read_text()},
        )
        _custom(up).create_namespaced_custom_object(
            "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs",
            yaml.safe_load((EXAMPLES / "tensorflow-pausable.yaml").read_text()),
        )  # fmt: skip
        import json

        hook = urllib.request.Request(
            url + "/api/v1/webhooks/git",
            data=json.dumps(
                {"ref": "refs/heads/main", "after": second, "repository": {"clone_url": remote.url}}
            ).encode(),
            headers={"Content-Type": "application/json", "X-GitHub-Event": "push"},
            method="POST",
        )
        urllib.request.urlopen(hook, timeout=10).close()
        eventually(lambda: _synced_at(url, second), 60)
        eventually(lambda: _phase(up, "tensorflowtrainingjobs", "pausable") == "Running", 60)
        return up, url
    except BaseException:
        finish(up)
        raise


def shoot(url: str, token: str, out: Path) -> list[Path]:
    from playwright.sync_api import expect, sync_playwright

    saved = []
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for name, path, viewport, ready in (
                ("front.png", "/", DESKTOP, 'tr[data-job="default/pausable"] .phase'),
                ("repository.png", "/repositories/default/origin", DESKTOP, "table#resources"),
                ("job.png", "/jobs/default/tensorflowtrainingjobs/mnist", DESKTOP,
                 "pre#log-output"),
                ("front-phone.png", "/", PHONE, "table#repositories"),
            ):  # fmt: skip
                context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
                context.add_cookies([{"name": "trainops-token", "value": token, "url": url}])
                page = context.new_page()
                page.goto(url + path, wait_until="load")
                expect(page.locator(ready)).to_be_visible(timeout=30_000)
                expect(page.locator("#stream-status")).to_have_attribute(
                    "data-state", "open", timeout=30_000
                )
                if name == "job.png":
                    expect(page.locator("pre#log-output")).not_to_be_empty(timeout=30_000)
                target = out / name
                # The repository and job pages run below the fold (history, logs): whole page.
                page.screenshot(path=str(target), full_page=name in FULL_PAGE)
                saved.append(target)
                context.close()
        finally:
            browser.close()
    return saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = parser.parse_args()
    if not CHROMIUM.exists():
        raise SystemExit(f"{CHROMIUM} is missing: install Debian's chromium package")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="trainops-screenshots-") as tmp:
        up, url = stage(Path(tmp))
        try:
            for path in shoot(url, api_token(up), args.out):
                print(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
        finally:
            finish(up)


if __name__ == "__main__":
    main()
