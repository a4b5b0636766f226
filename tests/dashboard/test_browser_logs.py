"""The job page's log pane in a real browser, on a job that keeps logging under `trainops up -v`:
the pressed Follow button stays readable, INFO noise can be hidden (and is remembered), and a
browser that closes a followed log leaves no traceback in `up`'s terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.dashboard.conftest import VIEWPORT, api_token, api_url, require_chromium
from tests.up.conftest import Up, eventually, finish

pytestmark = pytest.mark.slow

LIVE = 30_000  # ms
GLOG = "I0000 00:00:1733000000.123456   4242 coordination_service_agent.cc:371] Coordination agent has successfully connected."
PYINFO = "INFO:tensorflow:Enabled check-numerics callback"
SCRIPT = f"""\
import time
print({GLOG!r})
print({PYINFO!r})
print("epoch 1/3 - loss 0.50", flush=True)
i = 0
while True:
    i += 1
    print("I0000 00:00:1733000000.%06d   4242 coordination_service.cc:9] heartbeat %d" % (i, i))
    print("step %d - loss %.2f" % (i, 1 / i), flush=True)
    time.sleep(0.3)
"""
LEFT = "ended: the reader left"


@pytest.fixture(scope="module")
def chatty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Up, str]]:
    """`trainops up -v` (debug lines: the kubelet says when a follow's reader left) with one
    TensorFlowTrainingJob whose chief logs INFO noise and a step line every 0.3 s, forever."""
    require_chromium()
    up = Up(tmp_path_factory.mktemp("logs") / "data")
    up.start(timeout=60, args=("-v",))
    try:
        from kubernetes import client, config

        api = client.CustomObjectsApi(config.new_client_from_config(str(up.kubeconfig)))
        job = {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "TensorFlowTrainingJob",
            "metadata": {"name": "chatty"},
            "spec": {
                "replicaSpecs": [
                    {
                        "type": "chief",
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "tensorflow",
                                        "image": "tensorflow/tensorflow:2.11.0",
                                        "command": ["python3", "-c", SCRIPT],
                                    }
                                ]
                            }
                        },
                    }
                ]
            },
        }
        api.create_namespaced_custom_object(
            "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", job
        )
        yield up, api_url(up)
    finally:
        finish(up)


def _open_job(browser: Browser, up: Up, url: str) -> Page:
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(f"{url}/?token={api_token(up)}")  # the banner's login link
    page.wait_for_url(url + "/")
    page.goto(f"{url}/jobs/default/tensorflowtrainingjobs/chatty")
    expect(page.locator("select#log-replica option[value='chatty-chief-0']")).to_have_count(
        1, timeout=LIVE
    )
    return page


def _follow(page: Page) -> None:
    log = page.locator("pre#log-output")
    expect(log).to_contain_text(re.compile(r"step \d+ - loss"), timeout=LIVE)
    page.locator("#log-follow").click()
    expect(page.locator("#log-follow")).to_have_text("Following (stop)")
    expect(log).to_contain_text(re.compile(r"step \d+ - loss"), timeout=LIVE)


def _contrast(page: Page, selector: str) -> float:
    """WCAG contrast of the element's text colour on its background colour."""
    colours: Any = page.eval_on_selector(
        selector,
        "e => { const s = getComputedStyle(e); return [s.color, s.backgroundColor]; }",
    )

    def luminance(css: str) -> float:
        r, g, b = (int(v) / 255 for v in re.findall(r"[\d.]+", css)[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    fg, bg = sorted((luminance(colours[0]), luminance(colours[1])), reverse=True)
    return (fg + 0.05) / (bg + 0.05)


def test_the_pressed_follow_button_is_readable_and_running_true_is_not_green(
    chatty: tuple[Up, str], browser: Browser
) -> None:
    page = _open_job(browser, *chatty)
    try:
        _follow(page)
        # Under the pointer, as right after the click (the wider label may move it away).
        page.locator("#log-follow").hover()
        assert page.locator("#log-follow:hover").count() == 1
        assert _contrast(page, "#log-follow") >= 4.5
        page.mouse.move(5, 5)
        assert page.locator("#log-follow:hover").count() == 0
        assert _contrast(page, "#log-follow") >= 4.5
        # The timeline's Running True is news, not success: plain text colour, not green.
        running = page.locator('#conditions-timeline li[data-type="Running"] .condition-status')
        expect(running).to_have_text("True", timeout=LIVE)
        assert running.evaluate("e => getComputedStyle(e).color") == "rgb(29, 43, 54)"
    finally:
        page.context.close()


def test_info_lines_can_be_hidden_as_they_stream_and_the_choice_is_remembered(
    chatty: tuple[Up, str], browser: Browser
) -> None:
    page = _open_job(browser, *chatty)
    try:
        log = page.locator("pre#log-output")
        toggle = page.locator("#log-hide-info")
        expect(toggle).not_to_be_checked()  # off by default: the whole log
        _follow(page)
        expect(log).to_contain_text(GLOG)
        expect(log).to_contain_text(PYINFO)

        toggle.check()
        expect(log).not_to_contain_text("coordination_service")
        expect(log).not_to_contain_text(PYINFO)
        expect(log).to_contain_text("epoch 1/3 - loss 0.50")
        expect(page.locator("#log-hidden")).to_have_text(re.compile(r"^\d+ INFO lines hidden$"))
        # Lines still streaming in are filtered too: a later step arrives, its heartbeat not.
        last = int(re.findall(r"step (\d+) - loss", log.inner_text())[-1])
        expect(log).to_contain_text(f"step {last + 2} - loss", timeout=LIVE)
        expect(log).not_to_contain_text("heartbeat")
        assert re.search(r"(?m)^I\d{4} ", log.inner_text()) is None

        page.reload()  # remembered by this browser
        expect(page.locator("#log-hide-info")).to_be_checked()
        expect(page.locator("pre#log-output")).to_contain_text("step", timeout=LIVE)
        expect(page.locator("pre#log-output")).not_to_contain_text("heartbeat")
        page.locator("#log-hide-info").uncheck()
        expect(page.locator("pre#log-output")).to_contain_text("heartbeat")
        expect(page.locator("#log-hidden")).to_have_text("")
    finally:
        page.context.close()


def test_closing_a_followed_log_prints_no_traceback_in_ups_terminal(
    chatty: tuple[Up, str], browser: Browser
) -> None:
    up, url = chatty

    def over() -> int:
        # A follow is over once the kubelet said its reader left, or once anything failed.
        text = "".join(up.output)
        return text.count(LEFT) + text.count("Traceback")

    before = over()
    for n in range(1, 4):
        page = _open_job(browser, up, url)
        _follow(page)
        page.context.close()  # the tab goes away mid-stream
        eventually(lambda: over() >= before + n, timeout=30)  # noqa: B023 (called at once)
    text = "".join(up.output)
    for word in ("Traceback", "ClientConnectionResetError", "Error handling request"):
        assert word not in text, text[text.find(word) - 2000 : text.find(word) + 500]
    assert text.count(LEFT) >= 3
