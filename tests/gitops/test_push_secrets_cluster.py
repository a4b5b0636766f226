"""A JobRepository's own push secret (`spec.push.secretRef`), end to end: the reconciler's Hub
behind the real push hook, the Secrets read as the repository's ServiceAccount.

Four repositories of one namespace follow one URL: `own` names a Secret its account may read,
`forbidden` one it may not (the API server's RBAC: reference tier only), `missing` one that
does not exist, `plain` none. The service has a shared secret too.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gitops.api import routes as api
from gitops.engine.spec import read_spec
from gitops.engine.tenancy import Boundaries
from gitops.engine.urls import normalize_repo_url
from gitops.runtime.manager import UNPROVEN_PUSHES, GitOpsReconciler
from gitops.runtime.pushsecrets import TTL, PushSecrets
from gitops.source.pushhooks import PushCheck, PushEvent, proof_of
from kube import resources
from kube.client import Client
from tests.gitops.conftest import Remote, create_repository, repository, started_reconciler
from tests.support.cluster import aeventually
from tests.support.tenants import service_account

REAL_RBAC = pytest.mark.skipif(
    not os.environ.get("TRAINOPS_TEST_KUBECONFIG"),
    reason="the embedded API server does not enforce RBAC (run on the reference cluster: "
    "hack/reference-tests)",
)
SHARED = b"shared-by-every-tenant"
VALUES = {"push-a": b"team-a-own-secret", "push-b": b"a-secret-deployer-may-not-read"}
REPOSITORIES = {"own": "push-a", "forbidden": "push-b", "missing": "no-such-secret", "plain": None}


def github(payload: bytes, secret: bytes | None) -> dict[str, str]:
    headers = {"X-GitHub-Event": "push"}
    if secret is not None:
        mac = hmac.new(secret, payload, hashlib.sha256).hexdigest()
        headers["X-Hub-Signature-256"] = "sha256=" + mac
    return headers


@pytest.fixture
async def hub(
    kclient: Client, repo_crd: None, namespace: str, remote: Remote, tmp_path: Path
) -> AsyncIterator[GitOpsReconciler]:
    """The repositories and their Secrets, and a reconciler that only watches: the test
    drives the push hook, nothing is fetched."""
    await service_account(
        kclient,
        namespace,
        "deployer",
        [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": ["push-a"],
                "verbs": ["get"],
            }
        ],
    )
    for name, value in VALUES.items():
        data = {"token": base64.b64encode(value).decode()}
        await kclient.create(
            resources.SECRETS, {"metadata": {"name": name, "namespace": namespace}, "data": data}
        )
    for name, secret in REPOSITORIES.items():
        spec: dict[str, Any] = {"serviceAccountName": "deployer"}
        if secret is not None:
            spec["push"] = {"secretRef": {"name": secret}}
        await create_repository(kclient, repository(namespace, remote.url, name=name, **spec))
    running = await started_reconciler(
        kclient,
        namespace,
        tmp_path / "cache",
        Boundaries(allow_local_repos=True),
        reconcile=False,
    )
    try:
        await aeventually(lambda: len(running.repositories()) == 4, timeout=15)
        yield running
    finally:
        await running.manager.stop()


def payload_for(remote: Remote) -> bytes:
    return json.dumps(
        {"ref": "refs/heads/main", "after": "a" * 40, "repository": {"clone_url": remote.url}}
    ).encode()


async def pushed(
    running: GitOpsReconciler, remote: Remote, secret: bytes | None
) -> tuple[list[str], PushCheck]:
    payload = payload_for(remote)
    check = PushCheck(proof_of(github(payload, secret)), payload, SHARED)
    event = PushEvent("github", (normalize_repo_url(remote.url),), "main", "a" * 40)
    return await running.push(event, check), check


async def test_a_push_proving_a_repositorys_own_secret_triggers_only_that_repository(
    hub: GitOpsReconciler, namespace: str, remote: Remote
) -> None:
    keys, check = await pushed(hub, remote, VALUES["push-a"])
    assert keys == [f"{namespace}/own"]
    assert check.refusal() is None
    # The shared secret triggers the repository that names none, not the others.
    keys, check = await pushed(hub, remote, SHARED)
    assert keys == [f"{namespace}/plain"]
    # Unsigned, or signed with a secret nobody's account reads: nothing, and a 401.
    for secret in (None, b"guess", b""):
        keys, check = await pushed(hub, remote, secret)
        assert keys == []
        assert check.refusal() is not None


async def test_through_the_push_hook_the_answer_is_a_count_or_a_401_naming_nothing(
    hub: GitOpsReconciler, namespace: str, remote: Remote
) -> None:
    app = api.create_app(hub, token=None, webhook_secret=SHARED, allow_remote_writes=False)
    payload = payload_for(remote)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        answers = []
        for secret in (VALUES["push-a"], SHARED, None, b"guess"):
            response = await client.post(
                "/api/v1/webhooks/git", data=payload, headers=github(payload, secret)
            )
            answers.append((response.status, await response.text()))
    assert [status for status, _ in answers] == [202, 202, 401, 401]
    assert [json.loads(text) for _, text in answers] == [
        {"refreshed": 1},
        {"refreshed": 1},
        {"error": "missing signature"},
        {"error": "signature does not match"},
    ]
    for _, text in answers:
        for word in (namespace, "own", "plain", "push-a", "forbidden"):
            assert word not in text


async def test_pushes_proving_no_secret_trigger_a_repository_at_most_its_budget(
    hub: GitOpsReconciler, namespace: str, remote: Remote
) -> None:
    """A flood naming a repository's URL, unsigned, to a service with no shared secret: it
    triggers `plain` (which asks no secret) in a burst, then about a round a second — while
    pushes proving `own`'s secret trigger `own` every time."""
    payload = payload_for(remote)
    event = PushEvent("github", (normalize_repo_url(remote.url),), "main", "a" * 40)
    loop = asyncio.get_running_loop()
    started = loop.time()
    unproven = [await hub.push(event, PushCheck(proof_of(github(payload, None)), payload, None))]
    for _ in range(19):
        unproven.append(
            await hub.push(event, PushCheck(proof_of(github(payload, None)), payload, None))
        )
    elapsed = loop.time() - started
    burst, qps = UNPROVEN_PUSHES[1], UNPROVEN_PUSHES[0]
    assert unproven[:burst] == [[f"{namespace}/plain"]] * burst
    triggered = sum(1 for keys in unproven if keys)
    assert triggered <= burst + int(elapsed * qps) + 1, (triggered, elapsed)
    assert [] in unproven
    for _ in range(20):
        keys, _check = await pushed(hub, remote, VALUES["push-a"])
        assert keys == [f"{namespace}/own"]


@REAL_RBAC
async def test_a_secret_the_repositorys_account_may_not_read_proves_nothing(
    hub: GitOpsReconciler, remote: Remote
) -> None:
    """The Secret is read as the repository's ServiceAccount: a tenant cannot make the service
    use a Secret their account may not read (here, push-b), even knowing its value."""
    keys, check = await pushed(hub, remote, VALUES["push-b"])
    assert keys == []
    assert check.refusal() is not None


async def test_a_rotated_secret_is_read_again_once_the_kept_value_is_ttl_old(
    hub: GitOpsReconciler, kclient: Client, namespace: str
) -> None:
    """At most one GET per repository and `TTL`: a new value proves pushes once that passed."""
    now = [1000.0]
    secrets = PushSecrets(kclient, Boundaries(allow_local_repos=True), clock=lambda: now[0])
    obj = hub.repos.get(namespace, "own")
    assert obj is not None
    spec = read_spec(obj)
    assert await secrets.value(obj, spec) == VALUES["push-a"]
    rotated = {"token": base64.b64encode(b"rotated").decode()}
    await kclient.patch(resources.SECRETS, "push-a", {"data": rotated}, namespace)
    now[0] += TTL - 0.5
    assert await secrets.value(obj, spec) == VALUES["push-a"]  # kept
    now[0] += 1.0
    assert await secrets.value(obj, spec) == b"rotated"
    plain = hub.repos.get(namespace, "plain")
    assert plain is not None
    assert await secrets.value(plain, read_spec(plain)) is None  # names none: the shared rule
