"""The trainops image (Dockerfile, built by hack/image) runs as deploy/ runs it, and a real API
server calls the webhook inside it.

The container runs as user 65532 on a read-only root filesystem with only /tmp writable, as the
Deployments' securityContext asks; the image's numeric USER is what lets the kubelet check
`runAsNonRoot`. The end-to-end test registers deploy/webhook's configurations by `url` and
`caBundle` at the container's loopback port (host network) and has `kubectl apply` a denied
job: the API server, not the test, calls the webhook. The controller in the container turns a
job into its pods. With TRAINOPS_TEST_KUBECONFIG the cluster is the reference kube-apiserver
(hack/image-tests); otherwise the embedded one.
"""

from __future__ import annotations

import json
import re
import ssl
import urllib.request
from pathlib import Path

import pytest

from certs import pki
from tests.image.conftest import IMAGE, Podman
from tests.localcluster.test_kubectl_webhook import registered
from tests.support.build import compiled_modules
from tests.support.cluster import Cluster, eventually
from tests.support.manifests import REPO, documents

UID = 65532
# Every Deployment in deploy/ runs this image (a new component's folder is picked up).
DEPLOYMENTS = tuple(sorted(REPO.glob("deploy/*/deployment.yaml")))
WEBHOOKS = REPO / "deploy" / "webhook" / "webhooks.yaml"
DENIED = REPO / "examples" / "denied" / "limits-below-requests.yaml"
GOOD = REPO / "examples" / "tensorflow-mnist.yaml"
DOCKERFILE = REPO / "Dockerfile"
CONSTRAINTS = REPO / "constraints.txt"
LIMITS_CPU = "spec.replicaSpecs[0].template.spec.containers[0].resources.limits.cpu"


def _dockerfile_user() -> str:
    """The runtime stage's USER (the last one in the Dockerfile)."""
    users = re.findall(r"^USER\s+(\S+)\s*$", DOCKERFILE.read_text(), flags=re.MULTILINE)
    assert users, "the Dockerfile sets no USER"
    return users[-1]


@pytest.mark.parametrize("path", DEPLOYMENTS, ids=lambda p: p.parent.name)
def test_the_dockerfile_user_is_the_numeric_non_root_user_deploy_runs_as(path: Path) -> None:
    """Needs no podman: runs in the main suite too. A numeric USER is what lets the kubelet
    check `runAsNonRoot` against the image; deploy/ names the same uid and gid."""
    assert {p.parent.name for p in DEPLOYMENTS} >= {"webhook", "controller"}
    assert _dockerfile_user() == f"{UID}:{UID}"
    (deployment,) = documents(path)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        UID,
        UID,
    )
    for container in pod["containers"]:
        assert container["image"] == "trainops"
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_the_built_image_runs_as_the_dockerfiles_user_with_trainops_as_entrypoint(
    podman: Podman,
) -> None:
    (inspected,) = json.loads(podman("image", "inspect", IMAGE).stdout)
    config = inspected["Config"]
    assert config["User"] == _dockerfile_user()
    assert config["Entrypoint"] == ["trainops"]
    assert "HOME=/tmp" in config["Env"]
    assert set(config["ExposedPorts"]) == {"8443/tcp", "8080/tcp"}


def test_the_container_is_non_root_on_a_read_only_root_with_no_build_tools(
    podman: Podman,
) -> None:
    script = (
        'id -u; id -g; echo "HOME=$HOME"; '
        "touch /opt/trainops/x 2>&1 | sed 's/^.*: //'; "
        "touch /tmp/x && echo tmp-writable; "
        "for t in gcc cc make pip pip3; do command -v $t || echo no-$t; done; "
        "python3 -m pip 2>&1 | sed 's/^.*: //'; "
        "test -e /root/.cache && echo pip-cache || echo no-root-cache; "
        "ls /var/lib/apt/lists | grep -v -x -e lock -e partial || echo no-apt-lists"
    )
    out = podman.run("-c", script, entrypoint="/bin/sh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        str(UID),
        str(UID),
        "HOME=/tmp",
        "Read-only file system",
        "tmp-writable",
        "no-gcc",
        "no-cc",
        "no-make",
        "no-pip",
        "no-pip3",
        "No module named pip",
        "no-root-cache",
        "no-apt-lists",
    ]


def test_every_package_in_the_image_is_at_the_version_constraints_txt_pins(
    podman: Podman,
) -> None:
    listing = (
        "import importlib.metadata as m\n"
        "for d in m.distributions(): print(d.metadata['Name'] + '==' + d.version)"
    )
    out = podman.run("-c", listing, entrypoint="python3")
    assert out.returncode == 0, out.stderr
    installed = {
        _canonical(line.split("==")[0]): line.split("==")[1] for line in out.stdout.split()
    }
    assert installed.pop("trainops") == "0.1.0"
    assert {"aiohttp", "orjson", "cryptography"} <= set(installed)
    assert "kubernetes-asyncio" not in installed  # tests use it; trainops speaks HTTP itself
    assert "pip" not in installed and "setuptools" not in installed
    pinned = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pinned[_canonical(name)] = version
    assert {name: pinned.get(name) for name in installed} == installed


def test_the_images_admission_rules_are_compiled_and_need_no_build_tool(podman: Podman) -> None:
    """setup.py's list, each an extension module in the image (mypyc), importable with neither
    mypy nor its runtime helpers installed; the modules it leaves out stay Python source."""
    probe = (
        "import importlib, importlib.util, sys\n"
        "for name in sys.argv[1:]:\n"
        "    print(name, importlib.import_module(name).__file__.rsplit('.', 1)[-1])\n"
        "for name in ('mypy', 'mypyc', 'librt'):\n"
        "    print(name, importlib.util.find_spec(name) is not None)"
    )
    compiled = compiled_modules()
    assert "policies.rules_common" in compiled and "policies.job" in compiled
    out = podman.run("-c", probe, "policies.fieldpath", *compiled, entrypoint="python3")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "policies.fieldpath py",
        *(f"{name} so" for name in compiled),
        "mypy False",
        "mypyc False",
        "librt False",
    ]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_trainops_check_in_the_image_names_the_refused_field(podman: Podman) -> None:
    out = podman.run("check", "/jobs/job.yaml", volumes=(f"{DENIED}:/jobs/job.yaml:ro",))
    assert out.returncode == 1, out.stdout + out.stderr
    assert LIMITS_CPU in out.stdout + out.stderr


@pytest.fixture
def cert_dir(tmp_path: Path) -> tuple[Path, bytes]:
    """A CA and serving pair the container's user can read (in a cluster the webhook writes its
    own, `--manage-certs`, into an emptyDir it owns)."""
    ca = pki.new_ca("trainops-image-test-ca")
    serving = pki.new_serving_cert(ca, ["localhost"])
    out = tmp_path / "certs"
    out.mkdir(mode=0o755)
    pki.write_bundle(out, ca, serving)
    for f in out.iterdir():
        f.chmod(0o644)
    out.chmod(0o755)
    return out, ca.cert_pem


def _get(url: str, context: ssl.SSLContext) -> str:
    with urllib.request.urlopen(url, context=context, timeout=5) as resp:
        body: bytes = resp.read()
    return body.decode()


def _logged_port(podman: Podman, name: str, pattern: str) -> int:
    """The port container `name` logs it listens on (`pattern`'s group 1), once it has."""

    def port() -> int | bool:
        logs = podman("logs", name, check=False)
        if m := re.search(pattern, logs.stderr):
            return int(m.group(1))
        state = podman("inspect", "--format", "{{.State.Running}}", name, check=False)
        assert state.stdout.strip() != "false", f"{name} exited:\n{logs.stderr}"
        return False

    found = eventually(port, timeout=60, interval=0.25)
    assert isinstance(found, int)
    return found


def _stopped_cleanly(podman: Podman, name: str) -> None:
    """SIGTERM reaches the process, PID 1 in the container, and it exits 0."""
    podman("stop", "--time=20", name)
    code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
    assert code == "0", podman("logs", name).stderr


def test_the_api_server_calls_the_webhook_in_the_container_and_kubectl_shows_the_refusal(
    podman: Podman,
    cluster: Cluster,
    namespace: str,
    training_crds: None,
    cert_dir: tuple[Path, bytes],
) -> None:
    certs, ca_pem = cert_dir
    name = podman.start(
        "webhook", "--cert-dir=/etc/trainops/certs", "--host=127.0.0.1", "--port=0",
        "--shutdown-delay=0", volumes=(f"{certs}:/etc/trainops/certs:ro",),
    )  # fmt: skip
    port = _logged_port(podman, name, r"webhook listening on https://127\.0\.0\.1:(\d+)")
    context = ssl.create_default_context(cadata=ca_pem.decode())
    assert _get(f"https://localhost:{port}/readyz", context) == "ok\n"

    config = registered(documents(WEBHOOKS), port, ca_pem, namespace)
    cluster.kubectl("apply", "-f", "-", stdin=config)
    try:
        denied = cluster.kubectl("-n", namespace, "apply", "-f", str(DENIED), check=False)
        assert denied.returncode == 1
        assert re.fullmatch(
            r'Error from server \(Forbidden\): error when creating "[^"]*limits-below-requests'
            r'\.yaml": admission webhook "validate\.trainingjobs\.batch\.tensorstack\.dev" '
            r"denied the request: " + re.escape(LIMITS_CPU) + r": .+",
            denied.stderr.strip(),
            flags=re.DOTALL,
        ), denied.stderr
        jobs = cluster.kubectl("-n", namespace, "get", "tensorflowtrainingjobs", "-o", "name")
        assert jobs.stdout.strip() == ""

        created = cluster.kubectl("-n", namespace, "apply", "-f", str(GOOD))
        assert created.stdout.strip().endswith("created")
    finally:
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", stdin=config)
    # The container's webhook answered those: its own count of the refusal.
    metrics = _get(f"https://localhost:{port}/metrics", context)
    for verdict in ("denied", "allowed"):
        assert (
            'trainops_webhook_requests_total{endpoint="validate",kind="TensorFlowTrainingJob",'
            f'operation="CREATE",verdict="{verdict}"}} 1.0'
        ) in metrics.splitlines(), metrics

    _stopped_cleanly(podman, name)


def test_the_controller_in_the_container_creates_a_jobs_pods(
    podman: Podman, cluster: Cluster, namespace: str, training_crds: None, tmp_path: Path
) -> None:
    """`trainops controller` as deploy/controller runs it (leader election, a Lease next to it),
    from a kubeconfig mounted read-only; it reconciles a job into its replica pods."""
    kubeconfig = tmp_path / "kubeconfig"
    flat = cluster.kubectl("config", "view", "--flatten", "--minify").stdout
    kubeconfig.write_text(flat)
    kubeconfig.chmod(0o644)
    name = podman.start(
        "controller", "--kubeconfig=/kube/config", "--bind=127.0.0.1", "--port=0",
        f"--lease-namespace={namespace}", volumes=(f"{kubeconfig}:/kube/config:ro",),
    )  # fmt: skip
    port = _logged_port(podman, name, r"/readyz on 127\.0\.0\.1:(\d+)")

    def ready() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
            return bool(resp.status == 200)

    eventually(ready, timeout=60, interval=0.25)
    cluster.kubectl("-n", namespace, "apply", "-f", str(GOOD))
    job = documents(GOOD)[0]["metadata"]["name"]
    want = sum(r.get("replicas", 1) for r in documents(GOOD)[0]["spec"]["replicaSpecs"])

    def pods() -> list[str]:
        got = cluster.kubectl(
            "-n", namespace, "get", "pods", "-l", f"batch.tensorstack.dev/job-name={job}",
            "-o", "jsonpath={.items[*].metadata.name}",
        ).stdout.split()  # fmt: skip
        assert len(got) == want, got
        return sorted(got)

    assert all(p.startswith(f"{job}-") for p in eventually(pods, timeout=60, interval=0.5))
    _stopped_cleanly(podman, name)
