"""GitOps in the kind cluster (issue #28): deploy/'s two `trainops gitops` replicas syncing
JobRepositories from a Git host that runs as a pod of the cluster (tests/e2e/gitserver.py in
the product image, seeded from ConfigMaps: no registry, no internet), as tenant
ServiceAccounts; a user logging in to the dashboard through `kubectl port-forward` with a
`kubectl create token`; `trainops repo` with nothing but a kubeconfig (the API server's
service proxy); the leader killed in the middle of a sync of 200 jobs.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from tests.e2e.kubectl import KUBECONFIG, PRODUCT_IMAGE, get, kubectl, needs_cluster
from tests.support.cluster import eventually
from tests.support.tenants import DEPLOYER_RULES, team_role

pytestmark = needs_cluster

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "trainops-system"
TF = "tensorflowtrainingjobs"
MANY = 200


def _job(name: str, command: list[str], *, paused: bool = False) -> dict[str, Any]:
    """A small TensorFlowTrainingJob of one worker in the product image (on every node)."""
    spec: dict[str, Any] = {
        "runPolicy": {"backoffLimit": 1, "activeDeadlineSeconds": 600},
        "replicaSpecs": [
            {
                "type": "worker",
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "tensorflow",
                                "image": PRODUCT_IMAGE,
                                "imagePullPolicy": "IfNotPresent",
                                "command": command,
                                "resources": {
                                    "requests": {"cpu": "50m", "memory": "64Mi"},
                                    "limits": {"cpu": "500m", "memory": "128Mi"},
                                },
                            }
                        ]
                    }
                },
            }
        ],
    }
    if paused:
        spec["runMode"] = {"pause": {"enabled": True}}
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {"name": name},
        "spec": spec,
    }


# What the Git host serves: repository -> {file: content}.
SEEDS = {
    "hello": {
        "hello.yaml": yaml.safe_dump(_job("hello", ["python3", "-c", "print('hello from git')"]))
    },
    # Paused jobs run no pods: the sync, not the nodes, is what the failover test loads.
    "many": {
        "jobs.yaml": yaml.safe_dump_all(
            [_job(f"job-{i:03d}", ["true"], paused=True) for i in range(MANY)]
        )
    },
}


def _apply(*documents: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))


def _new_namespace(prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    return name


def _drop_namespace(name: str) -> None:
    # The repositories first, so the reconciler stops acting there before the namespace goes.
    kubectl("-n", name, "delete", "jobrepositories", "--all", "--wait=false", check=False)
    kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def git_url() -> Iterator[str]:
    """The Git host's base URL as the cluster's pods reach it (its Service's DNS name)."""
    namespace = _new_namespace("e2e-git")
    try:
        sources = {
            "gitserver.py": (REPO / "tests" / "e2e" / "gitserver.py").read_text(),
            "githttp.py": (REPO / "tests" / "support" / "githttp.py").read_text(),
        }
        config_maps = [{"name": "gitserver", "data": sources}] + [
            {"name": f"seed-{repo}", "data": files} for repo, files in SEEDS.items()
        ]
        _apply(
            *(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": c["name"], "namespace": namespace},
                    "data": c["data"],
                }
                for c in config_maps
            ),
            _git_deployment(namespace),
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "git", "namespace": namespace},
                "spec": {
                    "selector": {"app": "git"},
                    "ports": [{"name": "http", "port": 8080, "targetPort": 8080}],
                },
            },
        )
        kubectl("-n", namespace, "rollout", "status", "deployment/git", "--timeout=180s")
        yield f"http://git.{namespace}.svc:8080"
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _git_deployment(namespace: str) -> dict[str, Any]:
    volumes = [
        {"name": "server", "configMap": {"name": "gitserver"}},
        {"name": "git", "emptyDir": {}},
        {"name": "tmp", "emptyDir": {}},
    ] + [{"name": f"seed-{repo}", "configMap": {"name": f"seed-{repo}"}} for repo in SEEDS]
    mounts = [
        {"name": "server", "mountPath": "/srv"},
        {"name": "git", "mountPath": "/git"},
        {"name": "tmp", "mountPath": "/tmp"},
    ] + [{"name": f"seed-{repo}", "mountPath": f"/seed/{repo}"} for repo in SEEDS]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "git", "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": "git"}},
            "template": {
                "metadata": {"labels": {"app": "git"}},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 65532,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": "git",
                            "image": PRODUCT_IMAGE,
                            "imagePullPolicy": "IfNotPresent",
                            # The image's venv Python: it has aiohttp.
                            "command": ["/opt/trainops/bin/python", "/srv/gitserver.py"],
                            "args": ["/seed", "/git", "8080"],
                            "env": [{"name": "HOME", "value": "/tmp"}],
                            "ports": [{"containerPort": 8080}],
                            "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


def _tenant(namespace: str) -> None:
    """The ServiceAccount `deployer` its repositories act as (docs/GITOPS.md, Trust and
    tenancy), and `alice`, a user of the namespace's repositories and jobs."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role"}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding"}
    _apply(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "deployer", "namespace": namespace},
        },
        {**role, "metadata": {"name": "deployer", "namespace": namespace}, "rules": DEPLOYER_RULES},
        {
            **binding,
            "metadata": {"name": "deployer", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "deployer",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": namespace}],
        },
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "alice", "namespace": namespace},
        },
        {**team_role(namespace), "metadata": {"name": "trainops-user", "namespace": namespace}},
        {
            **binding,
            "metadata": {"name": "trainops-user-alice", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "trainops-user",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": namespace}],
        },
    )


def _repository(namespace: str, name: str, url: str, *, automated: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"repoURL": url, "serviceAccountName": "deployer"}
    if automated:
        spec["syncPolicy"] = {"automated": {"prune": True, "selfHeal": True}}
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _status(namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = get("-n", namespace, "jobrepository", name).get("status") or {}
    return status


def _synced(namespace: str, name: str) -> dict[str, Any] | None:
    status = _status(namespace, name)
    operation = status.get("operationState") or {}
    assert operation.get("phase") not in ("Failed", "Error"), status
    done = (status.get("sync") or {}).get("status") == "Synced" and operation.get(
        "phase"
    ) == "Succeeded"
    return status if done else None


@dataclass
class Tenants:
    """Team a, whose repository `alpha-jobs` syncs `hello`, and team b, whose `bravo-jobs`
    (no automated sync) only compares."""

    a: str
    b: str
    git: str


@pytest.fixture(scope="module")
def tenants(git_url: str) -> Iterator[Tenants]:
    a, b = _new_namespace("e2e-team-a"), _new_namespace("e2e-team-b")
    try:
        _tenant(a)
        _tenant(b)
        _apply(
            _repository(a, "alpha-jobs", f"{git_url}/hello.git", automated=True),
            _repository(b, "bravo-jobs", f"{git_url}/hello.git", automated=False),
        )
        yield Tenants(a, b, git_url)
    finally:
        _drop_namespace(a)
        _drop_namespace(b)


def test_a_tenant_repository_syncs_from_the_git_pod_and_its_job_succeeds(tenants: Tenants) -> None:
    status = eventually(lambda: _synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    assert status is not None

    (resource,) = status["operationState"]["syncResult"]["resources"] or [None]
    assert resource["kind"] == "TensorFlowTrainingJob" and resource["name"] == "hello", status
    job = get("-n", tenants.a, TF, "hello")
    assert job["metadata"]["annotations"]["gitops.trainops.dev/repository"].endswith(
        "alpha-jobs"
    ), job

    def succeeded() -> bool:
        phase = get("-n", tenants.a, TF, "hello").get("status", {}).get("phase")
        assert phase != "Failed"
        return phase == "Succeeded"

    eventually(succeeded, timeout=300, interval=3)
    log = kubectl("-n", tenants.a, "logs", "hello-worker-0").stdout
    assert log.strip() == "hello from git", log
    # team b's repository, without automated sync, applied nothing.
    assert kubectl("-n", tenants.b, "get", TF, "-o", "name").stdout == ""


@pytest.fixture
def dashboard() -> Iterator[str]:
    """`kubectl port-forward svc/trainops-gitops` on a free local port: its base URL."""
    process = subprocess.Popen(
        [
            "kubectl",
            f"--kubeconfig={KUBECONFIG}",
            "-n",
            SYSTEM,
            "port-forward",
            "svc/trainops-gitops",
            ":8080",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        first = lines.get(timeout=30)
        match = re.match(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8080", first)
        assert match, first
        yield f"http://127.0.0.1:{match.group(1)}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line)


def _token(namespace: str, account: str) -> str:
    return kubectl("-n", namespace, "create", "token", account, "--duration=10m").stdout.strip()


def test_a_user_logs_in_through_port_forward_and_sees_only_their_namespace(
    tenants: Tenants, dashboard: str
) -> None:
    eventually(lambda: _status(tenants.b, "bravo-jobs").get("sync"), timeout=180, interval=2)
    token = _token(tenants.a, "alice")
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    form = urllib.parse.urlencode({"token": token, "next": "/"}).encode()
    with browser.open(urllib.request.Request(f"{dashboard}/login", data=form), timeout=30) as page:
        assert page.status == 200 and page.url == f"{dashboard}/", page.url
        front = page.read().decode()
    assert [c.name for c in jar] == ["trainops-token"]
    assert f"/repositories/{tenants.a}/alpha-jobs" in front, front
    assert "bravo-jobs" not in front and tenants.b not in front, front

    with browser.open(f"{dashboard}/api/v1/repositories", timeout=30) as answer:
        listed = json.load(answer)["items"]
    assert [(r["metadata"]["namespace"], r["metadata"]["name"]) for r in listed] == [
        (tenants.a, "alpha-jobs")
    ]
    # team b's repository by its address: refused in the API server's words, nothing shown.
    try:
        browser.open(f"{dashboard}/api/v1/repositories/{tenants.b}/bravo-jobs", timeout=30)
        raise AssertionError("another namespace's repository was served")
    except urllib.error.HTTPError as refused:
        assert refused.code == 403, refused
        body = refused.read().decode()
        assert json.loads(body) == {
            "error": f'User "system:serviceaccount:{tenants.a}:alice" cannot get resource '
            f'"jobrepositories" in API group "gitops.trainops.dev" in the namespace "{tenants.b}"'
        }, body


class Watch:
    """`kubectl get -w --output-watch-events -o json` of a namespace's TensorFlowTrainingJobs,
    started before anything is created there (its first list is empty): every ADDED and
    DELETED as the API server streamed them."""

    def __init__(self, namespace: str) -> None:
        self.events: list[tuple[str, str, str]] = []  # (type, name, uid)
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [
                "kubectl",
                f"--kubeconfig={KUBECONFIG}",
                "-n",
                namespace,
                "get",
                TF,
                "-w",
                "--output-watch-events",
                "-o",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:  # with --output-watch-events: one event a line
            event = json.loads(line)
            if event["type"] not in ("ADDED", "DELETED"):
                continue  # status writes (MODIFIED) are not what is counted
            meta = event["object"]["metadata"]
            with self._lock:
                self.events.append((event["type"], meta["name"], meta["uid"]))

    def added(self) -> int:
        with self._lock:
            return sum(1 for kind, _, _ in self.events if kind == "ADDED")

    def stop(self) -> list[tuple[str, str, str]]:
        self.process.terminate()
        self.process.wait(timeout=10)
        with self._lock:
            return list(self.events)


REFRESH = "gitops.trainops.dev/refresh-requested-at"


def _handled(namespace: str, name: str) -> str | None:
    handled = _status(namespace, name).get("lastHandledRequest") or {}
    return handled.get("refreshRequestedAt")


def _failed(namespace: str, name: str) -> bool:
    """Raises with the status when the repository cannot sync (a ComparisonError, say)."""
    status = _status(namespace, name)
    problems = [c for c in status.get("conditions") or [] if c.get("type", "").endswith("Error")]
    assert not problems, status
    return False


def _refreshed(namespace: str, name: str, token: str) -> Callable[[], bool]:
    return lambda: _handled(namespace, name) == token


def _lease_holder() -> str:
    lease = get("-n", SYSTEM, "lease", "trainops-gitops")
    return str(lease["spec"].get("holderIdentity") or "")


def _kill_container(pod: dict[str, Any]) -> None:
    """SIGKILL the pod's container in its node's containerd, as a crash does (no SIGTERM, so
    the Lease is not released)."""
    (container,) = pod["status"]["containerStatuses"]
    cid = container["containerID"].removeprefix("containerd://")
    env = {
        **os.environ,
        "CONTAINERS_CONF": str(Path.home() / ".cache/trainops/kind/containers.conf"),
    }
    subprocess.run(
        [
            "podman",
            "exec",
            pod["spec"]["nodeName"],
            "ctr",
            "-n",
            "k8s.io",
            "task",
            "kill",
            "-s",
            "SIGKILL",
            cid,
        ],
        check=True,
        capture_output=True,
        timeout=30,
        env=env,
    )


def test_the_leader_killed_mid_sync_of_200_jobs_is_replaced_and_each_job_created_once(
    git_url: str,
) -> None:
    namespace = _new_namespace("e2e-many")
    watch: Watch | None = None
    try:
        _tenant(namespace)
        leader = eventually(_lease_holder, timeout=60, interval=1)
        leader_pod = get("-n", SYSTEM, "pod", leader.split("_")[0])
        # Started before the repository: what it lists first (nothing yet) it would report as
        # ADDED too, so no creation goes unseen.
        watch = Watch(namespace)
        _apply(_repository(namespace, "many", f"{git_url}/many.git", automated=True))

        def started() -> bool:
            assert watch is not None and watch.process.poll() is None, "kubectl get -w ended"
            return watch.added() >= 5 or _failed(namespace, "many")

        eventually(started, timeout=120, interval=0.05)
        _kill_container(leader_pod)
        killed_at, created_before = time.monotonic(), watch.added()
        assert created_before < MANY, "the sync was over before the leader was killed"

        new_leader = eventually(
            lambda: (h := _lease_holder()) != leader and h, timeout=60, interval=0.5
        )
        taken_over = time.monotonic() - killed_at
        status = eventually(lambda: _synced(namespace, "many"), timeout=300, interval=2)
        assert status is not None
        eventually(lambda: watch is not None and watch.added() >= MANY, timeout=60, interval=0.5)
        # Nothing more comes: three refresh rounds of the new leader, each handled, change
        # nothing (a job created twice would show as DELETED + ADDED).
        for round_ in range(3):
            token = f"e2e-{round_}-{uuid.uuid4().hex[:6]}"
            kubectl(
                "-n",
                namespace,
                "annotate",
                "--overwrite",
                "jobrepository",
                "many",
                f"{REFRESH}={token}",
            )
            eventually(_refreshed(namespace, "many", token), timeout=120, interval=1)
        events = watch.stop()
        watch = None

        kinds = Counter(kind for kind, _, _ in events)
        assert kinds == {"ADDED": MANY}, kinds  # nothing deleted, modified jobs not counted
        added = Counter(name for _, name, _ in events)
        assert set(added) == {f"job-{i:03d}" for i in range(MANY)}, added
        assert max(added.values()) == 1, [n for n, c in added.items() if c > 1]
        live = get("-n", namespace, TF)["items"]
        assert {j["metadata"]["name"]: j["metadata"]["uid"] for j in live} == {
            name: uid for _, name, uid in events
        }
        assert {j["metadata"]["generation"] for j in live} == {1}
        assert status["summary"]["total"] == MANY, status["summary"]
        print(
            f"\nfailover: {created_before} of {MANY} jobs created when {leader} was killed; "
            f"{new_leader} took the Lease {taken_over:.1f} s later",
            file=sys.stderr,
        )
    finally:
        if watch is not None:
            watch.stop()
        _drop_namespace(namespace)


def _trainops(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`trainops ARGS` as on a user's machine that has a kubeconfig and nothing else (no
    `trainops up`, no ~/.kube/config, no TRAINOPS_SERVER or TRAINOPS_TOKEN)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINOPS_")}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), KUBECONFIG=str(kubeconfig))
    return subprocess.run(
        [sys.executable, "-m", "trainops", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=REPO,
    )


def test_trainops_repo_reaches_the_in_cluster_api_with_nothing_but_a_kubeconfig(
    tenants: Tenants, tmp_path: Path
) -> None:
    eventually(lambda: _synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    # What the service proxy needs (docs/GITOPS.md, `trainops repo`), granted to alice.
    name = f"trainops-api-{tenants.a}"
    _apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": SYSTEM},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["services/proxy"],
                    "resourceNames": ["http:trainops-gitops:http"],
                    "verbs": ["get", "create", "delete"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": SYSTEM},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": tenants.a}],
        },
    )
    try:
        admin = json.loads(kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
        (cluster,) = admin["clusters"]
        alice = tmp_path / "alice.kubeconfig"
        alice.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "kind", "cluster": cluster["cluster"]}],
                    "users": [{"name": "alice", "user": {"token": _token(tenants.a, "alice")}}],
                    "contexts": [
                        {"name": "alice", "context": {"cluster": "kind", "user": "alice"}}
                    ],
                    "current-context": "alice",
                }
            )
        )

        listed = _trainops(alice, tmp_path, "repo", "list")
        assert listed.returncode == 0, listed.stderr
        header, *rows = listed.stdout.splitlines()
        assert header.split() == ["NAMESPACE", "NAME", "SYNC", "HEALTH", "REVISION", "AGE", "REPO"]
        assert [row.split()[:3] for row in rows] == [[tenants.a, "alpha-jobs", "Synced"]], rows
        assert rows[0].split()[-1] == f"{tenants.git}/hello.git", rows

        got = _trainops(alice, tmp_path, "repo", "get", f"{tenants.a}/alpha-jobs", "-o", "json")
        assert got.returncode == 0, got.stderr
        repository = json.loads(got.stdout)
        assert repository["metadata"]["name"] == "alpha-jobs"
        assert repository["status"]["sync"]["status"] == "Synced", repository["status"]

        synced = _trainops(alice, tmp_path, "repo", "sync", f"{tenants.a}/alpha-jobs")
        assert synced.returncode == 0, synced.stderr
        assert synced.stdout.strip() == f"sync of {tenants.a}/alpha-jobs requested", synced
        asked = get("-n", tenants.a, "jobrepository", "alpha-jobs")["metadata"]["annotations"]
        token = asked["gitops.trainops.dev/sync-requested-at"]

        def carried_out() -> bool:
            handled = _status(tenants.a, "alpha-jobs").get("lastHandledRequest") or {}
            return bool(handled.get("syncRequestedAt") == token)

        eventually(carried_out, timeout=120, interval=1)

        # team b's repository: the trainops API refuses alice in the API server's words.
        other = _trainops(alice, tmp_path, "repo", "get", f"{tenants.b}/bravo-jobs")
        assert other.returncode == 1 and "cannot get resource" in other.stderr, other

        # The kind kubeconfig's own user has a client certificate, no token to pass on.
        kind_admin = _trainops(Path(str(KUBECONFIG)), tmp_path, "repo", "list")
        assert kind_admin.returncode == 1, kind_admin
        assert "has no bearer token (a client certificate?)" in kind_admin.stderr, kind_admin
    finally:
        kubectl("-n", SYSTEM, "delete", "rolebinding,role", name, check=False)


def test_a_user_logs_in_with_a_browser_through_port_forward(
    tenants: Tenants, dashboard: str
) -> None:
    """The same login in Debian's chromium (Playwright), as a user pasting a token does."""
    from playwright.sync_api import sync_playwright

    from tests.dashboard.conftest import launch_chromium, log_in, require_chromium

    require_chromium()
    eventually(lambda: _synced(tenants.a, "alpha-jobs"), timeout=180, interval=2)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            log_in(page, dashboard, _token(tenants.a, "alice"))
            link = page.locator(f'a[href="/repositories/{tenants.a}/alpha-jobs"]').first
            link.wait_for()
            text = page.locator("body").inner_text()
            assert "alpha-jobs" in text and "bravo-jobs" not in text and tenants.b not in text, text
            link.click()
            page.wait_for_url(f"{dashboard}/repositories/{tenants.a}/alpha-jobs")
            page.get_by_text("hello", exact=True).first.wait_for()
        finally:
            browser.close()
