"""deploy/webhook: the kustomize base has the properties a safe webhook install needs.

The checks cross-reference objects (names, labels, ports, the CLI flags the Deployment passes)
so a rename in one place that is not made in the others fails here, not in a cluster.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainops.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "webhook"
CRDS = ROOT / "deploy" / "crds"


def _load_base() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((BASE / resource).read_text()) if d)
    return docs


DOCS = _load_base()


def _one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in DOCS if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


DEPLOYMENT = _one("Deployment")
POD = DEPLOYMENT["spec"]["template"]["spec"]
CONTAINER = POD["containers"][0]
SERVICE = _one("Service")
NAMESPACE = _one("Namespace")["metadata"]["name"]
ARGS = build_parser().parse_args(
    [a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in CONTAINER["args"]]
)


def _webhooks() -> list[dict[str, Any]]:
    out = []
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        out.extend(_one(kind)["webhooks"])
    return out


@functools.cache
def _crd_resources() -> frozenset[tuple[str, str, str]]:
    """(group, version, plural) served by the generated CRDs (large files: C loader, once)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    out = set()
    for path in sorted(CRDS.glob("batch.tensorstack.dev_*.yaml")):  # the training jobs
        crd = yaml.load(path.read_text(), Loader=loader)
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                out.add((crd["spec"]["group"], version["name"], crd["spec"]["names"]["plural"]))
    return frozenset(out)


def test_the_deployment_runs_two_replicas_covered_by_a_disruption_budget() -> None:
    assert DEPLOYMENT["spec"]["replicas"] == 2
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert (
        pdb["spec"]["selector"]["matchLabels"].items()
        <= DEPLOYMENT["spec"]["template"]["metadata"]["labels"].items()
    )


def test_the_pod_runs_non_root_on_a_read_only_root_filesystem_with_resources() -> None:
    assert POD["securityContext"]["runAsNonRoot"] is True
    sc = CONTAINER["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= CONTAINER["resources"]["requests"].keys()
    assert "memory" in CONTAINER["resources"]["limits"]
    mounts = {m["mountPath"] for m in CONTAINER["volumeMounts"]}
    assert str(ARGS.cert_dir) in mounts, "the certificate directory must be writable"


def test_the_readiness_probe_asks_readyz_over_https_on_the_serving_port() -> None:
    probe = CONTAINER["readinessProbe"]["httpGet"]
    assert (probe["path"], probe["scheme"]) == ("/readyz", "HTTPS")
    port = next(p for p in CONTAINER["ports"] if p["name"] == probe["port"])
    assert port["containerPort"] == ARGS.port


def test_the_service_maps_443_to_the_serving_port_of_the_pods() -> None:
    (port,) = SERVICE["spec"]["ports"]
    assert port["port"] == 443
    assert port["targetPort"] in {p["name"] for p in CONTAINER["ports"]}
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert SERVICE["spec"]["selector"].items() <= labels.items()
    assert ARGS.service == SERVICE["metadata"]["name"] and ARGS.manage_certs


@pytest.mark.parametrize("hook", _webhooks(), ids=lambda h: h["name"])
def test_each_webhook_is_strict_and_reaches_the_service(hook: dict[str, Any]) -> None:
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 5
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["matchPolicy"] == "Equivalent"
    svc = hook["clientConfig"]["service"]
    assert (svc["name"], svc["namespace"], svc["port"]) == (
        SERVICE["metadata"]["name"],
        SERVICE["metadata"]["namespace"],
        443,
    )
    assert svc["path"] in ("/mutate", "/validate")
    (expr,) = hook["namespaceSelector"]["matchExpressions"]
    assert expr == {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": [NAMESPACE],
    }


@pytest.mark.parametrize("hook", _webhooks(), ids=lambda h: h["name"])
def test_each_webhook_covers_create_and_update_of_both_job_kinds(hook: dict[str, Any]) -> None:
    covered = set()
    for rule in hook["rules"]:
        assert sorted(rule["operations"]) == ["CREATE", "UPDATE"]
        covered |= {
            (g, v, r)
            for g in rule["apiGroups"]
            for v in rule["apiVersions"]
            for r in rule["resources"]
        }
    expected = _crd_resources() or {
        ("batch.tensorstack.dev", "v1beta1", "tensorflowtrainingjobs"),
        ("batch.tensorstack.dev", "v1beta1", "xgboosttrainingjobs"),
    }
    assert covered == expected


def test_the_mutating_and_validating_hooks_call_their_own_paths() -> None:
    (mutating,) = _one("MutatingWebhookConfiguration")["webhooks"]
    (validating,) = _one("ValidatingWebhookConfiguration")["webhooks"]
    assert mutating["clientConfig"]["service"]["path"] == "/mutate"
    assert validating["clientConfig"]["service"]["path"] == "/validate"


NAMESPACES_ROLE = "trainops-webhook-namespaces"


def test_rbac_grants_only_named_objects_and_only_read_and_update() -> None:
    rules = _one("Role")["rules"] + _one("ClusterRole", "trainops-webhook-cabundle")["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
        assert set(rule["verbs"]) <= {"get", "update", "patch"}
        assert rule["resourceNames"], rule
    names = {(r, n) for rule in rules for r in rule["resources"] for n in rule["resourceNames"]}
    assert ("secrets", ARGS.secret_name) in names
    for config in ARGS.webhook_configs:
        assert ("mutatingwebhookconfigurations", config) in names
        assert ("validatingwebhookconfigurations", config) in names
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert _one(kind)["metadata"]["name"] in ARGS.webhook_configs
    # The Secret ships (empty) with the base, so no `create` is needed.
    assert _one("Secret", ARGS.secret_name)["metadata"]["namespace"] == NAMESPACE


def test_pod_security_reads_namespaces_and_nothing_else() -> None:
    """`--pod-security` (on in the Deployment): the namespace informer lists and watches
    namespaces (webhook/namespaces.py), which cannot be limited by name."""
    assert ARGS.pod_security is True
    assert _one("ClusterRole", NAMESPACES_ROLE)["rules"] == [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]}
    ]
    source = (ROOT / "webhook" / "namespaces.py").read_text()
    assert "Informer(" in source and "NAMESPACES" in source
    assert "client.get(" not in source and "client.list(" not in source


def test_the_service_account_is_bound_to_its_roles() -> None:
    account = _one("ServiceAccount")["metadata"]
    assert POD["serviceAccountName"] == account["name"]
    for kind, role, name in (
        ("RoleBinding", "Role", None),
        ("ClusterRoleBinding", "ClusterRole", "trainops-webhook-cabundle"),
        ("ClusterRoleBinding", "ClusterRole", NAMESPACES_ROLE),
    ):
        binding = _one(kind, name)
        assert binding["roleRef"]["name"] == _one(role, name)["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]


def test_kubectl_kustomize_renders_the_same_objects() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(BASE)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    rendered = [d for d in yaml.safe_load_all(out) if d]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, rendered)) == sorted(map(key, DOCS))
    for doc in rendered:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainops"
    deployment = next(d for d in rendered if d["kind"] == "Deployment")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "trainops:latest"


def test_the_network_policy_admits_ingress_to_the_serving_port_only() -> None:
    policy = _one("NetworkPolicy")
    assert policy["metadata"]["namespace"] == NAMESPACE
    spec = policy["spec"]
    labels = DEPLOYMENT["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= labels.items()
    # Ingress only: egress goes to the API server alone, whose address is per-cluster.
    assert spec["policyTypes"] == ["Ingress"]
    (rule,) = spec["ingress"]
    assert "from" not in rule  # the API server cannot be named portably: the manifest says why
    (port,) = rule["ports"]
    assert port["protocol"] == "TCP"
    (served,) = [p for p in CONTAINER["ports"] if port["port"] in (p["name"], p["containerPort"])]
    assert served["containerPort"] == ARGS.port
    assert SERVICE["spec"]["ports"][0]["targetPort"] in (served["name"], served["containerPort"])


def _documented_overlay() -> str:
    text = (ROOT / "docs" / "WEBHOOK.md").read_text()
    section = text.split("### Narrowing the NetworkPolicy", 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert block.startswith("# my-cluster/kustomization.yaml\n")
    return block


def test_the_documented_overlay_narrows_the_policy_to_an_ip_block_on_the_same_port(
    tmp_path: Path,
) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    overlay = tmp_path / "my-cluster"
    (tmp_path / "trainops").mkdir()
    (tmp_path / "trainops" / "deploy").symlink_to(ROOT / "deploy")
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(_documented_overlay())
    out = subprocess.run(
        [kubectl, "kustomize", str(overlay)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rendered = [d for d in yaml.safe_load_all(out) if d]
    (policy,) = [d for d in rendered if d["kind"] == "NetworkPolicy"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "10.0.0.0/28"}}]
    assert rule["ports"] == _one("NetworkPolicy")["spec"]["ingress"][0]["ports"]
    # Everything else is the base, unchanged.
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, rendered)) == sorted(map(key, DOCS))
