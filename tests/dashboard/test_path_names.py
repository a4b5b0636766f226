"""Names that are path steps (`.`, `..`) in a route's or a query's name never reach the API
server: the backend's URL would resolve them (`…/tensorflowtrainingjobs/.` is the collection,
so a DELETE of the job `.` was a DELETE of every job of the namespace, refused only where the
service lacks `deletecollection`; `…/pods/..` read the Namespace object). Over loopback against
the session's API server, which, like the embedded one under `trainops up`, does no RBAC.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from yarl import URL

import dashboard
from gitops.api import routes as api
from gitops.runtime.manager import GitOpsReconciler
from kube import resources
from kube.client import Client
from tests.gitops import conftest as gitops_fixtures
from tests.support.jobs import tf_job

crds = gitops_fixtures.crds
kclient = gitops_fixtures.kclient
repo_crd = gitops_fixtures.repo_crd
gitops = gitops_fixtures.gitops


@pytest.fixture
async def site(gitops: GitOpsReconciler, kclient: Client) -> AsyncIterator[TestClient[Any, Any]]:
    app = api.create_app(gitops, token=None, webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=gitops, client=kclient)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield client


async def test_dot_names_are_404_and_touch_nothing(
    site: TestClient[Any, Any], kclient: Client, namespace: str
) -> None:
    for name in ("one", "two"):
        body = tf_job(name=name)
        body["metadata"]["namespace"] = namespace
        await kclient.create(resources.TFJOBS, body)
    jobs = f"/api/v1/jobs/{namespace}/tensorflowtrainingjobs"
    for method, path in [
        ("DELETE", f"{jobs}/%2E"),
        ("DELETE", f"{jobs}/%2E%2E"),
        ("POST", f"{jobs}/%2E/pause"),
        ("GET", f"{jobs}/%2E%2E"),
        ("GET", f"/api/v1/repositories/{namespace}/%2E%2E"),
        ("DELETE", f"/api/v1/repositories/{namespace}/%2E"),
        ("POST", f"/api/v1/repositories/{namespace}/%2E/sync"),
        ("GET", f"/jobs/{namespace}/tensorflowtrainingjobs/%2E"),
        ("GET", "/api/v1/jobs/%2E%2E/tensorflowtrainingjobs/one"),
    ]:
        # As curl sends it: the test client's URL would resolve the `.` itself.
        url = URL(str(site.make_url("")).rstrip("/") + path, encoded=True)
        response = await site.session.request(method, url)
        assert response.status == 404, (method, path, await response.text())
        if path.startswith("/api/"):
            assert "is not a name" in (await response.json())["error"], (method, path)
    logs = await site.get(f"{jobs}/one/logs", params={"pod": ".."})
    assert logs.status == 404
    assert (await logs.json())["error"] == f"pod '..' is not a replica of {namespace}/one"
    left = await kclient.list(resources.TFJOBS, namespace)
    assert sorted(j["metadata"]["name"] for j in left["items"]) == ["one", "two"]


def test_the_client_refuses_a_path_step_as_a_name() -> None:
    assert resources.name_problem("mnist") is None
    assert resources.name_problem("a.b") is None
    for bad, problem in [
        (".", "'.' is not a name"),
        ("..", "'..' is not a name"),
        ("", "it is empty"),
        ("a/b", "a name may not contain '/'"),
        ("a%2F", "a name may not contain '%'"),
    ]:
        assert resources.name_problem(bad) == problem
        with pytest.raises(ValueError, match="invalid name or namespace"):
            resources.TFJOBS.object_path(bad or "x", bad or ".")
