"""The dashboard over loopback: the real GitOps reconciler (the Hub) against the session's API
server, real git repositories, the API app with the dashboard installed, served on 127.0.0.1.

Pages are parsed (tests/dashboard/dom.py) and asserted by the hooks of the page contract. Pod
logs come through the API server's `pods/log`, which proxies to the node's kubelet endpoint: a
test Node points at a small log server here that plays the kubelet's `/containerLogs`, as
tests/support/fakekubelet.py plays its status writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

import dashboard
from dashboard.backend import JOB_LABEL
from dashboard.render import CSP
from gitops.api import routes as api
from gitops.runtime.manager import GitOpsReconciler
from kube import errors, resources
from kube.client import Client
from tests.dashboard.dom import Element, parse
from tests.gitops import conftest as gitops_fixtures
from tests.gitops.conftest import (
    BAD_JOB,
    Remote,
    create_repository,
    repository,
    tf_job_yaml,
    wait_status,
)
from tests.support import kubelettls
from tests.support.cluster import aeventually
from tests.support.fakekubelet import set_pod_status
from tests.support.jobs import tf_job

# The reconciler against the session's API server, and git remotes (tests/gitops/conftest.py).
crds = gitops_fixtures.crds
kclient = gitops_fixtures.kclient
repo_crd = gitops_fixtures.repo_crd
gitops = gitops_fixtures.gitops
remote = gitops_fixtures.remote

CONTRACT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
MESSAGE = "<script>alert('pwned')</script> two jobs"
EVIL = {"Origin": "http://evil.example"}


@pytest.fixture
async def site(gitops: GitOpsReconciler, kclient: Client) -> AsyncIterator[TestClient[Any, Any]]:
    app = api.create_app(gitops, token=None, webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=gitops, client=kclient)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def page(client: TestClient[Any, Any], path: str, status: int = 200) -> Element:
    response = await client.get(path)
    text = await response.text()
    assert response.status == status, text[:500]
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert response.headers["Content-Security-Policy"] == CONTRACT_CSP == CSP
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    doc = parse(text)
    # No inline script or style anywhere (the CSP would block them anyway).
    assert all(s.attrs.get("src", "").startswith("/static/") for s in doc.find_all("script"))
    assert not doc.find_all("style")
    assert not doc.find_all(where=lambda e: "style" in e.attrs)
    return doc


def row(doc: Element, **attrs: str) -> Element:
    return doc.one("tr", **attrs)


def cell(parent: Element, cls: str) -> Element:
    return parent.one(cls=cls)


async def test_the_pages_show_git_and_the_cluster_with_commit_messages_and_denials_as_text(
    site: TestClient[Any, Any], kclient: Client, namespace: str, remote: Remote
) -> None:
    sha = remote.commit(MESSAGE, {"a.yaml": tf_job_yaml("a"), "bad.yaml": BAD_JOB})
    await create_repository(kclient, repository(namespace, remote.url))
    await wait_status(
        kclient,
        namespace,
        lambda st: (st.get("operationState") or {}).get("syncResult", {}).get("revision") == sha,
    )
    key = f"{namespace}/jobs"

    async def front_synced() -> Element | bool:
        doc = await page(site, "/")
        rows = doc.find_all("tr", data_repo=key)
        ok = rows and cell(rows[0], "revision").text() == sha[:7]
        jobs = doc.find_all("tr", data_job=f"{namespace}/a")
        return doc if ok and jobs else False

    front: Element = await aeventually(front_synced, timeout=20, interval=0.2)
    assert front.one("body").attrs["data-page"] == "front"
    assert front.by_id("stream-status").attrs["data-state"] in ("connecting", "open")
    repo_row = row(front, data_repo=key)
    assert cell(repo_row, "repo-url").text() == remote.url
    assert cell(repo_row, "sync-status").text() == "OutOfSync"  # bad.yaml was denied
    assert cell(repo_row, "sync-status").attrs["data-status"] == "OutOfSync"
    assert cell(repo_row, "revision").attrs["title"] == sha
    assert cell(repo_row, "commit-message").text() == MESSAGE  # as text, not as markup
    assert cell(repo_row, "commit-author").text() == "Ada <ada@example.com>"
    assert cell(repo_row, "last-sync").text().startswith("Failed")
    # …and where: the denied file at its line, not only "Failed".
    assert cell(repo_row, "last-sync").one("span", cls="denial-source").text() == "bad.yaml:15"
    assert {b.attrs["data-action"] for b in repo_row.find_all("button")} == {"sync", "refresh"}
    assert repo_row.one("a").attrs["href"] == f"/repositories/{namespace}/jobs"
    job_row = row(front, data_job=f"{namespace}/a")
    assert cell(job_row, "job-kind").text() == "TensorFlowTrainingJob"
    assert cell(job_row, "job-name").one("a").attrs["href"] == (
        f"/jobs/{namespace}/tensorflowtrainingjobs/a"
    )
    assert cell(job_row, "job-repository").text() == key
    assert cell(job_row, "replicas").text() == "0/2"  # a chief and a worker, no controller here
    assert front.find_all("dialog", id="confirm-dialog")
    assert front.by_id("confirm-ok").tag == "button" and front.by_id("confirm-cancel")

    raw = await (await site.get("/")).text()
    assert "<script>alert" not in raw and "&lt;script&gt;alert(" in raw
    # Relative times carry the moment they count from, for the page to count on (every 30 s).
    assert front.one("body").attrs["data-now"].endswith("+00:00")
    age = cell(job_row, "age").one("time")
    assert age.attrs["data-rel"] == "age" and age.attrs["datetime"].endswith("Z")
    deployed = cell(repo_row, "last-sync").one("time")
    assert deployed.attrs["data-rel"] == "ago" and deployed.attrs["datetime"]

    # Filters, also as query parameters.
    only = await page(site, f"/?namespace={namespace}&phase=Pending")
    assert [
        r.attrs["data-job"] for r in only.find_all("tr", where=lambda e: "data-job" in e.attrs)
    ] == [f"{namespace}/a"]
    assert only.by_id("filter-namespace").one("option", selected="").attrs["value"] == namespace
    none = await page(site, f"/?namespace={namespace}&phase=Failed")
    assert "No job matches these filters" in none.by_id("jobs-empty").text()

    # The repository page: the denial verbatim at its file:line, history, a diff.
    repo = await page(site, f"/repositories/{namespace}/jobs")
    assert repo.one("body").attrs["data-page"] == "repository"
    assert repo.by_id("repo-sync-status").text() == "OutOfSync"
    assert repo.by_id("repo-revision").attrs["title"] == sha
    bad = row(repo, data_resource=f"TensorFlowTrainingJob/{namespace}/bad")
    assert cell(bad, "source").text() == "bad.yaml:15"
    assert (
        cell(bad, "message")
        .text()
        .startswith(
            'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
        )
    )
    assert "limits.cpu" in cell(bad, "message").text()
    # Refused, so it does not exist: its name is text (a link would be a 404), and the
    # repository's Missing health names it.
    assert not cell(bad, "resource-name").find_all("a")
    assert cell(bad, "resource-name").text().startswith("bad")
    assert repo.by_id("repo-health-status").text() == "Missing"
    assert repo.by_id("repo-health-message").text() == (
        f"Missing: TensorFlowTrainingJob {namespace}/bad"
    )
    good = row(repo, data_resource=f"TensorFlowTrainingJob/{namespace}/a")
    assert cell(good, "resource-name").one("a").attrs["href"] == (
        f"/jobs/{namespace}/tensorflowtrainingjobs/a"
    )
    assert cell(good, "sync-status").attrs["data-status"] == "Synced"
    assert not good.find_all("a", cls="diff-link")
    (entry,) = repo.find_all("tr", cls="history-entry")
    assert cell(entry, "commit-message").text() == MESSAGE
    assert cell(entry, "result").text() == "Failed"
    assert entry.one("button").attrs == {
        "type": "button",
        "data-action": "sync-revision",
        "data-revision": sha,
        "data-url": f"/api/v1/repositories/{namespace}/jobs",
        "data-name": key,
    }
    diff_href = bad.one("a", cls="diff-link").attrs["href"]
    assert diff_href == (
        f"/repositories/{namespace}/jobs/diff?resource=TensorFlowTrainingJob%2F{namespace}%2Fbad"
    )
    diff = await page(site, diff_href)
    # For a resource the API server refused, what the Hub records instead of a diff is why:
    # shown as that message, verbatim, not as diff lines.
    refusal = diff.by_id("diff-message")
    assert refusal.tag == "pre" and {"diff", "diff-message"} <= refusal.classes
    assert refusal.raw_text().startswith('admission webhook "validate.trainingjobs')
    assert "denied the request" in refusal.raw_text() and not refusal.find_all("span")
    assert "No live object to compare" in diff.text()

    # Fragments: the parts the page swaps in on stream events.
    part = await page(site, "/?fragment=repositories")
    assert part.one(data_fragment="repositories").find_all("tr", data_repo=key)
    part = await page(site, f"/repositories/{namespace}/jobs?fragment=repository")
    assert part.one(data_fragment="repository").find_all(
        "tr", data_resource=f"TensorFlowTrainingJob/{namespace}/bad"
    )
    assert (await site.get("/?fragment=nope")).status == 400

    # Under automated sync the API syncs no other revision than the target's: an older
    # history entry's "Sync this revision" is disabled, saying why.
    fixed = remote.commit("drop bad", {"bad.yaml": None})

    async def two_entries() -> Element | bool:
        doc = await page(site, f"/repositories/{namespace}/jobs")
        entries = doc.find_all("tr", cls="history-entry")
        return doc if len(entries) == 2 and "current" in entries[0].classes else False

    repo = await aeventually(two_entries, timeout=20, interval=0.2)
    newest, older = repo.find_all("tr", cls="history-entry")
    assert newest.one("button").attrs["data-revision"] == fixed
    assert "disabled" not in newest.one("button").attrs
    assert older.one("button").attrs["data-revision"] == sha
    assert "disabled" in older.one("button").attrs
    assert (
        older.one("button")
        .attrs["title"]
        .startswith("Automated sync follows the target revision (HEAD)")
    )
    assert "only it can be synced here" in repo.by_id("history-automated").text()
    refused = await site.post(f"/api/v1/repositories/{namespace}/jobs/sync", json={"revision": sha})
    assert refused.status == 400 and "automated sync policy" in (await refused.json())["error"]


async def test_unknown_pages_are_404_pages_naming_what_is_missing(
    site: TestClient[Any, Any], namespace: str
) -> None:
    missing = await page(site, f"/repositories/{namespace}/nothing", status=404)
    assert missing.one("body").attrs["data-page"] == "error"
    assert f"{namespace}/nothing" in missing.by_id("error-message").text()
    job = await page(site, f"/jobs/{namespace}/tensorflowtrainingjobs/nothing", status=404)
    assert f"{namespace}/nothing" in job.text()
    kind = await page(site, f"/jobs/{namespace}/deployments/x", status=404)
    assert "deployments is not a training job kind" in kind.text()
    nowhere = await page(site, "/no/such/page", status=404)
    assert "/no/such/page" in nowhere.by_id("error-message").text()
    api_404 = await site.get("/api/v1/nothing")  # the API keeps answering JSON
    assert api_404.status == 404 and "error" in await api_404.json()
    # A namespace the reconciler does not watch: no repository there, and it says what to do.
    front = await page(site, f"/?namespace={namespace}")
    empty = front.by_id("repositories-empty").text()
    assert "trainops up --repo" in empty


async def test_assets_are_served_from_the_package(site: TestClient[Any, Any]) -> None:
    front = await page(site, "/")
    script = front.one("script").attrs["src"]
    css = front.one("link", rel="stylesheet").attrs["href"]
    for path, kind in ((script, "javascript"), (css, "text/css")):
        response = await site.get(path)
        assert response.status == 200 and kind in response.headers["Content-Type"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert 'new EventSource("/api/v1/stream")' in await (await site.get(script)).text()


# --- the job page and its actions -----------------------------------------------------------


class LogServer:
    """Plays a kubelet's `/containerLogs` for the API server's `pods/log` proxy: each pod's
    log is `<pod> line 1` … `line 10`; with follow it then stays open."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.following = 0
        """Follow requests still open (the API server's proxy to us has not closed them)."""
        self.speak = asyncio.Event()
        """Set: "quiet" pods start writing a `tick` line every 0.1 s."""
        self.closing = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self.logs)

    async def logs(self, request: web.Request) -> web.StreamResponse:
        pod = request.match_info["pod"]
        self.requests.append(dict(request.query) | {"pod": pod})
        lines = [] if "quiet" in pod else [f"{pod} line {i}\n" for i in range(1, 11)]
        tail = int(request.query.get("tailLines", "0") or 0)
        if tail:
            lines = lines[-tail:]
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        await response.write("".join(lines).encode())
        if request.query.get("follow") == "true":
            # A quiet, running container: open until the test ends or the reader goes away.
            self.following += 1
            try:
                while not self.closing.is_set():
                    transport = request.transport
                    if transport is None or transport.is_closing():
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.closing.wait(), 0.1)
                    if "quiet" in pod and self.speak.is_set():
                        await response.write(b"tick\n")
            except ConnectionError:
                pass  # the API server's proxy closed its request to us
            finally:
                self.following -= 1
        return response


@pytest.fixture
async def node(kclient: Client, namespace: str) -> AsyncIterator[tuple[str, LogServer]]:
    logs = LogServer()
    runner = web.AppRunner(logs.app, shutdown_timeout=2)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=kubelettls.server_context())
    await site.start()
    port = runner.addresses[0][1]
    name = f"dash-{namespace}"
    await kclient.create(
        resources.NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
    )
    node = await kclient.get(resources.NODES, name)
    node["status"] = {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
    }
    await kclient.replace(resources.NODES, node, subresource="status")
    try:
        yield name, logs
    finally:
        with contextlib.suppress(errors.NotFound):
            await kclient.delete(resources.NODES, name)
        logs.closing.set()
        await runner.cleanup()


async def replica_pod(client: Client, namespace: str, job: str, name: str, node: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {JOB_LABEL: job}},
        "spec": {"nodeName": node, "containers": [{"name": "tensorflow", "image": "busybox"}]},
    }
    await client.create(resources.PODS, body)
    await set_pod_status(client, namespace, name, "Running")


async def job_spec(client: Client, namespace: str, name: str) -> dict[str, Any]:
    return (await client.get(resources.TFJOBS, name, namespace)).get("spec") or {}


async def test_the_job_page_shows_replicas_events_and_logs_and_its_actions_change_the_job(
    site: TestClient[Any, Any], kclient: Client, namespace: str, node: tuple[str, LogServer]
) -> None:
    node_name, log_server = node
    body = tf_job(name="mnist")
    body["metadata"]["namespace"] = namespace
    job = await kclient.create(resources.TFJOBS, body)
    await replica_pod(kclient, namespace, "mnist", "mnist-worker-0", node_name)
    await replica_pod(kclient, namespace, "other", "other-worker-0", node_name)
    await kclient.create(
        resources.EVENTS,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "mnist.test", "namespace": namespace},
            "involvedObject": {
                "apiVersion": "batch.tensorstack.dev/v1beta1",
                "kind": "TensorFlowTrainingJob",
                "name": "mnist",
                "namespace": namespace,
                "uid": job["metadata"]["uid"],
            },
            "reason": "Testing",
            "message": "<b>not bold</b>",
            "type": "Warning",
            "count": 2,
        },
    )
    path = f"/jobs/{namespace}/tensorflowtrainingjobs/mnist"
    api_path = "/api/v1" + path

    doc = await page(site, path)
    assert doc.one("body").attrs["data-page"] == "job"
    assert doc.by_id("job-phase").attrs["data-phase"] == "Pending"  # no controller here
    replicas = doc.by_id("replicas")
    assert [
        r.attrs["data-replica"]
        for r in replicas.find_all("tr", where=lambda e: "data-replica" in e.attrs)
    ] == [
        "chief-0",
        "worker-0",
        "worker-1",
    ]
    worker = row(replicas, data_replica="worker-0")
    assert (cell(worker, "replica-type").text(), cell(worker, "replica-index").text()) == (
        "worker",
        "0",
    )
    assert cell(worker, "restarts").text() == "0"
    assert [o.attrs["value"] for o in doc.by_id("log-replica").find_all("option")] == [
        "mnist-worker-0"
    ]
    assert doc.by_id("log-follow").attrs["aria-pressed"] == "false"
    assert doc.by_id("log-output").tag == "pre"
    assert doc.by_id("backoff").text() == "0 / unlimited"
    assert doc.by_id("deadline").text() == "no deadline"
    (event,) = doc.by_id("events").find_all("tr", cls="event")
    assert (cell(event, "reason").text(), cell(event, "count").text()) == ("Testing", "2")
    assert cell(event, "message").text() == "<b>not bold</b>"
    assert {
        b.attrs["data-action"]
        for b in doc.find_all("button", where=lambda e: "data-action" in e.attrs)
    } == {
        "pause",
        "resume",
        "delete",
    }
    assert "disabled" in doc.one("button", data_action="resume").attrs
    assert not doc.find_all("a", id="tensorboard-link")

    detail = await (await site.get(api_path)).json()
    assert detail["job"]["metadata"]["uid"] == job["metadata"]["uid"]
    assert [p["name"] for p in detail["pods"]] == ["mnist-worker-0"]
    assert [e["reason"] for e in detail["events"]] == ["Testing"]

    # Logs through pods/log: the tail, and a follow that streams.
    response = await site.get(
        api_path + "/logs", params={"pod": "mnist-worker-0", "tailLines": "3"}
    )
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/plain")
    assert await response.text() == "".join(f"mnist-worker-0 line {i}\n" for i in (8, 9, 10))
    assert log_server.requests[-1] | {} == {"pod": "mnist-worker-0", "tailLines": "3"}
    default_tail = await site.get(api_path + "/logs", params={"pod": "mnist-worker-0"})
    assert (await default_tail.text()).startswith("mnist-worker-0 line 1\n")
    assert log_server.requests[-1]["tailLines"] == "500"
    async with site.get(
        api_path + "/logs", params={"pod": "mnist-worker-0", "follow": "true", "tailLines": "2"}
    ) as following:
        assert following.status == 200
        got = b""
        async with asyncio.timeout(10):
            while b"line 10\n" not in got:
                got += await following.content.readany()
        assert got == b"mnist-worker-0 line 9\nmnist-worker-0 line 10\n"
    assert log_server.requests[-1]["follow"] == "true"
    foreign = await site.get(api_path + "/logs", params={"pod": "other-worker-0"})
    assert foreign.status == 404 and "not a replica of" in (await foreign.json())["error"]
    assert (await site.get(api_path + "/logs")).status == 400
    assert (
        await site.get(api_path + "/logs", params={"pod": "x", "tailLines": "many"})
    ).status == 400

    # Pause and resume: a merge patch of spec.runMode.pause.enabled; cross-site refused.
    refused = await site.post(api_path + "/pause", headers=EVIL)
    assert refused.status == 403 and "cross-site" in (await refused.json())["error"]
    assert "runMode" not in await job_spec(kclient, namespace, "mnist")
    paused = await site.post(
        api_path + "/pause", headers={"Origin": str(site.make_url("")).rstrip("/")}
    )
    assert paused.status == 202, await paused.text()
    assert (await job_spec(kclient, namespace, "mnist"))["runMode"]["pause"]["enabled"] is True
    after = await page(site, path + "?fragment=job")
    assert "disabled" not in after.one("button", data_action="resume").attrs
    assert "disabled" in after.one("button", data_action="pause").attrs
    resumed = await site.post(api_path + "/resume")
    assert resumed.status == 202
    assert (await job_spec(kclient, namespace, "mnist"))["runMode"]["pause"]["enabled"] is False

    # Delete: cross-site refused, then gone; the page becomes a 404 page.
    assert (await site.delete(api_path, headers={"Sec-Fetch-Site": "cross-site"})).status == 403
    deleted = await site.delete(api_path)
    assert deleted.status == 202 and (await deleted.json())["status"] == "deleting"

    async def gone() -> bool:
        try:
            await kclient.get(resources.TFJOBS, "mnist", namespace)
        except errors.NotFound:
            return True
        return False

    await aeventually(gone, timeout=10, interval=0.1)
    await page(site, path, status=404)
    # The open page's live refresh gets a fragment saying so, not a 404 (a console error).
    gone_part = (await page(site, path + "?fragment=job")).one(data_fragment="job")
    assert gone_part.attrs["data-gone"] == "true"
    assert gone_part.by_id("error-message").text().startswith("It may have been deleted")
    assert (await site.post(api_path + "/pause")).status == 404


async def test_with_a_token_job_actions_need_it_as_the_apis_own_writes_do(
    gitops: GitOpsReconciler, kclient: Client, namespace: str
) -> None:
    body = tf_job(name="guarded")
    body["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, body)
    app = api.create_app(gitops, token="s3cret", webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=gitops, client=kclient)
    path = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/guarded"
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        missing = await client.post(path + "/pause")
        assert missing.status == 401 and missing.headers["WWW-Authenticate"].startswith("Bearer")
        wrong = await client.delete(path, headers={"Authorization": "Bearer nope"})
        assert wrong.status == 401
        assert "runMode" not in await job_spec(kclient, namespace, "guarded")
        ok = await client.post(path + "/pause", headers={"Authorization": "Bearer s3cret"})
        assert ok.status == 202
        assert (await job_spec(kclient, namespace, "guarded"))["runMode"]["pause"]["enabled"]
        # Reads stay open (the page and its fragments load without the token).
        assert (await client.get(f"/jobs/{namespace}/tensorflowtrainingjobs/guarded")).status == 200


# --- drift -----------------------------------------------------------------------------------


async def test_a_job_changed_in_the_cluster_shows_out_of_sync_with_a_diff_of_that_field(
    site: TestClient[Any, Any], kclient: Client, namespace: str, remote: Remote
) -> None:
    labels = "\n  labels:\n    team: vision"
    sha = remote.commit("mnist", {"mnist.yaml": tf_job_yaml("mnist", extra_meta=labels)})
    await create_repository(kclient, repository(namespace, remote.url))  # selfHeal off
    await wait_status(
        kclient, namespace, lambda st: (st.get("sync") or {}).get("status") == "Synced"
    )
    live = await kclient.get(resources.TFJOBS, "mnist", namespace)
    assert live["metadata"]["labels"]["team"] == "vision"
    key = f"TensorFlowTrainingJob/{namespace}/mnist"
    repo_path = f"/repositories/{namespace}/jobs"
    synced = row(await page(site, repo_path), data_resource=key)
    assert cell(synced, "sync-status").attrs["data-status"] == "Synced"
    assert not synced.find_all("a", cls="diff-link")

    # Someone edits the label by hand (a merge patch, as `kubectl label --overwrite` sends).
    await kclient.patch(
        resources.TFJOBS, "mnist", {"metadata": {"labels": {"team": "audio"}}}, namespace
    )

    async def drifted() -> Element | bool:
        doc = await page(site, repo_path)
        found = doc.find_all("tr", data_resource=key)
        status = cell(found[0], "sync-status").attrs["data-status"] if found else ""
        return doc if status == "OutOfSync" else False

    doc: Element = await aeventually(drifted, timeout=20, interval=0.2)
    assert doc.by_id("repo-sync-status").text() == "OutOfSync"
    assert doc.by_id("repo-revision").attrs["title"] == sha
    link = row(doc, data_resource=key).one("a", cls="diff-link").attrs["href"]
    diff = await page(site, link)
    shown = diff.one("pre", cls="diff")
    assert "diff-message" not in shown.classes
    lines = {
        tag: [span.raw_text() for span in shown.find_all("span", cls=f"diff-{tag}")]
        for tag in ("file", "del", "add")
    }
    assert lines["file"] == ["--- live", "+++ desired"]
    # Only that field differs, live (-) against Git (+).
    assert [line.replace(" ", "") for line in lines["del"]] == ["-team:audio"]
    assert [line.replace(" ", "") for line in lines["add"]] == ["+team:vision"]
    assert "Live state" in diff.text()
    # Still OutOfSync: nothing put Git's value back (selfHeal is off).
    job = await kclient.get(resources.TFJOBS, "mnist", namespace)
    assert job["metadata"]["labels"]["team"] == "audio"


async def test_following_a_quiet_log_answers_at_once_and_a_reader_leaving_closes_upstream(
    site: TestClient[Any, Any], kclient: Client, namespace: str, node: tuple[str, LogServer]
) -> None:
    node_name, log_server = node
    body = tf_job(name="quiet")
    body["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, body)
    await replica_pod(kclient, namespace, "quiet", "quiet-worker-0", node_name)
    path = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/quiet/logs"
    params = {"pod": "quiet-worker-0", "follow": "true"}
    # No line yet: the answer still starts (else a page would wait for the first line, and
    # its reader going away would go unnoticed).
    async with asyncio.timeout(10):
        response = await site.get(path, params=params)
    assert response.status == 200
    assert log_server.following == 1
    log_server.speak.set()
    async with asyncio.timeout(10):
        assert await response.content.readline() == b"tick\n"
    response.close()  # the reader goes away: our request to the API server is closed
    # The embedded API server's pods/log proxy notices at its next write (a real one at once),
    # and closes its request to the kubelet: nothing stays open.
    await aeventually(lambda: log_server.following == 0, timeout=10, interval=0.05)


async def test_an_unreachable_api_server_is_a_502_page_naming_what_failed(
    gitops: GitOpsReconciler, namespace: str
) -> None:
    from kube.config import Config

    with socket.socket() as sock:  # a free loopback port, closed again: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = Client.from_config(Config(server=f"http://127.0.0.1:{port}"), timeout=2)
    app = api.create_app(gitops, token=None, webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=gitops, client=dead)
    job = f"/jobs/{namespace}/tensorflowtrainingjobs/mnist"
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            doc = await page(client, job, status=502)
            assert doc.one("body").attrs["data-page"] == "error"
            assert doc.one("h1").text() == "The API server did not answer"
            message = doc.by_id("error-message").text()
            assert message.startswith(f"Reading tensorflowtrainingjobs {namespace}/mnist failed")
            assert "Traceback" not in message
            for method, url in (
                ("GET", "/api/v1" + job),
                ("POST", "/api/v1" + job + "/pause"),
                ("DELETE", "/api/v1" + job),
                ("GET", "/api/v1" + job + "/logs?pod=mnist-worker-0"),
            ):
                response = await client.request(method, url)
                assert response.status == 502, url
                assert (await response.json())["error"].startswith("the API server did not answer")
            # Pages from recorded state still work: the overview needs no API server call.
            await page(client, "/")
    finally:
        await dead.close()


async def test_a_cross_site_form_post_or_a_remote_peer_cannot_pause_a_job(
    gitops: GitOpsReconciler, kclient: Client, namespace: str
) -> None:
    body = tf_job(name="target")
    body["metadata"]["namespace"] = namespace
    await kclient.create(resources.TFJOBS, body)
    path = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs/target"

    @web.middleware
    async def from_elsewhere(request: web.Request, handler: Any) -> web.StreamResponse:
        remote = request.headers.get("X-Test-Peer")  # a played peer: tests listen on loopback
        response: web.StreamResponse = await handler(
            request.clone(remote=remote) if remote else request
        )
        return response

    app = api.create_app(gitops, token=None, webhook_secret=None, allow_remote_writes=False)
    app.middlewares.insert(0, from_elsewhere)
    dashboard.install(app, hub=gitops, client=kclient)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        # What a <form method=post action=http://127.0.0.1:PORT/…/pause> on another site sends.
        form = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Origin": "https://evil.example",
            "Sec-Fetch-Site": "cross-site",
            "Sec-Fetch-Mode": "navigate",
        }
        refused = await client.post(path + "/pause", data=b"x=1", headers=form)
        assert refused.status == 403 and "cross-site" in (await refused.json())["error"]
        # Another local web app (same site, another port) is another origin.
        other = {"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"}
        assert (await client.post(path + "/pause", headers=other)).status == 403
        for method, url in (("POST", path + "/pause"), ("DELETE", path)):
            remote = await client.request(method, url, headers={"X-Test-Peer": "203.0.113.7"})
            assert remote.status == 403
            assert (await remote.json())["error"] == "changes are accepted from this machine only"
        assert "runMode" not in await job_spec(kclient, namespace, "target")
        # The page's own fetch (same origin) is what the guard lets through.
        origin = str(client.make_url("")).rstrip("/")
        own = {
            "Origin": origin,
            "Sec-Fetch-Site": "same-origin",
            "Content-Type": "application/json",
        }
        assert (await client.post(path + "/pause", data=b"{}", headers=own)).status == 202
