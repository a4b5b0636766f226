"""Where `trainops repo` looks for the GitOps API, and the service-proxy request it builds
(`trainops.commands.repo_target`, pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainops.commands.repo_target import Choice, choose, cookie_safe, proxy_request

DATA = Path("/home/u/.local/share/trainops")
LOCAL = "http://127.0.0.1:8080"
KIND = "https://127.0.0.1:6443"
UP_SERVER = "https://127.0.0.1:43001"


def _choose(**given: Any) -> Choice | str:
    args: dict[str, Any] = {
        "server": None,
        "token": None,
        "kubeconfig": None,
        "data_dir": DATA,
        "data_dir_given": False,
        "local_url": None,
        "local_token": None,
        "env_kubeconfig": None,
        "env_server": None,
        "local_server": None,
        "default_kubeconfig_exists": False,
        "in_cluster": False,
    }
    return choose(**(args | given))


NO_UP = f"no trainops API is running for {DATA} (no api.json there)"
CASES = {
    "--server first, with its token": (
        {"server": "http://h:1", "token": "t", "local_url": LOCAL, "kubeconfig": Path("k")},
        Choice(server="http://h:1", token="t", why="--server http://h:1"),
    ),
    "--kubeconfig: the proxy, even with up running": (
        {"kubeconfig": Path("/k"), "local_url": LOCAL, "local_token": "up"},
        Choice(proxy=True, kubeconfig=Path("/k"), why="--kubeconfig /k"),
    ),
    "a running up, with its token": (
        {"local_url": LOCAL, "local_token": "up", "default_kubeconfig_exists": True},
        Choice(server=LOCAL, token="up", why=f"trainops up of {DATA}"),
    ),
    "a running up whose own kubeconfig is $KUBECONFIG": (
        {
            "local_url": LOCAL,
            "local_token": "up",
            "env_kubeconfig": "/d/kubeconfig",
            "env_server": UP_SERVER,
            "local_server": UP_SERVER,
        },
        Choice(server=LOCAL, token="up", why=f"trainops up of {DATA}"),
    ),
    "a running up, but $KUBECONFIG names another cluster": (
        {
            "local_url": LOCAL,
            "env_kubeconfig": "/kind",
            "env_server": KIND,
            "local_server": UP_SERVER,
        },
        Choice(
            proxy=True,
            why=f"$KUBECONFIG ({KIND}: not the cluster of trainops up in {DATA})",
        ),
    ),
    "the kubeconfig in use is an up's own (DATA_DIR/kubeconfig): that up": (
        {
            "beside_kubeconfig": (Path("/tmp/x"), "http://127.0.0.1:9", "its"),
            "env_kubeconfig": "/tmp/x/kubeconfig",
            "env_server": UP_SERVER,
        },
        Choice(server="http://127.0.0.1:9", token="its", why="trainops up of /tmp/x"),
    ),
    "--kubeconfig of an up: that up, not a proxy it does not have": (
        {
            "kubeconfig": Path("/tmp/x/kubeconfig"),
            "beside_kubeconfig": (Path("/tmp/x"), "http://127.0.0.1:9", "its"),
            "token": "mine",
        },
        Choice(server="http://127.0.0.1:9", token="mine", why="trainops up of /tmp/x"),
    ),
    "--data-dir names an up: it, whatever $KUBECONFIG says": (
        {
            "data_dir_given": True,
            "local_url": LOCAL,
            "env_kubeconfig": "/kind",
            "env_server": KIND,
            "local_server": UP_SERVER,
        },
        Choice(server=LOCAL, why=f"trainops up of {DATA}"),
    ),
    "--data-dir without an up: no guessing": (
        {"data_dir_given": True, "env_kubeconfig": "/kind", "env_server": KIND},
        NO_UP,
    ),
    "only $KUBECONFIG (the issue's case)": (
        {"env_kubeconfig": "/kind", "env_server": KIND, "token": "mine"},
        Choice(proxy=True, token="mine", why=f"{NO_UP}; $KUBECONFIG"),
    ),
    "in a pod": ({"in_cluster": True}, Choice(proxy=True, why=f"{NO_UP}; in-cluster credentials")),
    "only ~/.kube/config": (
        {"default_kubeconfig_exists": True},
        Choice(proxy=True, why=f"{NO_UP}; ~/.kube/config"),
    ),
    "nothing at all": (
        {},
        f"{NO_UP}, and no kubeconfig to find one in a cluster ($KUBECONFIG unset, no "
        "~/.kube/config)",
    ),
}


@pytest.mark.parametrize(("given", "want"), CASES.values(), ids=CASES.keys())
def test_the_api_is_found_in_this_order(given: dict[str, Any], want: Choice | str) -> None:
    assert _choose(**given) == want


def test_the_service_proxy_path_and_the_token_as_the_apis_login_cookie() -> None:
    path, headers = proxy_request("/api/v1/repositories/team-a/jobs/sync", "eyJhbGci.eyJzdWIi.sig")
    assert path == (
        "/api/v1/namespaces/trainops-system/services/http:trainops-gitops:http/proxy"
        "/api/v1/repositories/team-a/jobs/sync"
    )
    # Not Authorization: kube-apiserver removes it once it authenticated the request.
    assert headers == {"Cookie": "trainops-token=eyJhbGci.eyJzdWIi.sig"}
    assert proxy_request("/api/v1/repositories", None)[1] == {}


@pytest.mark.parametrize(
    ("token", "safe"),
    [
        ("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln-_", True),
        ("abcdef.0123456789abcdef", True),  # a bootstrap token
        ("", False),
        ("a b", False),
        ("a;b=c", False),
        ('a"b', False),
        ("a\nb", False),
        ("é", False),
    ],
)
def test_only_a_token_a_cookie_can_carry_is_sent(token: str, safe: bool) -> None:
    assert cookie_safe(token) is safe
