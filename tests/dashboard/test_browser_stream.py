"""The dashboard's event stream in a real browser: lost when `trainops up` stops, the page says
it is reconnecting, and it is live again once `up` is back on the same port — no reload.

Also the empty state a new user meets first: no repository yet, and what to run.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.dashboard.conftest import api_token, api_url, require_chromium
from tests.up.conftest import Up, finish

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    require_chromium()
    instance = Up(tmp_path / "data")
    yield instance
    finish(instance)


def test_a_lost_stream_says_reconnecting_and_comes_back_live_without_a_reload(
    up: Up, page: Page
) -> None:
    args = ("--dashboard-port", str(_free_port()))
    up.start(timeout=60, args=args)
    url = api_url(up)
    page.goto(f"{url}/?token={api_token(up)}")  # the banner's login link
    page.wait_for_url(url + "/")
    status = page.locator("#stream-status")
    expect(status).to_have_attribute("data-state", "open")
    expect(status).to_have_text("live")
    empty = page.locator("#repositories-empty")
    expect(empty).to_contain_text("trainops up --repo")
    page.evaluate("window.__notReloaded = 1")

    up.stop()
    expect(status).to_have_attribute("data-state", "reconnecting", timeout=20_000)
    expect(status).to_contain_text("reconnecting")

    up.start(timeout=60, args=args)
    expect(status).to_have_attribute("data-state", "open", timeout=30_000)
    expect(status).to_have_text("live")
    assert page.evaluate("window.__notReloaded") == 1
