"""`trainops gitops` as deploy/ installs it, run with its ServiceAccount's token (issue #17).

Against the reference cluster (`TRAINOPS_TEST_KUBECONFIG`; skipped otherwise, see conftest) with
`deploy/` applied: the gitops Deployment's own arguments — `--bind`, `--port` and `--cache-dir`
moved to loopback and a temporary directory, plus `--kubeconfig` holding the trainops-gitops
ServiceAccount's token from the TokenRequest API — run as local processes, one per "replica",
so they have exactly deploy/gitops/rbac.yaml's rights. Repositories are served over loopback
HTTP (`git http-backend`: the Deployment's tenancy refuses file:// remotes) and sync as their
own ServiceAccount; their jobs are admitted by the webhook running as its account
(`admitting`). There is no node: jobs stay without pods.

- One replica answers its probes, syncs a repository, and releases its Lease on SIGTERM, with
  not one refusal in its log.
- Two users (a ServiceAccount and a Role each, in their own namespace) see and do only their
  own through the running service's API and dashboard: 401 without a token or with one the
  API server does not accept, 403 in the API server's words and nothing else; what they may
  do the service does with its own identity (job page, pause, delete).
- Two replicas: a sync and a refresh asked of the standby are carried out by the leader; the
  leader killed (SIGKILL) in the middle of a sync of many jobs is taken over by the standby
  within the lease time, which finishes the sync creating each job once.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from dashboard.backend import JOB_LABEL
from gitops.engine import triggers
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import errors, resources
from kube.client import Client
from kube.manager import LeaderElection
from tests.gitops.conftest import Remote, get_or_none, repository, tf_job_yaml, wait_status
from tests.reference.conftest import GITOPS, NAMESPACE, Identity
from tests.support.cluster import Cluster, aeventually
from tests.support.githttp import serve_git_http
from tests.support.jobs import replica, tf_job
from tests.support.manifests import container_arg
from tests.support.processes import Process, refusals, start_trainops
from tests.support.tenants import DEPLOYER_RULES, service_account, team_token

AUTOMATED = {"prune": True, "selfHeal": True}
LISTENING = re.compile(r"gitops serving .* on 127\.0\.0\.1:(\d+) ")
LEASE = LeaderElection()  # the timings `trainops gitops` runs with (runtime.new_manager)
TF = "tensorflowtrainingjobs"


@dataclass
class Replica:
    """One `trainops gitops` process and the port it serves on."""

    process: Process
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.popen.pid

    def leads(self) -> bool:
        return "became leader of lease" in self.process.text()


def gitops_argv(docs: tuple[dict[str, Any], ...], identity: Identity, cache: Path) -> list[str]:
    """The Deployment's arguments, served on loopback with a temporary cache and a kubeconfig."""
    (container,) = _deployment(docs)["spec"]["template"]["spec"]["containers"]
    moved = {"--bind": "127.0.0.1", "--port": "0", "--cache-dir": str(cache)}
    argv = []
    for arg in (container_arg(a, container, NAMESPACE) for a in container["args"]):
        flag, eq, _ = arg.partition("=")
        argv.append(f"{flag}={moved.pop(flag)}" if eq and flag in moved else arg)
    assert not moved, f"the Deployment no longer passes {sorted(moved)}"
    return [*argv, f"--kubeconfig={identity.kubeconfig}"]


def _deployment(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == GITOPS]
    return found


Start = Callable[[str], Awaitable[Replica]]


@pytest.fixture
async def replicas(
    deployed: tuple[dict[str, Any], ...], gitops_identity: Identity, tmp_path: Path
) -> AsyncIterator[Start]:
    """`start(name)`: one more replica, once it serves; all stopped (SIGTERM) afterwards."""
    started: list[Process] = []

    async def start(name: str) -> Replica:
        argv = gitops_argv(deployed, gitops_identity, tmp_path / f"cache-{name}")
        process = start_trainops(tmp_path / f"gitops-{name}.log", *argv)
        started.append(process)

        def listening() -> int:
            assert process.running(), process.text()
            found = LISTENING.search(process.text())
            assert found, "not serving yet"
            return int(found[1])

        port: int = await aeventually(listening, timeout=60, interval=0.1)
        return Replica(process, port)

    try:
        yield start
    finally:
        for process in started:
            process.stop()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Remote, str]]:
    """A Git remote (commit to it) and its URL over loopback HTTP, served for the whole test
    (asked for before `replicas`, so it outlives them)."""
    remote = Remote(tmp_path / "remote")
    async with serve_git_http(remote.bare.parent) as git:
        yield remote, git.url_of(remote.bare.name)


@pytest.fixture
async def admin(reference: Cluster) -> AsyncIterator[Client]:
    client = await Client.connect(reference.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def tenants(
    admin: Client, deployed: tuple[dict[str, Any], ...]
) -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    """`make(prefix)`: a fresh namespace with the ServiceAccount `deployer` its repositories act
    as (rights on jobs, ConfigMaps, Services and Secrets there); all deleted afterwards."""
    made: list[str] = []

    async def make(prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        await admin.create(resources.NAMESPACES, {"metadata": {"name": name}})
        made.append(name)
        await service_account(admin, name, "deployer", DEPLOYER_RULES)
        return name

    try:
        yield make
    finally:
        for name in made:
            # The repositories first: the next test's replicas must not find them in a
            # namespace being deleted (their Events would be refused there).
            for repo in (await admin.list(JOB_REPOSITORIES, name))["items"]:
                with contextlib.suppress(errors.NotFound):
                    await admin.delete(JOB_REPOSITORIES, repo["metadata"]["name"], name)
            with contextlib.suppress(errors.NotFound):
                await admin.delete(resources.NAMESPACES, name)


def synced(revision: str) -> Callable[[dict[str, Any]], bool]:
    def check(st: dict[str, Any]) -> bool:
        result = (st.get("operationState") or {}).get("syncResult") or {}
        return bool(result.get("revision") == revision and st["sync"]["status"] == "Synced")

    return check


async def answers(http: aiohttp.ClientSession, url: str) -> bool:
    async with http.get(url) as response:
        return response.status == 200


async def ready(http: aiohttp.ClientSession, one: Replica) -> bool:
    return await answers(http, f"{one.url}/readyz")


def probe_paths(docs: tuple[dict[str, Any], ...]) -> tuple[str, str]:
    """The Deployment's liveness and readiness paths (on its one port: tests/test_deploy_gitops.py)."""
    (container,) = _deployment(docs)["spec"]["template"]["spec"]["containers"]
    return (
        container["livenessProbe"]["httpGet"]["path"],
        container["readinessProbe"]["httpGet"]["path"],
    )


async def holder(admin: Client) -> str:
    lease = await admin.get(resources.LEASES, GITOPS, NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "")


def holds(identity: str, one: Replica) -> bool:
    """kube/leader.py's identity is `<host>_<pid>_<random>`."""
    return f"_{one.pid}_" in identity


# -- one replica at work ----------------------------------------------------------------------


async def test_the_deployment_runs_as_its_account_answers_its_probes_and_syncs(
    deployed: tuple[dict[str, Any], ...],
    admitting: Process,
    served: tuple[Remote, str],
    replicas: Start,
    admin: Client,
    tenants: Callable[[str], Awaitable[str]],
) -> None:
    ns = await tenants("team")
    remote, url = served
    sha = remote.commit(
        "two jobs", {"train.yaml": tf_job_yaml("train"), "eval.yaml": tf_job_yaml("eval")}
    )
    async with aiohttp.ClientSession() as http:
        one = await replicas("one")
        # The Deployment's probes on the served port, without a token (a kubelet has none):
        # alive at once, ready once its caches have synced.
        liveness, readiness = probe_paths(deployed)
        async with http.get(f"{one.url}{liveness}") as response:
            assert response.status == 200
        await aeventually(lambda: answers(http, f"{one.url}{readiness}"), timeout=30)
        async with http.get(f"{one.url}/metrics") as response:
            assert response.status == 200
        await aeventually(one.leads, timeout=30)
        assert holds(await holder(admin), one)
        body = repository(ns, url, automated=AUTOMATED, serviceAccountName="deployer")
        await admin.create(JOB_REPOSITORIES, body)
        st = await wait_status(admin, ns, synced(sha), timeout=60)
    assert {r["name"]: r["status"] for r in st["resources"]} == {
        "train": "Synced",
        "eval": "Synced",
    }
    for name in ("train", "eval"):
        job = await admin.get(resources.TFJOBS, name, ns)
        assert "trainops-gitops" in {m["manager"] for m in job["metadata"]["managedFields"]}
    # SIGTERM: a clean exit that releases the Lease (a standby would take over at once).
    assert one.process.stop() == 0, one.process.text()
    assert await holder(admin) == ""
    log = one.process.text()
    assert f"gitops {ns}/jobs: synced {sha[:7]}" in log, log
    assert not refusals(log), log


# -- two users, one service ---------------------------------------------------------------------


async def test_two_users_see_and_do_only_their_own_through_the_service(
    admitting: Process,
    served: tuple[Remote, str],
    replicas: Start,
    admin: Client,
    tenants: Callable[[str], Awaitable[str]],
) -> None:
    team_a, team_b = await tenants("team-a"), await tenants("team-b")
    alice = await team_token(admin, team_a, "alice")
    bob = await team_token(admin, team_b, "bob")
    remote, url = served
    sha = remote.commit("a job", {"train.yaml": tf_job_yaml("train")})
    one = await replicas("one")
    for ns in (team_a, team_b):
        body = repository(ns, url, automated=AUTOMATED, serviceAccountName="deployer")
        await admin.create(JOB_REPOSITORIES, body)
    for ns in (team_a, team_b):
        await wait_status(admin, ns, synced(sha), timeout=60)
    # A job made by hand (not from Git: a delete of it is not undone by a sync), and a replica
    # pod of `train` (there is no controller here; unscheduled, its log is empty).
    scratch = tf_job(replica("worker", 1), name="scratch")
    scratch["metadata"]["namespace"] = team_a
    await admin.create(resources.TFJOBS, scratch)
    pod = {
        "metadata": {"name": "train-worker-0", "namespace": team_a, "labels": {JOB_LABEL: "train"}},
        "spec": {"containers": [{"name": "tensorflow", "image": "busybox"}]},
    }
    await admin.create(resources.PODS, pod)

    async with aiohttp.ClientSession(base_url=one.url) as http:

        async def call(method: str, path: str, token: str | None = None) -> tuple[int, Any]:
            headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
            async with http.request(method, path, headers=headers) as response:
                return response.status, await response.json()

        # 401, and nothing else, without a token or with one the API server rejects.
        assert await call("GET", "/api/v1/repositories") == (
            401,
            {"error": "a bearer token is required"},
        )
        assert await call("GET", "/api/v1/jobs", alice + "x") == (
            401,
            {"error": "the token is not valid"},
        )
        assert await call("POST", f"/api/v1/repositories/{team_a}/jobs/sync", "forged") == (
            401,
            {"error": "the token is not valid"},
        )

        # Each sees their own namespace's repository and jobs only.
        for token, own in ((alice, team_a), (bob, team_b)):
            status, body = await call("GET", "/api/v1/repositories", token)
            assert status == 200
            assert [r["metadata"]["namespace"] for r in body["items"]] == [own]
            status, body = await call("GET", "/api/v1/jobs", token)
            assert status == 200
            assert {j["namespace"] for j in body["items"]} == {own}

        # The other's: 403 in the API server's words, no data.
        user_a = f'User "system:serviceaccount:{team_a}:alice"'
        assert await call("GET", f"/api/v1/repositories/{team_b}/jobs", alice) == (
            403,
            {
                "error": f'{user_a} cannot get resource "jobrepositories" in API group '
                f'"gitops.trainops.dev" in the namespace "{team_b}"'
            },
        )
        for method, path, words in (
            ("POST", f"/api/v1/repositories/{team_b}/jobs/sync", 'cannot patch resource "jobr'),
            ("POST", f"/api/v1/repositories/{team_b}/jobs/refresh", "cannot patch resource"),
            ("GET", f"/api/v1/jobs/{team_b}/{TF}/train", f'cannot get resource "{TF}"'),
            ("POST", f"/api/v1/jobs/{team_b}/{TF}/train/pause", f'cannot patch resource "{TF}"'),
            ("DELETE", f"/api/v1/repositories/{team_b}/jobs", "cannot delete resource"),
        ):
            status, body = await call(method, path, alice)
            assert status == 403 and list(body) == ["error"], (path, body)
            assert body["error"].startswith(user_a) and words in body["error"], body
        status, body = await call("DELETE", f"/api/v1/jobs/{team_a}/{TF}/scratch", bob)
        assert status == 403 and f'cannot delete resource "{TF}"' in body["error"]
        repo_b = await admin.get(JOB_REPOSITORIES, "jobs", team_b)
        assert not set(repo_b["metadata"].get("annotations") or {}) & {
            triggers.SYNC_REQUESTED_AT,
            triggers.REFRESH_REQUESTED_AT,
        }
        assert (await admin.get(resources.TFJOBS, "train", team_b))["spec"]["runMode"] == {
            "pause": {"enabled": False}
        }

        # Their own: allowed by their review, done with the service's identity (its RBAC).
        status, body = await call("GET", f"/api/v1/jobs/{team_a}/{TF}/train", alice)
        assert status == 200, body
        assert body["job"]["metadata"]["name"] == "train"
        assert [p["name"] for p in body["pods"]] == ["train-worker-0"]
        assert isinstance(body["events"], list)
        logs = f"/api/v1/jobs/{team_a}/{TF}/train/logs?pod=train-worker-0"
        async with http.get(logs, headers={"Authorization": f"Bearer {alice}"}) as response:
            assert response.status == 200, await response.text()  # a refusal would be a 502
            assert await response.text() == ""
        status, body = await call("GET", logs, bob)
        assert status == 403 and body["error"].startswith(
            f'User "system:serviceaccount:{team_b}:bob"'
        )
        status, body = await call("POST", f"/api/v1/jobs/{team_a}/{TF}/train/pause", alice)
        assert status == 202, body
        job = await admin.get(resources.TFJOBS, "train", team_a)
        assert job["spec"]["runMode"]["pause"]["enabled"] is True
        status, body = await call("DELETE", f"/api/v1/jobs/{team_a}/{TF}/scratch", alice)
        assert status == 202, body
        assert await aeventually(
            lambda: _gone(admin, resources.TFJOBS, "scratch", team_a), timeout=30
        )
        status, body = await call("POST", f"/api/v1/repositories/{team_a}/jobs/refresh", alice)
        assert status == 202, body
        repo_a = await admin.get(JOB_REPOSITORIES, "jobs", team_a)
        assert triggers.REFRESH_REQUESTED_AT in repo_a["metadata"]["annotations"]

        # The dashboard, logged in with a cookie: Alice's namespace, not Bob's.
        async with http.get("/", headers={"Cookie": f"trainops-token={alice}"}) as page:
            text = await page.text()
            assert page.status == 200
        assert team_a in text and team_b not in text
        async with http.get("/", allow_redirects=False) as page:
            assert page.status == 303 and page.headers["Location"].startswith("/login")
    log = one.process.text()
    assert not refusals(log), log


async def _gone(client: Client, resource: Any, name: str, namespace: str) -> bool:
    return await get_or_none(client, resource, name, namespace) is None


# -- two replicas -------------------------------------------------------------------------------


async def test_a_sync_and_a_refresh_asked_of_the_standby_are_carried_out_by_the_leader(
    admitting: Process,
    served: tuple[Remote, str],
    replicas: Start,
    admin: Client,
    tenants: Callable[[str], Awaitable[str]],
) -> None:
    ns = await tenants("team")
    alice = await team_token(admin, ns, "alice")
    bearer = {"Authorization": f"Bearer {alice}"}
    remote, url = served
    first = remote.commit("a job", {"first.yaml": tf_job_yaml("first")})
    async with aiohttp.ClientSession() as http:
        leader = await replicas("leader")
        await aeventually(leader.leads, timeout=30)
        standby = await replicas("standby")
        await aeventually(lambda: ready(http, standby), timeout=30)
        # Manual (no automated sync) and polled hourly: only the requests explain what happens.
        body = repository(ns, url, interval="1h", serviceAccountName="deployer")
        del body["spec"]["syncPolicy"]["automated"]
        await admin.create(JOB_REPOSITORIES, body)
        await wait_status(
            admin,
            ns,
            lambda st: (
                st.get("sync", {}).get("revision") == first and st["sync"]["status"] == "OutOfSync"
            ),
            timeout=60,
        )
        assert await get_or_none(admin, resources.TFJOBS, "first", ns) is None

        async with http.post(
            f"{standby.url}/api/v1/repositories/{ns}/jobs/sync", headers=bearer
        ) as r:
            assert r.status == 202, await r.text()
        st = await wait_status(admin, ns, synced(first), timeout=60)
        assert await get_or_none(admin, resources.TFJOBS, "first", ns) is not None
        asked = (await admin.get(JOB_REPOSITORIES, "jobs", ns))["metadata"]["annotations"]
        assert st[triggers.HANDLED]["syncRequestedAt"] == asked[triggers.SYNC_REQUESTED_AT]

        second = remote.commit("another job", {"second.yaml": tf_job_yaml("second")})
        async with http.post(
            f"{standby.url}/api/v1/repositories/{ns}/jobs/refresh", headers=bearer
        ) as r:
            assert r.status == 202, await r.text()
        st = await wait_status(
            admin, ns, lambda st: st.get("sync", {}).get("revision") == second, timeout=60
        )
        assert st["sync"]["status"] == "OutOfSync"  # a refresh compares; it does not sync
        assert await get_or_none(admin, resources.TFJOBS, "second", ns) is None
    assert holds(await holder(admin), leader)
    assert not standby.leads(), standby.process.text()
    for one in (leader, standby):
        assert not refusals(one.process.text()), one.process.text()


JOBS = 120
"""Enough that the sync takes a few seconds through the webhook: time to kill the leader in it."""


async def test_a_leader_killed_mid_sync_is_taken_over_in_the_lease_time_and_nothing_applied_twice(
    admitting: Process,
    served: tuple[Remote, str],
    replicas: Start,
    admin: Client,
    tenants: Callable[[str], Awaitable[str]],
) -> None:
    ns = await tenants("team")
    remote, url = served
    names = [f"job-{i:03d}" for i in range(JOBS)]
    sha = remote.commit("many jobs", {f"jobs/{n}.yaml": tf_job_yaml(n) for n in names})

    async def live() -> dict[str, dict[str, Any]]:
        items = (await admin.list(resources.TFJOBS, ns))["items"]
        return {j["metadata"]["name"]: j["metadata"] for j in items}

    async with aiohttp.ClientSession() as http:
        leader = await replicas("leader")
        await aeventually(leader.leads, timeout=30)
        standby = await replicas("standby")
        await aeventually(lambda: ready(http, standby), timeout=30)
        body = repository(
            ns,
            url,
            automated=AUTOMATED,
            serviceAccountName="deployer",
            interval="1h",
        )
        await admin.create(JOB_REPOSITORIES, body)

        async def partly_applied() -> bool:
            return 0 < len(await live()) < JOBS // 2

        await aeventually(partly_applied, timeout=60, interval=0.05)
        leader.process.kill()
        killed = time.monotonic()

        # What the dead leader applied: settled once two lists a moment apart agree, while
        # its Lease has not expired (the standby cannot have applied anything yet).
        seen: list[dict[str, dict[str, Any]]] = []

        async def settled() -> dict[str, dict[str, Any]] | bool:
            seen.append(await live())
            return seen[-1] if len(seen) > 1 and seen[-1] == seen[-2] else False

        before = await aeventually(settled, timeout=10, interval=0.5)
        assert holds(await holder(admin), leader), "the Lease moved before the snapshot"
        assert 0 < len(before) < JOBS

        async def taken_over() -> bool:
            return holds(await holder(admin), standby)

        await aeventually(taken_over, timeout=LEASE.lease_duration + 15, interval=0.1)
        took = time.monotonic() - killed
        st = await wait_status(admin, ns, synced(sha), timeout=120)
    assert took <= LEASE.lease_duration + LEASE.retry_period + 2, took

    after = await live()
    assert sorted(after) == names
    # Created once: the jobs the dead leader created were not written again (same uid, same
    # resourceVersion: the new leader found them Synced and left them out of its sync), no
    # job's spec was ever written twice (generation 1), and the new leader's sync created
    # exactly the others.
    for name, meta in before.items():
        assert (after[name]["uid"], after[name]["resourceVersion"]) == (
            meta["uid"],
            meta["resourceVersion"],
        ), name
    assert {n: m["generation"] for n, m in after.items()} == dict.fromkeys(names, 1)
    results = {r["name"]: r["message"] for r in st["operationState"]["syncResult"]["resources"]}
    assert results == dict.fromkeys(sorted(set(names) - set(before)), "created")
    assert st["operationState"]["message"] == f"{JOBS - len(before)} applied"
    log = standby.process.text()
    assert "became leader of lease" in log
    assert not refusals(log), log
    assert not refusals(leader.process.text()), leader.process.text()
