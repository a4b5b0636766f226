"""deploy/gitops: `trainops gitops` as `kubectl apply --server-side -k deploy` installs it.

Checked as the controller's base is (tests/test_deploy.py, whose helpers this uses): the base
renders alone and in the top level; its ClusterRole is asserted rule by rule against a scan of
the calls the code makes with the service's own identity (`GITOPS_CALLS`: gitops/, dashboard/ —
served by the same process — and the kube/ modules they import), and the sync engine's calls,
made impersonating each repository's ServiceAccount, are kept out of it; the Lease's Role sits
where the Deployment puts the Lease; the Deployment's arguments parse with trainops' own parser
as `trainops gitops` with the shared-cluster tenancy; the probes are public routes of the
component the command serves; the pod is hardened like the others; the Service and the
NetworkPolicy open only the served port. tests/reference/test_gitops_deployed.py runs the
Deployment's arguments with the ServiceAccount's token on a real kube-apiserver."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.manifests import container_arg
from tests.test_deploy import (
    _VERB,
    CONTROLLER,
    NAMESPACE,
    ROOT,
    _client_calls,
    _one,
    _render,
    _resource_constants,
    _rule_set,
    modules_with_their_kube,
)

GITOPS = "trainops-gitops"
SA_POLICY = "trainops-jobrepository-service-account"
CLUSTER_POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
GITOPS_LEASE_ROLE = f"{GITOPS}-leader-election"
GITOPS_PROGRESS_ROLE = f"{GITOPS}-progress"


@pytest.fixture(scope="module")
def docs() -> tuple[dict[str, Any], ...]:
    return _render("deploy")


@pytest.fixture(scope="module")
def gitops_container(docs: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    pod = _one(docs, "Deployment", GITOPS)["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return only


def test_the_gitops_base_renders_alone_and_in_the_top_level() -> None:
    expected = {
        ("ServiceAccount", GITOPS),
        ("ClusterRole", GITOPS),
        ("ClusterRoleBinding", GITOPS),
        ("Role", GITOPS_LEASE_ROLE),
        ("RoleBinding", GITOPS_LEASE_ROLE),
        ("Role", GITOPS_PROGRESS_ROLE),
        ("RoleBinding", GITOPS_PROGRESS_ROLE),
        ("Deployment", GITOPS),
        ("Service", GITOPS),
        ("NetworkPolicy", GITOPS),
        ("PodDisruptionBudget", GITOPS),
        ("ValidatingAdmissionPolicy", SA_POLICY),
        ("ValidatingAdmissionPolicyBinding", SA_POLICY),
    }
    alone = _render("deploy/gitops")
    assert {(d["kind"], d["metadata"]["name"]) for d in alone} == expected
    top = {(d["kind"], d["metadata"]["name"]) for d in _render("deploy")}
    assert expected <= top
    for doc in alone:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainops"
        if doc["kind"] not in ("ClusterRole", "ClusterRoleBinding", *CLUSTER_POLICY_KINDS):
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_naming_a_service_account_needs_impersonate_on_it(
    docs: tuple[dict[str, Any], ...],
) -> None:
    """deploy/gitops/serviceaccount-policy.yaml: on CREATE, and on an UPDATE that changes the
    spec, of any JobRepository naming an account, the requesting user must be allowed to
    impersonate that account; enforced (Deny) everywhere. tests/reference/
    test_service_account_policy.py shows kube-apiserver enforcing it."""
    policy = _one(docs, "ValidatingAdmissionPolicy", SA_POLICY)["spec"]
    (rule,) = policy["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["gitops.trainops.dev"]
    assert rule["resources"] == ["jobrepositories"]  # not jobrepositories/status
    assert rule["operations"] == ["CREATE", "UPDATE"]
    assert policy["failurePolicy"] == "Fail"
    (validation,) = policy["validations"]
    expression = " ".join(validation["expression"].split())
    assert "oldObject.spec == object.spec" in expression
    assert (
        "authorizer.group('').resource('serviceaccounts').namespace(object.metadata.namespace) "
        ".name(variables.account).check('impersonate').allowed()"
    ) in expression
    binding = _one(docs, "ValidatingAdmissionPolicyBinding", SA_POLICY)["spec"]
    assert binding == {"policyName": SA_POLICY, "validationActions": ["Deny"]}


# Every API call `trainops gitops` makes with its own identity, by the module that makes it:
# (module, client methods, resource names, subresource). Resource names are `kube.resources`
# constants, or JOB_REPOSITORIES (gitops.runtime.reconciler). `test_the_gitops_calls_are_the_ones_listed`
# keeps the table true to the code, `test_every_gitops_call_is_allowed_by_its_rbac` checks it
# against the rules. A repository's own reads and writes are not here: they are made
# impersonating its ServiceAccount (GITOPS_IMPERSONATED), and RBAC asks that account.
GITOPS_CALLS: tuple[tuple[str, frozenset[str], tuple[str, ...], str | None], ...] = (
    # gitops/runtime/manager.py's informers: JobRepositories and both job kinds.
    (
        "kube/informer.py",
        frozenset({"list", "watch"}),
        ("JOB_REPOSITORIES", "TFJOBS", "XGBJOBS"),
        None,
    ),
    # gitops/runtime/acting.py's namespaces and accounts, watched metadata-only (their Pod
    # Security labels; that an account exists), only where these rights are granted.
    ("kube/informer.py", frozenset({"list", "watch"}), ("NAMESPACES", "SERVICE_ACCOUNTS"), None),
    # A fresh read of a repository per round; its status replaced (update), never patched.
    ("gitops/runtime/reconciler.py", frozenset({"get"}), ("JOB_REPOSITORIES",), None),
    # The repository's ServiceAccount must exist before anything is done as it, and the Pod Security level of the namespaces its jobs go to (the pre-flight).
    ("gitops/runtime/acting.py", frozenset({"get"}), ("SERVICE_ACCOUNTS", "NAMESPACES"), None),
    # Its status replaced (update), never patched; read again after a conflict.
    ("gitops/runtime/statuswrite.py", frozenset({"replace"}), ("JOB_REPOSITORIES",), "status"),
    ("gitops/runtime/statuswrite.py", frozenset({"get"}), ("JOB_REPOSITORIES",), None),
    # After the user's own review: DELETE /api/v1/repositories/NS/NAME, and a sync or refresh
    # asked of any replica, a merge patch of its annotations that the leader carries out
    # (gitops/engine/triggers.py).
    ("gitops/runtime/manager.py", frozenset({"delete", "patch"}), ("JOB_REPOSITORIES",), None),
    # Who a bearer token is, and what its user may do.
    (
        "gitops/api/reviews.py",
        frozenset({"create"}),
        ("TOKEN_REVIEWS", "SUBJECT_ACCESS_REVIEWS"),
        None,
    ),
    # The dashboard's job page and actions, after the user's own review: the job (get), pause
    # and resume (a server-side apply: patch), delete; its pods (by label) and Events; a log.
    ("dashboard/backend.py", frozenset({"get", "patch", "delete"}), ("TFJOBS", "XGBJOBS"), None),
    ("dashboard/backend.py", frozenset({"get", "list"}), ("PODS",), None),
    ("dashboard/backend.py", frozenset({"list"}), ("EVENTS",), None),
    ("dashboard/backend.py", frozenset({"request", "stream_lines"}), ("PODS",), "log"),
    # The job's training curves, in the controller's namespace (a Role there: docs/PROGRESS.md).
    ("dashboard/backend.py", frozenset({"get"}), ("CONFIGMAPS",), None),
    ("kube/events.py", frozenset({"create", "patch"}), ("EVENTS",), None),
    ("kube/leader.py", frozenset({"get", "create", "replace"}), ("LEASES",), None),
    # Discovery documents (/api, /apis/…): readable by every authenticated user
    # (system:discovery), no rule needed.
    ("gitops/runtime/discovery.py", frozenset({"request"}), (), None),
)
GITOPS_IMPERSONATED = {
    # gitops/runtime/acting.py: the engine (its applies, prunes and the live reads of kinds outside the
    # job caches) and the secretRef read on `client.impersonating(...)`.
    "gitops/runtime/sync.py": frozenset({"patch", "delete"}),
    "gitops/runtime/livestate.py": frozenset({"get", "list"}),
    # The whole objects behind a metadata cache's entries, read with the reader's client.
    "gitops/runtime/metacache.py": frozenset({"get"}),
    "gitops/runtime/acting.py": frozenset({"get"}),
    # A repository's own push secret (spec.push.secretRef), read as its account on
    # `acting.acting_as(...)` for the push hook.
    "gitops/runtime/pushsecrets.py": frozenset({"get"}),
    # The cache reads' SelfSubjectAccessReviews, asked as the repository's identity (every
    # authenticated user may create them: system:basic-user); and as the reconciler itself,
    # whether it may list and watch a kind outside the job caches: only then is a metadata
    # informer started for it (gitops/runtime/metacache.py), so no rule above is needed for
    # one; deploy/ grants none, and such kinds are listed as the repository's identity.
    "gitops/runtime/tenantview.py": frozenset({"create"}),
}
# `request` and `stream_lines` are a GET of a subresource here (pods/log).
_GITOPS_VERB = {**_VERB, "request": "get", "stream_lines": "get"}


def _gitops_resource(name: str) -> Any:
    from gitops.runtime.reconciler import JOB_REPOSITORIES
    from kube import resources

    return JOB_REPOSITORIES if name == "JOB_REPOSITORIES" else getattr(resources, name)


def _gitops_modules() -> dict[str, ast.Module]:
    """gitops/**/*.py, dashboard/**/*.py (served by the same process) and the kube modules they
    import."""
    return modules_with_their_kube("gitops", "dashboard")


def _names_used(tree: ast.Module) -> set[str]:
    found = _resource_constants(tree)
    if any(isinstance(n, ast.Name) and n.id == "JOB_REPOSITORIES" for n in ast.walk(tree)):
        found.add("JOB_REPOSITORIES")
    return found


def test_the_gitops_calls_are_the_ones_listed() -> None:
    trees = _gitops_modules()
    assert {"gitops/runtime/manager.py", "kube/leader.py", "kube/informer.py"} <= set(trees)
    for path, tree in sorted(trees.items()):
        methods = {m for module, ms, _, _ in GITOPS_CALLS if module == path for m in ms}
        methods |= GITOPS_IMPERSONATED.get(path, frozenset())
        assert _client_calls(tree) == methods, f"{path}: client calls changed"
    # Each resource listed is named where the call is made (the informers: where they start,
    # the manager's own and the namespaces' of gitops/runtime/acting.py).
    starts = ("gitops/runtime/manager.py", "gitops/runtime/acting.py")
    for module, _, names, _ in GITOPS_CALLS:
        where = starts if module == "kube/informer.py" else (module,)
        if not module.startswith("kube/") or module == "kube/informer.py":
            used = set().union(*(_names_used(trees[w]) for w in where))
            assert set(names) <= used, f"{where}: {names}"


def test_the_gitops_engine_acts_only_through_impersonating_clients() -> None:
    """The calls left out of the ClusterRole: the sync engine's client is always an
    impersonating view (gitops/runtime/acting.py), or the reconciler's own engine for repositories the
    rules let act as the reconciler (off unless --allow-reconciler-identity)."""
    acting = (ROOT / "gitops" / "runtime" / "acting.py").read_text()
    assert "client.impersonating(identity.user, identity.groups)" in acting
    assert "client = acting_as(self.client, identity)" in acting
    assert re.search(r"SyncEngine\(\s*client, self\.discovery", acting)
    sync = (ROOT / "gitops" / "runtime" / "sync.py").read_text()
    assert "self.reader = LiveReader(client, discovery, cache, metadata)" in sync  # same client
    livestate = (ROOT / "gitops" / "runtime" / "livestate.py").read_text()
    assert "self.access = CacheAccess(client)" in livestate  # cache reads asked as it too
    assert "client=self.client, access=self.access" in livestate  # metadata caches: as it too


def test_the_tenant_view_is_the_only_way_to_the_cache_and_client_on_a_tenants_behalf() -> None:
    """One object is a tenant's view: `LiveReader` (inside each repository's SyncEngine). Only
    gitops/runtime/acting.py makes impersonating clients; only gitops/runtime/livestate.py reads
    the shared live cache's objects (`tracked_by`); the other modules naming the live cache only
    build it (the manager) or pass it on. A new path on a tenant's behalf fails here, to be
    reviewed."""
    impersonating: set[str] = set()
    cache_users: set[str] = set()
    cache_readers: set[str] = set()
    for path in sorted((ROOT / "gitops").rglob("*.py")) + sorted(
        (ROOT / "dashboard").rglob("*.py")
    ):
        text = path.read_text()
        name = str(path.relative_to(ROOT))
        if ".impersonating(" in text:
            impersonating.add(name)
        if re.search(r"^from gitops\.runtime(\.livecache| import .*\blivecache\b)", text, re.M):
            cache_users.add(name)
        if ".tracked_by(" in text:
            cache_readers.add(name)
    assert impersonating == {"gitops/runtime/acting.py"}
    assert cache_readers == {"gitops/runtime/livestate.py"}
    # The metadata caches' entries are read only by `metacache.read`, each after the
    # identity's own review of its namespace, its whole object with the identity's client.
    metacache = (ROOT / "gitops" / "runtime" / "metacache.py").read_text()
    assert re.search(r"if not await access\.may_list\(", metacache)
    assert cache_users == {
        "gitops/runtime/livestate.py",
        "gitops/runtime/metacache.py",
        "gitops/runtime/manager.py",
        "gitops/runtime/reconciler.py",
        "gitops/runtime/sync.py",
    }


def test_the_gitops_cluster_role_grants_exactly_what_the_code_needs(
    docs: tuple[dict[str, Any], ...],
) -> None:
    role = _one(docs, "ClusterRole", GITOPS)
    assert "aggregationRule" not in role
    granted = _rule_set(role["rules"])
    needed: set[tuple[str, str, str, tuple[str, ...]]] = set()
    for _, methods, names, subresource in GITOPS_CALLS:
        for name in names:
            resource = _gitops_resource(name)
            if resource.plural in ("leases", "configmaps"):
                continue  # the Roles in the Lease's namespace and in the controller's
            plural = f"{resource.plural}/{subresource}" if subresource else resource.plural
            needed |= {(resource.group, plural, _GITOPS_VERB[m], ()) for m in methods}
    # Acting as each repository's ServiceAccount (and the groups its tokens carry).
    needed |= {("", "serviceaccounts", "impersonate", ()), ("", "groups", "impersonate", ())}
    assert granted == needed
    # Nothing on what repositories hold (ConfigMaps, Secrets, …): those are the tenants'.
    assert not {r for g, r, _, _ in granted if (g, r) in {("", "secrets"), ("", "configmaps")}}


def test_the_gitops_lease_role_lives_in_its_own_namespace(
    docs: tuple[dict[str, Any], ...],
) -> None:
    from gitops.runtime.manager import GitOpsSettings

    lease = GitOpsSettings().lease_name
    role = _one(docs, "Role", GITOPS_LEASE_ROLE)
    assert role["metadata"]["namespace"] == NAMESPACE
    assert _rule_set(role["rules"]) == {
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", (lease,)),
        ("coordination.k8s.io", "leases", "update", (lease,)),
    }


def test_the_dashboard_reads_configmaps_in_the_controllers_namespace_only(
    docs: tuple[dict[str, Any], ...],
) -> None:
    role = _one(docs, "Role", GITOPS_PROGRESS_ROLE)
    controller = _one(docs, "Role", "trainops-controller-progress")
    assert role["metadata"]["namespace"] == controller["metadata"]["namespace"] == NAMESPACE
    assert _rule_set(role["rules"]) == {("", "configmaps", "get", ())}


def test_the_gitops_bindings_give_the_roles_to_its_service_account(
    docs: tuple[dict[str, Any], ...],
) -> None:
    account = _one(docs, "ServiceAccount", GITOPS)
    subject = {"kind": "ServiceAccount", "name": GITOPS, "namespace": NAMESPACE}
    for binding_kind, role_kind, name in (
        ("ClusterRoleBinding", "ClusterRole", GITOPS),
        ("RoleBinding", "Role", GITOPS_LEASE_ROLE),
        ("RoleBinding", "Role", GITOPS_PROGRESS_ROLE),
    ):
        binding = _one(docs, binding_kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        if binding_kind == "RoleBinding":
            assert (
                binding["metadata"]["namespace"]
                == _one(docs, role_kind, name)["metadata"]["namespace"]
            )
    pod = _one(docs, "Deployment", GITOPS)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_the_gitops_pod_is_hardened_like_the_others(
    docs: tuple[dict[str, Any], ...], gitops_container: dict[str, Any]
) -> None:
    deployment = _one(docs, "Deployment", GITOPS)
    controller = _one(docs, "Deployment", CONTROLLER)["spec"]["template"]["spec"]
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"] == controller["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert gitops_container["securityContext"] == controller["containers"][0]["securityContext"]
    assert gitops_container["securityContext"]["readOnlyRootFilesystem"] is True
    assert gitops_container["image"] == controller["containers"][0]["image"]
    assert {"cpu", "memory"} <= set(gitops_container["resources"]["requests"])
    assert "memory" in gitops_container["resources"]["limits"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (spread,) = pod["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"].items() <= labels.items()
    pdb = _one(docs, "PodDisruptionBudget", GITOPS)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # The only writable paths are emptyDirs: the git cache and git's private HOME (/tmp).
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in gitops_container["volumeMounts"]}
    assert set(mounts.values()) == set(volumes)
    assert all("emptyDir" in v and v["emptyDir"].get("sizeLimit") for v in volumes.values())
    assert "/tmp" in mounts


def test_the_service_and_the_network_policy_open_only_the_served_port(
    docs: tuple[dict[str, Any], ...], gitops_container: dict[str, Any]
) -> None:
    labels = _one(docs, "Deployment", GITOPS)["spec"]["template"]["metadata"]["labels"]
    (port,) = gitops_container["ports"]
    service = _one(docs, "Service", GITOPS)
    assert service["spec"]["selector"].items() <= labels.items()
    (served,) = service["spec"]["ports"]
    assert served["targetPort"] in (port["name"], port["containerPort"])
    policy = _one(docs, "NetworkPolicy", GITOPS)["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    # Ingress only, to that port, from anywhere (users and Git hosts); egress unrestricted
    # (Git remotes may be anywhere: the manifest says why).
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert "from" not in rule
    assert [p["port"] for p in rule["ports"]] in ([port["name"]], [port["containerPort"]])


def _gitops_args(docs: tuple[dict[str, Any], ...], container: dict[str, Any]) -> Any:
    from trainops.cli import build_parser

    assert "command" not in container  # the image's ENTRYPOINT is `trainops`
    deployment = _one(docs, "Deployment", GITOPS)
    argv = [
        container_arg(a, container, deployment["metadata"]["namespace"]) for a in container["args"]
    ]
    return build_parser().parse_args(argv)


def test_the_gitops_command_line_parses_with_trainops_own_parser(
    docs: tuple[dict[str, Any], ...], gitops_container: dict[str, Any]
) -> None:
    from gitops.engine.tenancy import Boundaries
    from trainops.commands import gitops as command
    from trainops.commands import up_gitops

    args = _gitops_args(docs, gitops_container)
    assert args.command == "gitops"
    assert args.func is command.run
    assert args.kubeconfig is None  # in-cluster credentials: the ServiceAccount's token
    assert args.bind == "0.0.0.0"
    # Two replicas are only safe with one leader, whose Lease the Role covers.
    assert args.leader_elect
    assert args.lease_namespace == NAMESPACE
    assert args.namespace is None  # every namespace's JobRepositories
    ports = {p["name"]: p["containerPort"] for p in gitops_container["ports"]}
    assert ports == {"http": args.port}
    # The git cache is the emptyDir (the root filesystem is read-only).
    mounts = {m["mountPath"]: m["name"] for m in gitops_container["volumeMounts"]}
    assert mounts[str(args.cache_dir)] == "git-cache"
    # A shared cluster's tenancy: each repository as its own ServiceAccount, its namespace only.
    assert up_gitops.boundaries(args, embedded=False) == Boundaries()
    # The push hook's secret: the env the command reads, from an optional Secret.
    env = {e["name"]: e for e in gitops_container["env"]}
    ref = env[command.SECRET_ENV]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "trainops-gitops-webhook", "key": "secret", "optional": True}


async def test_the_probes_ask_what_the_gitops_command_serves_without_a_token(
    docs: tuple[dict[str, Any], ...], gitops_container: dict[str, Any], tmp_path: Path
) -> None:
    """The probes' paths are routes of the component `trainops gitops` serves, answered
    without a token (a kubelet has none) on the port the command listens on; the API beside
    them is not. The component is built over a client of an address where nothing listens: the
    reconciler is not started, so /readyz says why it is not ready (503, not 401).
    tests/reference/test_gitops_deployed.py probes the running command itself."""
    from aiohttp.test_utils import TestClient, TestServer

    from gitops.runtime.manager import GitOpsSettings
    from kube.client import Client
    from kube.config import Config
    from kube.manager import LeaderElection, Manager
    from trainops.commands import gitops_service

    args = _gitops_args(docs, gitops_container)
    ports = {p["name"]: p["containerPort"] for p in gitops_container["ports"]}
    client = Client.from_config(Config(server="http://127.0.0.1:9"), timeout=5)
    built = gitops_service.component(
        Manager(client, leader_election=LeaderElection(enabled=False)),
        tmp_path / "cache",
        GitOpsSettings(),
        webhook_secret=None,
        allow_remote_writes=True,
    )
    probes = {
        "liveness": gitops_container["livenessProbe"]["httpGet"],
        "readiness": gitops_container["readinessProbe"]["httpGet"],
    }
    assert probes["liveness"]["path"] == "/healthz"
    assert probes["readiness"]["path"] == "/readyz"
    try:
        async with TestClient(TestServer(built.app)) as site:
            for probe in probes.values():
                port = probe["port"]
                assert (ports[port] if isinstance(port, str) else port) == args.port
                assert probe.get("scheme", "HTTP") == "HTTP"
            assert (await site.get("/healthz")).status == 200
            readiness = await site.get("/readyz")
            assert readiness.status == 503
            assert (await readiness.text()).endswith("readyz check failed\n")
            assert (await site.get("/metrics")).status == 200  # what Prometheus scrapes
            assert (await site.get("/api/v1/repositories")).status == 401
    finally:
        await client.close()


def test_the_gitops_objects_are_valid_against_the_kubernetes_schemas() -> None:
    import kubernetes_validate

    version = kubernetes_validate.latest_version()
    for doc in _render("deploy/gitops"):
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_optional_watch_grant_binds_the_gitops_account_to_list_and_watch_and_never_secrets() -> (
    None
):
    """deploy/gitops/optional/watch-other-kinds.yaml (not in the base): only list and watch, on
    kinds other than Secrets, bound to the Deployment's ServiceAccount; the base does not hold it."""
    import yaml

    docs = list(
        yaml.safe_load_all((ROOT / "deploy/gitops/optional/watch-other-kinds.yaml").read_text())
    )
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert {verb for rule in role["rules"] for verb in rule["verbs"]} == {"list", "watch"}
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert "secrets" not in resources and "*" not in resources
    assert {"configmaps", "services"} <= resources
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    deployment = _one(_render("deploy/gitops"), "Deployment", GITOPS)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]
    assert "optional" not in (ROOT / "deploy/gitops/kustomization.yaml").read_text()
