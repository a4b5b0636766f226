"""`kubectl apply --server-side -k deploy` installs the generated CRDs, the webhook and the
controller together.

The controller's RBAC is checked against its code both ways: the ClusterRole and the Role are
asserted rule by rule (`CONTROLLER_CLUSTER_RULES`, `CONTROLLER_LEASE_RULES`), and a scan of the
controller package (and the `kube` modules it imports) finds every `kube.resources` constant and
every client call it makes, which must match `CONTROLLER_CALLS` and be allowed by those rules.
The webhook's Role and ClusterRole are asserted the same way (`WEBHOOK_RULES`), and the job CRDs
it may only read are checked to have no conversion webhook to inject into.

The embedded API server does not enforce RBAC, so nothing here is applied: the manifests are
rendered and read. tests/reference/ applies them to a real kube-apiserver and runs
the controller and the webhook with their ServiceAccounts' tokens. The gitops base is checked
the same way in tests/test_deploy_gitops.py, with the helpers here."""

from __future__ import annotations

import ast
import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.manifests import container_arg

ROOT = Path(__file__).resolve().parent.parent


def test_the_top_level_kustomization_renders_the_crds_and_the_webhook() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot render the kustomization")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(ROOT / "deploy")], capture_output=True, text=True, check=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted({d["kind"] for d in docs})
    assert "MutatingWebhookConfiguration" in kinds
    assert "ValidatingWebhookConfiguration" in kinds
    crds = {d["metadata"]["name"]: d for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert set(crds) == {
        "tensorflowtrainingjobs.batch.tensorstack.dev",
        "xgboosttrainingjobs.batch.tensorstack.dev",
        "jobrepositories.gitops.trainops.dev",
    }
    for name, crd in crds.items():
        plural, group = name.split(".", 1)
        committed = yaml.safe_load(
            (ROOT / "deploy" / "crds" / f"{group}_{plural}.yaml").read_text()
        )
        assert crd["spec"] == committed["spec"]


# -- the controller base ---------------------------------------------------------------------------

NAMESPACE = "trainops-system"
CONTROLLER = "trainops-controller"


@functools.cache
def _render(base: str) -> tuple[dict[str, Any], ...]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: cannot render the kustomization")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(ROOT / base)], capture_output=True, text=True, check=True
    ).stdout
    return tuple(d for d in yaml.safe_load_all(rendered) if d)


def _one(docs: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} rendered"
    return found[0]


@pytest.fixture(scope="module")
def docs() -> tuple[dict[str, Any], ...]:
    return _render("deploy")


@pytest.fixture(scope="module")
def container(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    pod = _one(docs, "Deployment", CONTROLLER)["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return only


def _controller_args(docs: tuple[dict[str, Any], ...], container: dict[str, Any]) -> Any:
    from trainops.cli import build_parser

    # The image's ENTRYPOINT is `trainops`; the Deployment gives only the arguments.
    assert "command" not in container
    deployment = _one(docs, "Deployment", CONTROLLER)
    argv = [
        container_arg(a, container, deployment["metadata"]["namespace"]) for a in container["args"]
    ]
    return build_parser().parse_args(argv)


def test_the_controller_base_renders_alone_and_in_the_top_level() -> None:
    expected = {
        ("ServiceAccount", CONTROLLER),
        ("ClusterRole", CONTROLLER),
        ("ClusterRoleBinding", CONTROLLER),
        ("Role", f"{CONTROLLER}-leader-election"),
        ("RoleBinding", f"{CONTROLLER}-leader-election"),
        ("Role", f"{CONTROLLER}-progress"),
        ("RoleBinding", f"{CONTROLLER}-progress"),
        ("Deployment", CONTROLLER),
        ("Service", CONTROLLER),
        ("PodDisruptionBudget", CONTROLLER),
    }
    alone = _render("deploy/controller")
    assert {(d["kind"], d["metadata"]["name"]) for d in alone} == expected
    top = {(d["kind"], d["metadata"]["name"]) for d in _render("deploy")}
    assert expected <= top
    for doc in alone:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainops"
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            assert doc["metadata"]["namespace"] == NAMESPACE
    # The namespace comes from the webhook base: one Namespace object in the whole install.
    assert [d["metadata"]["name"] for d in _render("deploy") if d["kind"] == "Namespace"] == [
        NAMESPACE
    ]


def _rule_set(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(apiGroup, resource, verb, resourceNames) for every combination a rule grants."""
    return {
        (group, resource, verb, tuple(sorted(rule.get("resourceNames") or ())))
        for rule in rules
        for group in rule.get("apiGroups") or ()
        for resource in rule.get("resources") or ()
        for verb in rule.get("verbs") or ()
    }


def _grants(
    rules: list[dict[str, Any]], group: str, resource: str, verb: str, name: str | None
) -> bool:
    """Whether `rules` allow `verb` on `resource` (`plural` or `plural/subresource`)."""
    # resourceNames never match a create (the name is not in the URL) or a collection.
    return any(
        g in (group, "*")
        and r in (resource, "*")
        and v in (verb, "*")
        and (not names or (name is not None and name in names and verb != "create"))
        for g, r, v, names in _rule_set(rules)
    )


_JOBS = ("tensorflowtrainingjobs", "xgboosttrainingjobs")
_GROUP = "batch.tensorstack.dev"
CONTROLLER_CLUSTER_RULES = {
    # The jobs: informers (list, watch), a fresh read per reconcile (get).
    *((_GROUP, jobs, verb, ()) for jobs in _JOBS for verb in ("get", "list", "watch")),
    # .status is replaced (update), never patched: controller/reconciler.py `_write_status`.
    *((_GROUP, f"{jobs}/status", "update", ()) for jobs in _JOBS),
    # No call: OwnerReferencesPermissionEnforcement requires it to set blockOwnerDeletion on
    # the children's ownerReferences (controller/replicas.py `owner_reference`).
    *((_GROUP, f"{jobs}/finalizers", "update", ()) for jobs in _JOBS),
    # Replicas (pods, services) and TensorBoard (deployments): informers, create, delete. Never
    # read one by one: no get (tests/reference/test_rbac.py shows a real server refusing it).
    *(
        (group, plural, verb, ())
        for group, plural in (("", "pods"), ("", "services"), ("apps", "deployments"))
        for verb in ("list", "watch", "create", "delete")
    ),
    # The TensorBoard Deployment follows a changed tensorboardSpec (a PUT).
    ("apps", "deployments", "update", ()),
    # ResourceQuotas: an informer, whose changes requeue jobs a quota refused.
    ("", "resourcequotas", "list", ()),
    ("", "resourcequotas", "watch", ()),
    # Nodes: an informer; a replica's pod on a node not Ready for --lost-node-grace is lost
    # (controller/lostnodes.py): force-deleted and restarted, or the job fails naming it.
    ("", "nodes", "list", ()),
    ("", "nodes", "watch", ()),
    # kube/events.py: create, then a merge patch of count/lastTimestamp for a repeat.
    ("", "events", "create", ()),
    ("", "events", "patch", ()),
    # controller/keeplogs.py: a run's log (a GET of pods/log) kept in the job's ConfigMap,
    # read, created or replaced.
    ("", "pods/log", "get", ()),
    ("", "configmaps", "get", ()),
    ("", "configmaps", "create", ()),
    ("", "configmaps", "update", ()),
}


def _lease_rules() -> set[tuple[str, str, str, tuple[str, ...]]]:
    from controller.manager import ControllerSettings

    lease = ControllerSettings().lease_name
    # kube/leader.py: create when missing (not limitable by name), get and replace its own.
    return {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", (lease,)),
        ("coordination.k8s.io", "leases", "update", (lease,)),
    }


def test_the_controller_cluster_role_grants_exactly_what_the_controller_needs(
    docs: tuple[dict[str, Any], ...],
) -> None:
    role = _one(docs, "ClusterRole", CONTROLLER)
    assert _rule_set(role["rules"]) == CONTROLLER_CLUSTER_RULES
    assert "aggregationRule" not in role


def test_the_progress_role_reaches_only_the_progress_secret_where_the_controller_keeps_it(
    docs: tuple[dict[str, Any], ...], container: dict[str, Any]
) -> None:
    from controller.progress_server import ProgressSettings

    role = _one(docs, "Role", f"{CONTROLLER}-progress")
    secret = ProgressSettings().secret_name
    # controller/progress_keys.py: create when missing (not limitable by name), get, replace;
    # controller/progress_server.py: the curves, in this namespace only.
    assert _rule_set(role["rules"]) == {
        ("", "secrets", "create", ()),
        ("", "secrets", "get", (secret,)),
        ("", "secrets", "update", (secret,)),
        *(("", "configmaps", v, ()) for v in ("get", "list", "create", "update", "delete")),
    }
    args = _controller_args(docs, container)
    # The Secret lives in the lease namespace (trainops/commands/controller.py).
    assert args.lease_namespace == role["metadata"]["namespace"] == NAMESPACE
    service = _one(docs, "Service", CONTROLLER)
    (port,) = service["spec"]["ports"]
    assert args.progress_url == f"https://{CONTROLLER}.{NAMESPACE}.svc:{port['port']}"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[port["targetPort"]] == args.progress_port
    labels = _one(docs, "Deployment", CONTROLLER)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_the_lease_role_lives_where_the_controller_puts_its_lease(
    docs: tuple[dict[str, Any], ...], container: dict[str, Any]
) -> None:
    role = _one(docs, "Role", f"{CONTROLLER}-leader-election")
    assert _rule_set(role["rules"]) == _lease_rules()
    args = _controller_args(docs, container)
    assert args.leader_elect
    assert args.lease_namespace == role["metadata"]["namespace"] == NAMESPACE


def test_the_bindings_give_the_roles_to_the_controllers_service_account(
    docs: tuple[dict[str, Any], ...],
) -> None:
    account = _one(docs, "ServiceAccount", CONTROLLER)
    subject = {
        "kind": "ServiceAccount",
        "name": account["metadata"]["name"],
        "namespace": account["metadata"]["namespace"],
    }
    for binding_kind, role_kind, name in (
        ("ClusterRoleBinding", "ClusterRole", CONTROLLER),
        ("RoleBinding", "Role", f"{CONTROLLER}-leader-election"),
        ("RoleBinding", "Role", f"{CONTROLLER}-progress"),
    ):
        binding = _one(docs, binding_kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        role = _one(docs, role_kind, name)
        if binding_kind == "RoleBinding":
            assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]
    pod = _one(docs, "Deployment", CONTROLLER)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_the_controller_command_line_parses_with_trainops_own_parser(
    docs: tuple[dict[str, Any], ...], container: dict[str, Any]
) -> None:
    from trainops.commands import controller as command

    args = _controller_args(docs, container)
    assert args.command == "controller"
    assert args.func is command.run
    assert args.bind == "0.0.0.0"
    assert args.kubeconfig is None  # in-cluster credentials: the ServiceAccount's token
    # Two replicas are only safe with one leader.
    assert _one(docs, "Deployment", CONTROLLER)["spec"]["replicas"] == 2
    assert args.leader_elect
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": args.port, "progress": args.progress_port}


async def test_the_probes_ask_what_the_controller_serves(
    docs: tuple[dict[str, Any], ...], container: dict[str, Any]
) -> None:
    from aiohttp.test_utils import TestClient, TestServer
    from prometheus_client import CollectorRegistry

    from kube.probes import create_app

    args = _controller_args(docs, container)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    probes = {
        "liveness": container["livenessProbe"]["httpGet"],
        "readiness": container["readinessProbe"]["httpGet"],
    }
    assert probes["liveness"]["path"] == "/healthz"
    assert probes["readiness"]["path"] == "/readyz"
    async with TestClient(TestServer(create_app([CollectorRegistry()], dict))) as client:
        for probe in probes.values():
            port = probe["port"]
            assert (ports[port] if isinstance(port, str) else port) == args.port
            assert probe.get("scheme", "HTTP") == "HTTP"
            response = await client.get(probe["path"])
            assert response.status == 200, probe
        # The named port is what Prometheus scrapes.
        assert (await client.get("/metrics")).status == 200


def test_the_controller_pod_is_hardened_like_the_webhook(
    docs: tuple[dict[str, Any], ...], container: dict[str, Any]
) -> None:
    deployment = _one(docs, "Deployment", CONTROLLER)
    webhook = _one(docs, "Deployment", "trainops-webhook")["spec"]["template"]["spec"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == webhook["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"] == webhook["containers"][0]["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    assert container["image"] == webhook["containers"][0]["image"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    pdb = _one(docs, "PodDisruptionBudget", CONTROLLER)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


# Every API call the controller makes, by the module that makes it: (module, client methods,
# resource constants, subresource). `test_the_controller_calls_are_the_ones_listed` keeps this
# table true to the code; `test_every_controller_call_is_allowed_by_its_rbac` checks the rules.
CONTROLLER_CALLS: tuple[tuple[str, frozenset[str], tuple[str, ...], str | None], ...] = (
    # controller/manager.py starts one Informer per job kind, per child kind, on quotas and on
    # nodes.
    (
        "kube/informer.py",
        frozenset({"list", "watch"}),
        ("TFJOBS", "XGBJOBS", "PODS", "SERVICES", "DEPLOYMENTS", "RESOURCEQUOTAS", "NODES"),
        None,
    ),
    ("controller/reconciler.py", frozenset({"get"}), ("TFJOBS", "XGBJOBS"), None),
    ("controller/reconciler.py", frozenset({"replace"}), ("TFJOBS", "XGBJOBS"), "status"),
    (
        "controller/reconciler.py",
        frozenset({"create", "delete"}),
        ("PODS", "SERVICES", "DEPLOYMENTS"),
        None,
    ),
    ("controller/reconciler.py", frozenset({"replace"}), ("DEPLOYMENTS",), None),
    ("kube/events.py", frozenset({"create", "patch"}), ("EVENTS",), None),
    ("controller/keeplogs.py", frozenset({"request"}), ("PODS",), "log"),
    ("controller/keeplogs.py", frozenset({"get", "create", "replace"}), ("CONFIGMAPS",), None),
    ("kube/leader.py", frozenset({"get", "create", "replace"}), ("LEASES",), None),
    ("controller/progress_keys.py", frozenset({"get", "create", "replace"}), ("SECRETS",), None),
    (
        "controller/progress_server.py",
        frozenset({"get", "list", "create", "replace", "delete"}),
        ("CONFIGMAPS",),
        None,
    ),
)
_VERB = {
    "get": "get",
    "list": "list",
    "watch": "watch",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
    "request": "get",  # the escape hatch: the controller's only request is a GET of pods/log
}
_CLIENT_METHODS = {*_VERB, "request", "stream_lines"}


def _controller_modules() -> dict[str, ast.Module]:
    """controller/*.py and every kube module they import, transitively (by relative path)."""
    return modules_with_their_kube("controller")


def modules_with_their_kube(*packages: str) -> dict[str, ast.Module]:
    """`packages`' *.py and every kube module they import, transitively (by relative path)."""
    trees: dict[str, ast.Module] = {}
    todo = sorted(str(p.relative_to(ROOT)) for d in packages for p in (ROOT / d).rglob("*.py"))
    while todo:
        path = todo.pop()
        if path in trees or not (ROOT / path).is_file():
            continue
        tree = trees[path] = ast.parse((ROOT / path).read_text(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "kube":
                todo += [f"kube/{alias.name}.py" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kube."):
                todo.append(node.module.replace(".", "/") + ".py")  # type: ignore[union-attr]
    return trees


def _resource_constants(tree: ast.Module) -> set[str]:
    """`resources.NAME` and `from kube.resources import NAME`, for the constants only."""
    from kube import resources

    constants = {
        name
        for name in resources.__all__
        if isinstance(getattr(resources, name), resources.Resource)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "resources"
        ):
            found.add(node.attr)
        elif isinstance(node, ast.ImportFrom) and node.module == "kube.resources":
            found |= {alias.name for alias in node.names}
    return found & constants


def _client_calls(tree: ast.Module) -> set[str]:
    """Methods called on something named `client` (`client.get(…)`, `self.client.patch(…)`)."""
    calls: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func.value
            named = (isinstance(target, ast.Name) and target.id == "client") or (
                isinstance(target, ast.Attribute) and target.attr == "client"
            )
            if named and node.func.attr in _CLIENT_METHODS:
                calls.add(node.func.attr)
    return calls


def test_the_controller_calls_are_the_ones_listed() -> None:
    trees = _controller_modules()
    assert {"controller/manager.py", "kube/leader.py", "kube/events.py"} <= set(trees)
    used = set().union(*(_resource_constants(t) for t in trees.values()))
    listed = {name for _, _, names, _ in CONTROLLER_CALLS for name in names}
    assert used == listed, "a resource the controller uses is missing from CONTROLLER_CALLS"
    for path, tree in sorted(trees.items()):
        methods = {m for module, ms, _, _ in CONTROLLER_CALLS if module == path for m in ms}
        assert _client_calls(tree) == methods, f"{path}: client calls changed"


def test_every_controller_call_is_allowed_by_its_rbac(docs: tuple[dict[str, Any], ...]) -> None:
    from controller.manager import ControllerSettings
    from kube import resources

    cluster_rules = _one(docs, "ClusterRole", CONTROLLER)["rules"]
    from controller.progress_server import ProgressSettings

    lease_rules = _one(docs, "Role", f"{CONTROLLER}-leader-election")["rules"]
    progress_rules = _one(docs, "Role", f"{CONTROLLER}-progress")["rules"]
    lease = ControllerSettings().lease_name
    secret = ProgressSettings().secret_name
    for module, methods, names, subresource in CONTROLLER_CALLS:
        for name in names:
            resource = getattr(resources, name)
            plural = f"{resource.plural}/{subresource}" if subresource else resource.plural
            for method in methods:
                verb = _VERB[method]
                if resource is resources.LEASES:
                    allowed = _grants(lease_rules, resource.group, plural, verb, lease)
                elif resource in (resources.SECRETS, resources.CONFIGMAPS):
                    only = secret if resource is resources.SECRETS else None
                    allowed = _grants(progress_rules, resource.group, plural, verb, only)
                else:
                    allowed = _grants(cluster_rules, resource.group, plural, verb, None)
                assert allowed, f"{module}: {method} {resource.group}/{plural} is not granted"


def test_the_image_holds_every_package_the_wheel_needs() -> None:
    """The controller runs from the image: every package pyproject builds must be copied in —
    all but the embedded cluster, which deploy/ never runs (the `local` extra)."""
    import tomllib

    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in include}
    copied = set(re.findall(r"^COPY (\w+)/ \1/$", (ROOT / "Dockerfile").read_text(), re.M))
    assert packages - {"localcluster"} <= copied
    assert "localcluster" not in copied


def test_the_controller_objects_are_valid_against_the_kubernetes_schemas() -> None:
    """Strict (unknown fields rejected) OpenAPI validation, as the API server would do."""
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for doc in _render("deploy/controller"):
        kubernetes_validate.validate(doc, version, strict=True)


# -- the webhook base's RBAC -----------------------------------------------------------------------

WEBHOOK = "trainops-webhook"


def _webhook_rules() -> dict[str, set[tuple[str, str, str, tuple[str, ...]]]]:
    """certs/manager.py's calls, by the Role kind that grants them: its Secret (get; replace to
    renew; never create: deploy/ ships it empty), the caBundle of its webhook configurations
    (get, replace), and the job CRDs (get only: see the conversion test below)."""
    from trainops.commands.webhook import DEFAULT_SECRET_NAME
    from webhook.configurations import CONFIGURATION_NAME, TRAINING_JOB_CRDS

    return {
        "Role": {("", "secrets", verb, (DEFAULT_SECRET_NAME,)) for verb in ("get", "update")},
        "ClusterRole": {
            *(
                ("admissionregistration.k8s.io", kind, verb, (CONFIGURATION_NAME,))
                for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
                for verb in ("get", "update")
            ),
            (
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                "get",
                tuple(sorted(TRAINING_JOB_CRDS)),
            ),
        },
    }


def test_the_webhook_roles_grant_exactly_what_its_certificate_manager_needs(
    docs: tuple[dict[str, Any], ...],
) -> None:
    expected = _webhook_rules()
    assert _rule_set(_one(docs, "Role", "trainops-webhook-certs")["rules"]) == expected["Role"]
    cluster_role = _one(docs, "ClusterRole", "trainops-webhook-cabundle")
    assert _rule_set(cluster_role["rules"]) == expected["ClusterRole"]
    assert "aggregationRule" not in cluster_role
    # get and replace (update) as granted; create only for a missing Secret, which deploy/
    # ships (empty), so the webhook needs no create.
    manager = ast.parse((ROOT / "certs" / "manager.py").read_text())
    assert _client_calls(manager) == {"get", "create", "replace"}, "certs/manager.py calls changed"
    assert _one(docs, "Secret", "trainops-webhook-certs")["metadata"]["namespace"] == NAMESPACE


def test_the_job_crds_have_no_conversion_webhook_so_the_webhook_only_reads_them() -> None:
    """The manager writes a CRD only to put the CA bundle into its conversion webhook
    (certs/inject.py `crd_with_ca_bundle`). Give a job CRD `strategy: Webhook` and this fails
    until the webhook's ClusterRole grants `update` on it as well."""
    from certs.inject import crd_with_ca_bundle
    from webhook.configurations import TRAINING_JOB_CRDS

    for name in TRAINING_JOB_CRDS:
        plural, group = name.split(".", 1)
        crd = yaml.safe_load((ROOT / "deploy" / "crds" / f"{group}_{plural}.yaml").read_text())
        assert crd["metadata"]["name"] == name
        assert crd_with_ca_bundle(crd, "Y2E=") is None, f"{name} has a conversion webhook"
