"""The real kubectl against the server: create, get, apply, label, patch, replace, delete, wait,
get -w, logs. (Skipped, with the reason, only when kubectl is not installed.)"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from tests.localcluster._http import Http
from tests.support import kubelettls
from tests.support.cluster import Cluster
from tests.support.manifests import crd_files, documents

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: main
        image: nginx:1.25
"""


def run(
    cluster: Cluster, namespace: str, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("-n", namespace, *args, stdin=stdin, check=check)


def test_create_get_and_delete_round_trip(cluster: Cluster, namespace: str) -> None:
    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  a: b\n"
    assert (
        run(cluster, namespace, "create", "-f", "-", stdin=manifest).stdout.strip()
        == "configmap/cfg created"
    )
    got = json.loads(run(cluster, namespace, "get", "configmap", "cfg", "-o", "json").stdout)
    assert got["data"] == {"a": "b"}
    table = run(cluster, namespace, "get", "configmaps").stdout.splitlines()
    assert table[0].split()[0] == "NAME" and any(line.startswith("cfg ") for line in table[1:])
    again = run(cluster, namespace, "create", "-f", "-", stdin=manifest, check=False)
    assert again.returncode != 0
    assert (
        'Error from server (AlreadyExists): error when creating "STDIN": configmaps "cfg" already exists'
        in again.stderr
    )
    assert (
        run(cluster, namespace, "delete", "configmap", "cfg").stdout.strip()
        == 'configmap "cfg" deleted'
    )
    missing = run(cluster, namespace, "get", "configmap", "cfg", check=False)
    assert 'Error from server (NotFound): configmaps "cfg" not found' in missing.stderr


def test_client_side_apply_creates_then_reports_unchanged_then_configures(
    cluster: Cluster, namespace: str
) -> None:
    outputs = [
        run(
            cluster, namespace, "apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=r)
        ).stdout.strip()
        for r in (1, 1, 3)
    ]
    assert outputs == [
        "deployment.apps/web created",
        "deployment.apps/web unchanged",
        "deployment.apps/web configured",
    ]
    deployment = json.loads(
        run(cluster, namespace, "get", "deployment", "web", "-o", "json").stdout
    )
    assert (deployment["spec"]["replicas"], deployment["metadata"]["generation"]) == (3, 2)


def test_server_side_apply_creates_and_updates(cluster: Cluster, namespace: str) -> None:
    first = run(
        cluster, namespace, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.format(replicas=2)
    )
    assert first.stdout.strip() == "deployment.apps/web serverside-applied"
    run(
        cluster, namespace, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.format(replicas=4)
    )
    replicas = run(
        cluster, namespace, "get", "deployment", "web", "-o", "jsonpath={.spec.replicas}"
    ).stdout
    assert replicas == "4"


def test_server_side_apply_after_client_side_apply_takes_over_its_manager(
    cluster: Cluster, namespace: str
) -> None:
    run(cluster, namespace, "apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    run(
        cluster, namespace, "apply", "--server-side", "-f", "-", stdin=DEPLOYMENT.format(replicas=2)
    )
    deployment = json.loads(
        run(
            cluster, namespace, "get", "deployment", "web", "-o", "json", "--show-managed-fields"
        ).stdout
    )
    managers = {(e["manager"], e["operation"]) for e in deployment["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    assert not any(m == "kubectl-client-side-apply" for m, _ in managers), managers
    assert deployment["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("patch_type", "patch"),
    [
        ("merge", '{"data":{"k":"merged"}}'),
        ("json", '[{"op":"add","path":"/data/k","value":"merged"}]'),
        ("strategic", '{"data":{"k":"merged"}}'),
    ],
)
def test_patch_of_every_type(cluster: Cluster, namespace: str, patch_type: str, patch: str) -> None:
    run(
        cluster,
        namespace,
        "apply",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  x: hello\n",
    )
    run(cluster, namespace, "patch", "configmap", "p", "--type", patch_type, "-p", patch)
    assert (
        run(cluster, namespace, "get", "configmap", "p", "-o", "jsonpath={.data.k}").stdout
        == "merged"
    )


def test_label_replace_and_wait(cluster: Cluster, namespace: str) -> None:
    run(
        cluster,
        namespace,
        "apply",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: l\ndata:\n  x: hello\n",
    )
    run(cluster, namespace, "label", "configmap", "l", "team=ml")
    obj = yaml.safe_load(run(cluster, namespace, "get", "configmap", "l", "-o", "yaml").stdout)
    assert obj["metadata"]["labels"] == {"team": "ml"}
    obj["data"]["x"] = "replaced"
    run(cluster, namespace, "replace", "-f", "-", stdin=yaml.safe_dump(obj))
    assert (
        run(cluster, namespace, "get", "configmap", "l", "-o", "jsonpath={.data.x}").stdout
        == "replaced"
    )
    waited = run(
        cluster,
        namespace,
        "wait",
        "--for=jsonpath={.data.x}=replaced",
        "configmap/l",
        "--timeout=10s",
    )
    assert "condition met" in waited.stdout


def test_get_watch_prints_changes(cluster: Cluster, namespace: str) -> None:
    proc = subprocess.Popen(
        [
            KUBECTL or "kubectl",
            "-n",
            namespace,
            "get",
            "configmaps",
            "-w",
            "--output-watch-events",
            "--request-timeout=5s",
        ],
        env=cluster.kubectl_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        run(
            cluster,
            namespace,
            "create",
            "-f",
            "-",
            stdin="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: watched\n",
        )
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "watched" in line:
                break
    finally:
        proc.kill()
        proc.wait()
    assert any(line.split()[:2] == ["ADDED", "watched"] for line in lines), lines


class _FakeKubelet(BaseHTTPRequestHandler):
    """Stands in for the kubelet's log endpoint (another component's process)."""

    def do_GET(self) -> None:
        body = f"log of {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_kubelet_node(http: Http) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeKubelet)
    server.socket = kubelettls.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    name = f"logs-node-{server.server_address[1]}"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": server.server_address[1]}},
        },
    }
    assert http.post("/api/v1/nodes", node).status == 201
    try:
        yield name
    finally:
        http.delete(f"/api/v1/nodes/{name}")
        server.shutdown()


def test_logs_are_proxied_to_the_kubelet_of_the_pods_node(
    cluster: Cluster, http: Http, namespace: str, fake_kubelet_node: str
) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    containers = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    http.post(
        pods,
        {
            "metadata": {"name": "talker"},
            "spec": {"containers": containers, "nodeName": fake_kubelet_node},
        },
    )
    running = [{"name": n, "state": {"running": {}}} for n in ("a", "b")]
    http.patch(
        f"{pods}/talker/status", {"status": {"phase": "Running", "containerStatuses": running}}
    )
    out = run(cluster, namespace, "logs", "talker", "-c", "b", "--tail=5")
    assert out.stdout.startswith(f"log of /containerLogs/{namespace}/talker/b?")
    assert "tailLines=5" in out.stdout
    defaulted = run(cluster, namespace, "logs", "talker")
    assert defaulted.stdout.startswith(f"log of /containerLogs/{namespace}/talker/a")
    assert 'Defaulted container "a" out of: a, b' in defaulted.stderr


def test_logs_name_the_problem_for_bad_containers(http: Http, namespace: str) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    containers = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    http.post(
        pods, {"metadata": {"name": "two"}, "spec": {"containers": containers, "nodeName": "n1"}}
    )
    no_choice = http.get(f"{pods}/two/log").json()
    assert (
        no_choice["message"]
        == "a container name must be specified for pod two, choose one of: [a b]"
    )
    unknown = http.get(f"{pods}/two/log?container=zz").json()
    assert unknown["message"] == "container zz is not valid for pod two"
    waiting = http.get(f"{pods}/two/log?container=a").json()
    assert waiting["message"] == 'container "a" in pod "two" is waiting to start: ContainerCreating'


def test_the_crd_manifests_install_with_kubectl(cluster: Cluster, namespace: str) -> None:
    crds = crd_files()
    if not crds:
        pytest.skip("deploy/crds has no CRDs yet")
    for crd in crds:
        run(cluster, namespace, "apply", "--server-side", "-f", str(crd))
        name = documents(crd)[0]["metadata"]["name"]
        run(
            cluster,
            namespace,
            "wait",
            "--for=condition=Established",
            f"crd/{name}",
            "--timeout=10s",
        )


def test_auth_can_i_and_whoami_answer_for_the_admin_user(cluster: Cluster, namespace: str) -> None:
    assert run(cluster, namespace, "auth", "can-i", "create", "pods").stdout.strip() == "yes"
    assert "system:masters" in run(cluster, namespace, "auth", "whoami").stdout


def test_cluster_info_finds_the_kubernetes_service(cluster: Cluster) -> None:
    out = run(cluster, "default", "cluster-info").stdout
    assert f"Kubernetes control plane is running at {cluster.url}" in out
    endpoints = json.loads(
        run(cluster, "default", "get", "endpoints", "kubernetes", "-o", "json").stdout
    )
    assert endpoints["subsets"][0]["ports"][0]["port"] == int(cluster.url.rsplit(":", 1)[1])


SERVICE_AND_ENDPOINTS_LIST = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata: {name: hook}
  spec:
    ports: [{port: 443, targetPort: 8443}]
- apiVersion: v1
  kind: Endpoints
  metadata: {name: hook}
  subsets:
  - addresses: [{ip: 127.0.0.1}]
    ports: [{port: 8443}]
"""


@pytest.mark.parametrize("mode", [pytest.param([], id="client-side"), ["--server-side"]])
def test_a_v1_list_applies_each_item(cluster: Cluster, namespace: str, mode: list[str]) -> None:
    # kubectl validates the List document itself, which no OpenAPI v3 document describes, so
    # it asks /openapi/v2 in protobuf: a JSON answer fails with "proto: cannot parse ...".
    applied = run(cluster, namespace, "apply", *mode, "-f", "-", stdin=SERVICE_AND_ENDPOINTS_LIST)
    verb = "serverside-applied" if mode else "created"
    assert applied.stdout.splitlines() == [f"service/hook {verb}", f"endpoints/hook {verb}"]
    endpoints = json.loads(run(cluster, namespace, "get", "endpoints", "hook", "-o", "json").stdout)
    assert endpoints["subsets"][0]["ports"][0]["port"] == 8443
