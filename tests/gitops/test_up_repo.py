"""`trainops up --repo file:///…` end to end: a subprocess, a real git remote, kubectl-free
checks through the API (the kubernetes client on up's kubeconfig)."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.gitops.conftest import Remote, tf_job_yaml
from tests.support import upcluster
from tests.up.conftest import Up, eventually
from tests.up.conftest import up as up
from trainops.commands.up_gitops import (
    repository_candidates,
    repository_name,
    same_source,
    source_key,
)

QUICK_JOB = tf_job_yaml("quick").replace('"sleep 3600"', '"echo done"')


def _custom(up: Up) -> object:
    from kubernetes import client, config

    return client.CustomObjectsApi(config.new_client_from_config(config_file=str(up.kubeconfig)))


def test_up_with_a_repo_syncs_its_jobs_runs_them_and_follows_new_commits(
    up: Up, tmp_path: Path
) -> None:
    remote = Remote(tmp_path / "remote")
    remote.commit("a quick job", {"jobs/quick.yaml": QUICK_JOB})
    up.start(args=("--repo", remote.url, "--path", "jobs"))
    banner = "".join(up.output)
    assert f"gitops      default/origin syncing {remote.url} path jobs" in banner
    api = _custom(up)

    def job(name: str) -> dict:  # type: ignore[type-arg]
        return api.get_namespaced_custom_object(  # type: ignore[attr-defined,no-any-return]
            "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", name
        )

    # Synced, and the controller runs it to the end.
    assert eventually(lambda: job("quick")["status"]["phase"] == "Succeeded", timeout=40)
    second = remote.commit("another", {"jobs/next.yaml": tf_job_yaml("next")})
    assert eventually(lambda: job("next")["metadata"]["name"] == "next", timeout=20)

    def repo() -> dict:  # type: ignore[type-arg]
        return api.get_namespaced_custom_object(  # type: ignore[attr-defined,no-any-return]
            "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories", "origin"
        )

    assert eventually(lambda: repo()["status"]["sync"]["revision"] == second, timeout=20)
    assert any("gitops default/origin: synced" in line for line in up.output)


def test_repository_names_are_dns_safe_base_names() -> None:
    assert repository_name("https://host/org/Train_Jobs.git") == "train-jobs"
    assert repository_name("git@github.com:org/jobs.git") == "jobs"
    assert repository_name("file:///tmp/x/origin.git/") == "origin"
    assert repository_name("https://host/___") == "repo"


def test_up_with_two_urls_of_one_base_name_keeps_both_repositories_and_both_jobs(
    up: Up, tmp_path: Path
) -> None:
    """`up --repo file:///a/…/origin.git`, then `--repo file:///b/…/origin.git` on the same data
    dir: two JobRepositories, neither repointed, and the first's job is not pruned."""
    first, second = Remote(tmp_path / "a"), Remote(tmp_path / "b")
    first.commit("a", {"a.yaml": tf_job_yaml("a")})
    second.commit("b", {"b.yaml": tf_job_yaml("b")})
    up.start(args=("--repo", first.url))
    api = _custom(up)

    def jobs() -> set[str]:
        items = api.list_namespaced_custom_object(  # type: ignore[attr-defined]
            "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs"
        )["items"]
        return {i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")}

    assert eventually(lambda: "a" in jobs(), timeout=30)
    uid_a = api.get_namespaced_custom_object(  # type: ignore[attr-defined]
        "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", "a"
    )["metadata"]["uid"]
    up.stop()
    up.start(args=("--repo", second.url))
    other = repository_candidates(second.url, None)[1]
    assert f"gitops      default/{other} syncing {second.url}" in "".join(up.output)
    assert eventually(lambda: "b" in jobs(), timeout=30)

    def repos() -> dict[str, str]:
        items = api.list_namespaced_custom_object(  # type: ignore[attr-defined]
            "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories"
        )["items"]
        return {i["metadata"]["name"]: i["spec"]["repoURL"] for i in items}

    assert repos() == {"origin": first.url, other: second.url}
    assert eventually(
        lambda: all(
            (r.get("status") or {}).get("sync", {}).get("status") == "Synced"
            for r in api.list_namespaced_custom_object(  # type: ignore[attr-defined]
                "gitops.trainops.dev", "v1alpha1", "default", "jobrepositories"
            )["items"]
        ),
        timeout=30,
    )
    assert jobs() == {"a", "b"}
    assert (
        api.get_namespaced_custom_object(  # type: ignore[attr-defined]
            "batch.tensorstack.dev", "v1beta1", "default", "tensorflowtrainingjobs", "a"
        )["metadata"]["uid"]
        == uid_a
    )
    # An explicit --repo-name that follows another URL is refused, not repointed.
    up.stop()
    refused = subprocess.run(
        [sys.executable, "-m", "trainops", "up", "--data-dir", str(up.data_dir),
         *upcluster.up_args(up.external), "--repo", second.url, "--repo-name", "origin"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert f"--repo-name: default/origin follows {first.url}; it is not repointed at" in (
        refused.stderr
    )
    assert "Traceback" not in refused.stderr


SOURCES = [
    (("https://h/org/jobs.git", None), ("https://h/org/jobs.git", ".")),
    (("https://h/org/jobs.git/", "./jobs/"), ("https://h/org/jobs.git", "jobs")),
    (("file:///a/jobs.git", "a//b/../c"), ("file:///a/jobs.git", "a/c")),
    (("file:///a/jobs.git", ""), ("file:///a/jobs.git", ".")),
]


def test_a_source_is_its_url_and_normalized_path() -> None:
    for (url, path), expected in SOURCES:
        assert source_key(url, path) == expected, (url, path)


def test_each_distinct_source_gets_its_own_fallback_name() -> None:
    a = repository_candidates("file:///a/jobs.git", None)
    b = repository_candidates("file:///b/jobs.git", None)
    c = repository_candidates("file:///a/jobs.git", "sub")
    assert a[0] == b[0] == c[0] == "jobs"
    assert len({a[1], b[1], c[1]}) == 3 and all(n.startswith("jobs-") for n in (a[1], b[1]))
    assert repository_candidates("file:///a/jobs.git/", ".") == a
    long = repository_candidates("https://h/" + "x" * 80 + ".git", None)
    assert len(long[0]) == 63 and len(long[1]) <= 63


def test_same_source_compares_url_and_path_not_revision() -> None:
    repo = {"spec": {"repoURL": "file:///a/jobs.git", "path": "jobs", "targetRevision": "x"}}
    assert same_source(repo, "file:///a/jobs.git/", "./jobs")
    assert not same_source(repo, "file:///b/jobs.git", "jobs")
    assert not same_source(repo, "file:///a/jobs.git", None)


def _repo_cli(up: Up, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainops", "repo", *args, "--data-dir", str(up.data_dir)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_signed_push_webhook_applies_a_commit_long_before_the_next_poll(
    up: Up, tmp_path: Path
) -> None:
    """`up --git-webhook-secret`: a GitHub-style push signed with the Secret's key makes up
    fetch at once (the poll interval is 10 s); `trainops repo` sees the new revision Synced."""
    remote = Remote(tmp_path / "remote")
    first = remote.commit("one job", {"jobs/a.yaml": tf_job_yaml("a")})
    up.start()
    secret = "s3cret"
    made = subprocess.run(
        ["kubectl", "--kubeconfig", str(up.kubeconfig), "create", "secret", "generic",
         "hooks", "--from-literal=secret=" + secret],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    up.stop()
    up.start(args=("--repo", remote.url, "--path", "jobs", "--git-webhook-secret", "default/hooks"))
    api = json.loads((up.data_dir / "api.json").read_text())["url"]

    def listed() -> str | bool:
        out = _repo_cli(up, "list")
        return out.stdout if first[:7] in out.stdout and "Synced" in out.stdout else False

    table = eventually(listed, timeout=30)
    assert table.splitlines()[0].split()[:4] == ["NAMESPACE", "NAME", "SYNC", "HEALTH"]

    second = remote.commit("a second job", {"jobs/b.yaml": tf_job_yaml("b")})
    body = json.dumps(
        {"ref": "refs/heads/main", "after": second, "repository": {"clone_url": remote.url}}
    ).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()

    def post(sig: str) -> tuple[int, dict]:  # type: ignore[type-arg]
        request = urllib.request.Request(
            f"{api}/api/v1/webhooks/git",
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "X-GitHub-Event": "push",
                "X-Hub-Signature-256": sig,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    assert post("sha256=" + "0" * 64)[0] == 401
    started = time.monotonic()
    status, answer = post(signature)
    assert (status, answer) == (202, {"refreshed": 1})

    def synced() -> bool:
        out = _repo_cli(up, "get", "origin")
        return second[:7] in out.stdout and "Synced" in out.stdout

    eventually(synced, timeout=15)
    assert time.monotonic() - started < 8, "applied by the push, not by the 10 s poll"
    diff = _repo_cli(up, "diff", "origin")
    assert diff.returncode == 0, diff.stdout + diff.stderr
