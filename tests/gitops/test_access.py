"""The authorization decisions of the HTTP API and dashboard (gitops/api/rules.py), as tables: which
access review each route needs, the API server's wording of a denial, the review bodies both
ways, the token's sources and the answers' cache."""

from __future__ import annotations

from typing import Any

import pytest

import dashboard
from dashboard.app import RULES as DASHBOARD_RULES
from gitops.api import routes as api
from gitops.api import rules as access
from gitops.api.rules import (
    API_RULES,
    GROUP,
    JOB_GROUP,
    LISTED,
    PUBLIC,
    Check,
    Need,
    TtlCache,
    User,
)

ALICE = User("alice", uid="u-1", groups=("team-a", "system:authenticated"))
TF = "tensorflowtrainingjobs"


def rule_checks(rules: dict[str, access.Rule], route: str, **params: str) -> Any:
    rule = rules[route]
    return rule if isinstance(rule, str) else access.needs(rule, params)


ALL_RULES = {**API_RULES, **DASHBOARD_RULES}


@pytest.mark.parametrize(
    ("route", "params", "expected"),
    [
        ("git-webhook", {}, PUBLIC),
        ("dashboard-static", {}, PUBLIC),
        ("dashboard-login", {}, PUBLIC),
        ("dashboard-login-submit", {}, PUBLIC),
        ("dashboard-logout", {}, PUBLIC),
        ("repositories", {}, LISTED),
        ("jobs", {}, LISTED),
        ("stream", {}, LISTED),
        ("dashboard-front", {}, LISTED),
        (
            "repository-get",
            {"namespace": "team-a", "name": "jobs"},
            [Check("get", GROUP, "jobrepositories", "team-a", name="jobs")],
        ),
        (
            "repository-diff",
            {"namespace": "team-a", "name": "jobs"},
            [Check("get", GROUP, "jobrepositories", "team-a", name="jobs")],
        ),
        (
            "dashboard-repo",
            {"namespace": "team-a", "name": "jobs"},
            [Check("get", GROUP, "jobrepositories", "team-a", name="jobs")],
        ),
        (
            "repository-sync",
            {"namespace": "team-a", "name": "jobs"},
            [Check("patch", GROUP, "jobrepositories", "team-a", name="jobs")],
        ),
        (
            "repository-refresh",
            {"namespace": "team-b", "name": "r"},
            [Check("patch", GROUP, "jobrepositories", "team-b", name="r")],
        ),
        (
            "repository-delete",
            {"namespace": "team-a", "name": "jobs"},
            [Check("delete", GROUP, "jobrepositories", "team-a", name="jobs")],
        ),
        (
            "dashboard-job",
            {"namespace": "team-a", "plural": TF, "name": "m"},
            [Check("get", JOB_GROUP, TF, "team-a", name="m")],
        ),
        (
            # The job's curves: whoever may read the job may read them (docs/PROGRESS.md).
            "dashboard-job-progress",
            {"namespace": "team-a", "plural": TF, "name": "m"},
            [Check("get", JOB_GROUP, TF, "team-a", name="m")],
        ),
        (
            "dashboard-job-pause",
            {"namespace": "team-a", "plural": TF, "name": "m"},
            [Check("patch", JOB_GROUP, TF, "team-a", name="m")],
        ),
        (
            "dashboard-job-resume",
            {"namespace": "team-a", "plural": "xgboosttrainingjobs", "name": "x"},
            [Check("patch", JOB_GROUP, "xgboosttrainingjobs", "team-a", name="x")],
        ),
        (
            "dashboard-job-delete",
            {"namespace": "team-a", "plural": TF, "name": "m"},
            [Check("delete", JOB_GROUP, TF, "team-a", name="m")],
        ),
        (
            "dashboard-job-logs",
            {"namespace": "team-a", "plural": TF, "name": "m"},
            [
                Check("get", JOB_GROUP, TF, "team-a", name="m"),
                Check("get", "", "pods", "team-a", subresource="log"),
            ],
        ),
    ],
)
def test_each_route_needs_the_review_of_what_it_reads_or_does(
    route: str, params: dict[str, str], expected: Any
) -> None:
    assert rule_checks(ALL_RULES, route, **params) == expected


async def test_every_route_of_the_app_has_a_rule_so_none_is_open_by_omission() -> None:
    from tests.gitops.test_api import FakeHub

    app = api.create_app(FakeHub(), token=None, webhook_secret=None, allow_remote_writes=False)
    dashboard.install(app, hub=FakeHub(), client=None)  # type: ignore[arg-type]
    names = {r.name for r in app.router.routes() if r.name}
    declared: dict[str, access.Rule] = app[api.RULES]
    assert names == set(declared)
    # Only the signed push hook, the login page and static files go without a token.
    public = {n for n, rule in declared.items() if rule == PUBLIC}
    assert public == {
        "git-webhook",
        "dashboard-static",
        "dashboard-plotly",  # plotly.js from the installed package: a static file too
        "dashboard-login",
        "dashboard-login-submit",
        "dashboard-logout",
    }


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (
            Check("patch", GROUP, "jobrepositories", "team-a", name="jobs"),
            'User "alice" cannot patch resource "jobrepositories" in API group '
            '"gitops.trainops.dev" in the namespace "team-a"',
        ),
        (
            Check("get", "", "pods", "team-b", subresource="log"),
            'User "alice" cannot get resource "pods/log" in API group "" in the namespace "team-b"',
        ),
        (
            Check("list", JOB_GROUP, TF, ""),
            'User "alice" cannot list resource "tensorflowtrainingjobs" in API group '
            '"batch.tensorstack.dev" at the cluster scope',
        ),
    ],
)
def test_a_denial_is_worded_as_the_api_servers(check: Check, message: str) -> None:
    assert access.forbidden_message(ALICE, check) == message


@pytest.mark.parametrize(
    ("authorization", "cookie", "token"),
    [
        ("Bearer abc", None, "abc"),
        ("bearer  abc ", "cookie", "abc"),  # the header wins over the cookie
        (None, "from-cookie", "from-cookie"),
        ("", "from-cookie", "from-cookie"),
        ("Basic dXNlcjpwYXNz", "from-cookie", None),  # another scheme is no token
        ("Bearer ", None, None),
        (None, None, None),
        (None, "  ", None),
    ],
)
def test_the_token_comes_from_the_header_else_the_login_cookie(
    authorization: str | None, cookie: str | None, token: str | None
) -> None:
    assert access.bearer_token(authorization, cookie) == token


@pytest.mark.parametrize(
    ("review", "user"),
    [
        (
            {
                "status": {
                    "authenticated": True,
                    "user": {
                        "username": "system:serviceaccount:team-a:alice",
                        "uid": "9f",
                        "groups": ["system:serviceaccounts", "system:authenticated"],
                        "extra": {"authentication.kubernetes.io/pod-name": ["p"]},
                    },
                }
            },
            User(
                "system:serviceaccount:team-a:alice",
                uid="9f",
                groups=("system:serviceaccounts", "system:authenticated"),
                extra=(("authentication.kubernetes.io/pod-name", ("p",)),),
            ),
        ),
        ({"status": {"authenticated": True, "user": {"username": "bob"}}}, User("bob")),
        ({"status": {"authenticated": False, "error": "invalid bearer token"}}, None),
        ({"status": {"authenticated": True, "user": {"username": ""}}}, None),
        ({"status": {"authenticated": "true", "user": {"username": "x"}}}, None),
        ({}, None),
    ],
)
def test_a_token_review_names_its_user_or_none(review: dict[str, Any], user: User | None) -> None:
    assert access.user_from_review(review) == user


def test_an_access_review_asks_about_the_user_with_groups_uid_and_extra() -> None:
    user = User("alice", uid="u-1", groups=("team-a",), extra=(("scopes", ("a", "b")),))
    body = access.access_review(user, Check("get", "", "pods", "team-a", subresource="log"))
    assert body == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "groups": ["team-a"],
            "uid": "u-1",
            "extra": {"scopes": ["a", "b"]},
            "resourceAttributes": {
                "verb": "get",
                "group": "",
                "resource": "pods",
                "namespace": "team-a",
                "subresource": "log",
            },
        },
    }
    cluster_wide = access.access_review(User("bob"), Check("list", GROUP, "jobrepositories", ""))
    assert cluster_wide["spec"] == {
        "user": "bob",
        "resourceAttributes": {"verb": "list", "group": GROUP, "resource": "jobrepositories"},
    }


def test_a_rule_names_the_urls_job_kind() -> None:
    rule = (Need("delete", JOB_GROUP, "{plural}"),)
    checks = access.needs(rule, {"namespace": "n", "plural": "xgboosttrainingjobs", "name": "x"})
    assert checks == [Check("delete", JOB_GROUP, "xgboosttrainingjobs", "n", name="x")]
    assert access.job_plural("TensorFlowTrainingJob") == TF
    assert access.job_plural("Pod") is None
    assert access.job_plural(None) is None


def test_the_cache_keeps_answers_for_the_ttl_and_at_most_size_of_them() -> None:
    cache: TtlCache[str, bool] = TtlCache(ttl=10.0, size=2)
    cache.put("a", True, now=100.0)
    assert cache.get("a", now=109.9) is True
    assert cache.get("a", now=110.0) is None  # expired, and dropped
    assert len(cache) == 0
    cache.put("a", True, now=200.0)
    cache.put("b", False, now=201.0)
    cache.put("c", True, now=202.0)  # over the size: the oldest ("a") goes
    assert len(cache) == 2
    assert cache.get("a", now=203.0) is None
    assert cache.get("b", now=203.0) is False
    assert cache.get("c", now=199.0) is None  # a clock that went back: not trusted
    with pytest.raises(ValueError):
        TtlCache(ttl=1.0, size=0)
