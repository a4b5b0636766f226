"""The dashboard in a real browser against `trainops up --repo` with a real git repository.

What a new user sees while pushing commits: the repository Synced at their commit with its job;
a push of a bad job updating the open page without a reload, its commit message shown as text
(a `<script>` in it never runs) and the webhook's denial at the manifest's file:line; a job's
replicas and log; Pause and Resume from the job page. The tests share one `trainops up` and run
in file order (each later one builds on the commits of the earlier ones).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.dashboard.conftest import HOSTILE_LOG_LINE, Dashboard
from tests.up.conftest import eventually

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOSTILE = "<script>window.__pwned=1</script>"
LIVE = 30_000  # ms: a sync, a job's run or a push's effect, seen by the open page


def test_the_front_page_shows_the_repository_synced_at_the_commit_and_its_job(
    dashboard: Dashboard, page: Page
) -> None:
    response = page.goto(dashboard.url + "/")
    assert response is not None and response.status == 200
    csp = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in csp and "default-src 'self'" in csp, csp
    assert page.locator("body").get_attribute("data-page") == "front"

    row = page.locator(f'tr[data-repo="{dashboard.repo}"]')
    expect(row.locator(".sync-status")).to_have_text("Synced", timeout=LIVE)
    expect(row.locator(".sync-status")).to_have_attribute("data-status", "Synced")
    expect(row.locator(".revision")).to_have_text(dashboard.first_commit[:7])
    expect(row.locator(".revision")).to_have_attribute("title", dashboard.first_commit)
    expect(row.locator(".commit-message")).to_have_text("Add the mnist job")
    expect(row.locator(".repo-url")).to_contain_text(dashboard.remote.url)
    expect(row.locator(".repo-name a, a.repo-name")).to_have_attribute(
        "href", re.compile(r"/repositories/default/origin$")
    )

    job = page.locator('tr[data-job="default/mnist"]')
    expect(job.locator(".job-kind")).to_have_text("TensorFlowTrainingJob", timeout=LIVE)
    expect(job.locator(".job-namespace")).to_have_text("default")
    expect(job.locator(".job-repository")).to_have_text(dashboard.repo)
    expect(job.locator(".job-name a")).to_have_attribute(
        "href", re.compile(r"/jobs/default/tensorflowtrainingjobs/mnist$")
    )
    # It runs to the end: Succeeded (followed live when it was still running at page load).
    expect(job.locator(".phase")).to_have_attribute("data-phase", "Succeeded", timeout=LIVE)
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "open")
    # Nothing is wider than the 1280-px window: neither the page nor a table inside its box.
    overflow = page.evaluate(
        """() => [document.documentElement, ...document.querySelectorAll('.table-wrap, table')]
            .filter(e => e.scrollWidth > e.clientWidth + 1)
            .map(e => `${e.tagName}.${e.className}: ${e.scrollWidth} > ${e.clientWidth}`)"""
    )
    assert overflow == []


def test_a_pushed_denial_updates_the_open_page_shows_the_message_as_text_and_its_file_line(
    dashboard: Dashboard, page: Page
) -> None:
    page.goto(dashboard.url + "/")
    row = page.locator(f'tr[data-repo="{dashboard.repo}"]')
    expect(row.locator(".revision")).to_have_text(dashboard.first_commit[:7], timeout=LIVE)
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "open")
    page.evaluate("window.__notReloaded = 'still here'")

    manifest = (EXAMPLES / "denied" / "limits-below-requests.yaml").read_text()
    message = f"Add a too small job {HOSTILE}"
    sha = dashboard.remote.commit(message, {"jobs/too-small.yaml": manifest})
    dashboard.push_hook(sha)

    expect(row.locator(".revision")).to_have_text(sha[:7], timeout=LIVE)
    expect(row.locator(".commit-message")).to_have_text(message)
    assert row.locator(".commit-message script").count() == 0
    assert page.evaluate("window.__notReloaded") == "still here", "the page was reloaded"
    assert page.evaluate("typeof window.__pwned") == "undefined", "the commit message ran"

    # The repository page: the denial verbatim, at the line of the offending field.
    line = 1 + [t.strip() for t in manifest.splitlines()].index("limits: {cpu: 500m}")
    recorded: dict[str, Any] = eventually(lambda: _resource(dashboard, "too-small"), timeout=30)
    assert recorded["line"] == line and recorded["file"].endswith("too-small.yaml"), recorded
    page.goto(f"{dashboard.url}/repositories/default/origin")
    assert page.locator("body").get_attribute("data-page") == "repository"
    denied = page.locator('tr[data-resource="TensorFlowTrainingJob/default/too-small"]')
    expect(denied.locator(".source")).to_have_text(f"{recorded['file']}:{line}")
    expect(denied.locator(".message")).to_contain_text("denied the request")
    expect(denied.locator(".message")).to_contain_text(
        "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"
    )
    expect(denied.locator(".message")).to_have_text(recorded["message"])
    history = page.locator("table#history tr.history-entry .commit-message")
    expect(history.filter(has_text=HOSTILE)).to_have_count(1, timeout=LIVE)
    assert page.evaluate("typeof window.__pwned") == "undefined"

    # Not in the cluster: OutOfSync, with a diff link; for a manifest the webhook refused,
    # GitOps records the denial as its diff (nothing was admitted to compare with).
    expect(denied.locator(".sync-status")).to_have_attribute("data-status", "OutOfSync")
    denied.locator("a.diff-link").click()
    expect(page.locator("pre.diff")).to_contain_text("denied the request")
    expect(page.locator("pre.diff")).to_contain_text('Invalid value: "500m"')


def _resource(dashboard: Dashboard, name: str) -> Any:
    """The repository's status entry for `name` once it carries a file, line and message."""
    status = dashboard.repository().get("status") or {}
    for entry in status.get("resources") or []:
        if entry.get("name") == name and entry.get("line") and entry.get("message"):
            return dict(entry)
    return False


def test_the_job_page_shows_the_replicas_and_a_log_line(dashboard: Dashboard, page: Page) -> None:
    page.goto(f"{dashboard.url}/jobs/default/tensorflowtrainingjobs/mnist")
    assert page.locator("body").get_attribute("data-page") == "job"
    expect(page.locator("#job-phase")).to_have_attribute("data-phase", "Succeeded", timeout=LIVE)
    chief = page.locator('table#replicas tr[data-replica="chief-0"]')
    expect(chief.locator(".replica-type")).to_contain_text(re.compile("chief", re.IGNORECASE))
    expect(chief.locator(".replica-index")).to_have_text("0")
    expect(chief.locator(".exit-code")).to_have_text("0")
    expect(page.locator("select#log-replica option[value='mnist-chief-0']")).to_have_count(1)
    log = page.locator("pre#log-output")
    expect(log).to_contain_text("epoch 1/1 - loss 0.25", timeout=LIVE)
    expect(log).to_contain_text(HOSTILE_LOG_LINE)  # as text: no element, no handler ran
    assert log.locator("img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    expect(page.locator("ol#conditions-timeline li.condition").first).to_be_visible()


def test_the_delete_confirmation_of_a_git_job_says_before_the_click_that_it_is_refused(
    dashboard: Dashboard, page: Page
) -> None:
    page.goto(f"{dashboard.url}/jobs/default/tensorflowtrainingjobs/mnist")
    page.locator('button[data-action="delete"]').click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-message")).to_have_text(
        f"{dashboard.repo} deploys this job from Git: while that repository exists, deleting "
        "it here is refused (its next sync would create it again). Remove it from Git "
        "instead, or pause it (a pause holds)."
    )
    page.locator("#confirm-cancel").click()
    expect(dialog).to_be_hidden()
    assert dashboard.tf_job("mnist")["metadata"].get("deletionTimestamp") is None


def test_pause_and_resume_from_the_job_page_patch_the_job_and_its_phase_follows(
    dashboard: Dashboard, page: Page
) -> None:
    body = _load(EXAMPLES / "tensorflow-pausable.yaml")
    dashboard.custom().create_namespaced_custom_object(
        "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", body
    )
    page.goto(f"{dashboard.url}/jobs/default/tensorflowtrainingjobs/pausable")
    phase = page.locator("#job-phase")
    expect(phase).to_have_attribute("data-phase", "Running", timeout=LIVE)

    def paused() -> Any:
        return dashboard.tf_job("pausable")["spec"]["runMode"]["pause"].get("enabled")

    # Cancelling the confirmation changes nothing.
    page.locator('button[data-action="pause"]').click()
    dialog = page.locator("dialog#confirm-dialog")
    expect(dialog).to_be_visible()
    page.locator("#confirm-cancel").click()
    expect(dialog).to_be_hidden()
    page.locator('button[data-action="pause"]').focus()
    page.keyboard.press("Enter")  # usable with the keyboard; Escape is a cancel
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert paused() is False

    page.locator('button[data-action="pause"]').click()
    expect(dialog).to_be_visible()
    page.locator("#confirm-ok").click()
    eventually(lambda: paused() is True, timeout=15)
    expect(page.locator("#notice")).to_contain_text("default/pausable")
    expect(phase).to_have_attribute("data-phase", "Paused", timeout=LIVE)
    expect(phase).to_have_text("Paused")

    page.locator('button[data-action="resume"]').click()
    expect(dialog).to_be_visible()
    page.locator("#confirm-ok").click()
    eventually(lambda: paused() is False, timeout=15)
    expect(phase).to_have_attribute("data-phase", "Running", timeout=LIVE)


def _load(path: Path) -> dict[str, Any]:
    import yaml

    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body


def test_the_job_filters_keep_only_the_chosen_phase_and_work_as_query_parameters(
    dashboard: Dashboard, page: Page
) -> None:
    """After the tests above: mnist Succeeded (from the repository), pausable Running (not)."""
    page.goto(dashboard.url + "/?phase=Succeeded")
    expect(page.locator('tr[data-job="default/mnist"]')).to_have_count(1)
    expect(page.locator('tr[data-job="default/pausable"]')).to_have_count(0)
    expect(page.locator("select#filter-phase")).to_have_value("Succeeded")

    page.goto(dashboard.url + "/")
    expect(page.locator('tr[data-job="default/pausable"] .phase')).to_have_attribute(
        "data-phase", "Running", timeout=LIVE
    )
    page.locator("select#filter-repository").select_option(dashboard.repo)
    expect(page.locator('tr[data-job="default/pausable"]')).to_have_count(0)
    expect(page.locator('tr[data-job="default/mnist"]')).to_have_count(1)
    page.locator("select#filter-repository").select_option("")
    page.locator("select#filter-phase").select_option("Running")
    expect(page.locator('tr[data-job="default/mnist"]')).to_have_count(0)
    expect(page.locator('tr[data-job="default/pausable"]')).to_have_count(1)


def test_a_sync_from_the_front_page_is_confirmed_then_queued(
    dashboard: Dashboard, page: Page
) -> None:
    page.goto(dashboard.url + "/")
    row = page.locator(f'tr[data-repo="{dashboard.repo}"]')
    dialog = page.locator("dialog#confirm-dialog")
    row.locator('button[data-action="sync"]').click()
    expect(dialog).to_be_visible()
    page.locator("#confirm-ok").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#notice")).to_contain_text(f"sync of {dashboard.repo} queued")


def test_a_visitor_without_a_token_meets_the_login_page_and_logout_ends_the_session(
    dashboard: Dashboard, browser: Browser
) -> None:
    context = browser.new_context()
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto(f"{dashboard.url}/repositories/default/origin")
        page.wait_for_url(re.compile(r"/login\?next="))
        page.locator("#login-token").fill("not-a-token")
        page.locator("#login-form button[type=submit]").click()
        expect(page.locator("#login-error")).to_contain_text("does not accept this token")
        page.locator("#login-token").fill(dashboard.token)
        page.locator("#login-form button[type=submit]").click()
        page.wait_for_url(f"{dashboard.url}/repositories/default/origin")
        expect(page.locator("form.logout .user")).to_have_text("trainops-user")
        # HttpOnly: the page's scripts cannot read the token.
        assert page.evaluate("document.cookie") == ""
        (cookie,) = [c for c in context.cookies() if c["name"] == "trainops-token"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        page.locator("#logout").click()
        page.wait_for_url(f"{dashboard.url}/login")
        assert [c for c in context.cookies() if c["name"] == "trainops-token"] == []
        page.goto(dashboard.url + "/")
        page.wait_for_url(f"{dashboard.url}/login")
    finally:
        context.close()


def test_a_live_update_arriving_during_logout_does_not_send_the_user_back_with_a_next_link(
    dashboard: Dashboard, page: Page
) -> None:
    """The logout is held until a live update has fetched a fragment without the cookie (and
    been redirected to /login): the page must still end at the logout's own /login, not at the
    update's /login?next=/ (which would bring the next user back to this page)."""
    page.goto(dashboard.url + "/")
    expect(page.locator("#stream-status")).to_have_attribute("data-state", "open")
    navigations: list[str] = []
    page.on("request", lambda r: r.is_navigation_request() and navigations.append(r.url))
    held: list[Any] = []
    page.route("**/logout", lambda route: held.append(route))
    page.locator("#logout").click(no_wait_after=True)
    deadline = time.monotonic() + 15
    while not held:
        assert time.monotonic() < deadline, "the logout request never left the page"
        page.wait_for_timeout(20)  # lets Playwright dispatch the route to the handler
    [logout] = held
    # The logout clears the cookie (all it does on the server): so a live update fetched before
    # its answer arrives is redirected to /login, as one in flight across the logout is.
    page.context.clear_cookies()

    def poke() -> None:
        dashboard.custom().patch_namespaced_custom_object(
            "batch.tensorstack.dev",
            "v1beta1",
            "default",
            "tensorflowtrainingjobs",
            "mnist",
            {"metadata": {"annotations": {"trainops.test/poke": str(time.time_ns())}}},
        )

    with page.expect_response(
        lambda r: r.request.resource_type == "fetch" and "/login?next=" in r.url
    ) as redirected:
        poke()
    assert redirected.value.request.redirected_from is not None
    assert "fragment=" in redirected.value.request.redirected_from.url
    # The page cannot be asked (it is navigating), so let it show it has acted on that answer:
    # a second live update's refresh starts only once the first one's has run to its end.
    try:
        with page.expect_request(lambda r: "fragment=" in r.url):
            poke()
    except PlaywrightTimeoutError:
        pass  # the page went away: the assertion below says where to
    assert navigations == [dashboard.url + "/logout"]
    logout.continue_()
    page.wait_for_url(f"{dashboard.url}/login")
    assert navigations == [dashboard.url + "/logout", dashboard.url + "/login"]
