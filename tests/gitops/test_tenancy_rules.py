"""The tenancy rules (`gitops.engine.tenancy`), pure: identity, boundaries, URLs and Secrets."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gitops.engine import tenancy
from gitops.engine.entries import entries_from_text
from gitops.engine.preflight import preflight
from gitops.engine.tenancy import Boundaries, Identity, Refused

SAFE = Boundaries()


def repo(namespace: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gitops.trainops.dev/v1alpha1",
        "kind": "JobRepository",
        "metadata": {"name": "jobs", "namespace": namespace},
        "spec": {"repoURL": "https://git.example.com/team-a/jobs.git", **spec},
    }


def obj(api_version: str, kind: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "x"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


# --- identity ---------------------------------------------------------------------------------

IDENTITIES = {
    "the repository's own account": (
        repo(serviceAccountName="deployer"),
        SAFE,
        Identity("team-a", "deployer"),
    ),
    "the reconciler's default when the repository names none": (
        repo(),
        Boundaries(default_service_account="gitops"),
        Identity("team-a", "gitops"),
    ),
    "the repository's own account wins over the default": (
        repo(serviceAccountName="deployer"),
        Boundaries(default_service_account="gitops"),
        Identity("team-a", "deployer"),
    ),
    "embedded up: the reconciler itself": (repo(), Boundaries.single_user(), None),
}


@pytest.mark.parametrize(
    ("repository", "boundaries", "expected"), IDENTITIES.values(), ids=IDENTITIES
)
def test_a_repository_acts_as_its_service_account_else_the_default(
    repository: dict[str, Any], boundaries: Boundaries, expected: Identity | None
) -> None:
    assert tenancy.identity_for(repository, boundaries) == expected


def test_a_service_account_identity_is_its_user_and_the_groups_its_tokens_carry() -> None:
    identity = Identity("team-a", "deployer")
    assert identity.user == "system:serviceaccount:team-a:deployer"
    assert identity.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:team-a",
        "system:authenticated",
    )


def test_a_repository_without_any_service_account_is_refused_saying_what_to_set() -> None:
    with pytest.raises(Refused) as e:
        tenancy.identity_for(repo(), SAFE)
    assert "set spec.serviceAccountName" in e.value.message
    assert "namespace team-a" in e.value.message
    assert "--default-service-account NAME" in e.value.message


def test_a_malformed_service_account_name_is_refused() -> None:
    with pytest.raises(Refused, match="not a valid ServiceAccount name"):
        tenancy.identity_for(repo(serviceAccountName="Bad Name"), SAFE)


# --- objects ----------------------------------------------------------------------------------

OBJECTS = {
    "a job in its own namespace": (
        obj("batch.tensorstack.dev/v1beta1", "TensorFlowTrainingJob", "team-a"),
        None,
        SAFE,
        None,
    ),
    "a ConfigMap without a namespace goes to the destination": (
        obj("v1", "ConfigMap"),
        None,
        SAFE,
        None,
    ),
    "a Secret in another namespace": (
        obj("v1", "Secret", "team-b"),
        None,
        SAFE,
        (("metadata", "namespace"), "namespace team-b is not the JobRepository's namespace"),
    ),
    "another namespace, allowed": (
        obj("v1", "Secret", "team-b"),
        None,
        Boundaries(allow_cross_namespace=True),
        None,
    ),
    "a ClusterRoleBinding": (
        obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        None,
        SAFE,
        (("kind",), "--allow-cluster-resources ClusterRoleBinding.rbac.authorization.k8s.io"),
    ),
    "a Namespace": (obj("v1", "Namespace"), None, SAFE, (("kind",), "Namespace is cluster-scoped")),
    "a Namespace allowed by kind": (
        obj("v1", "Namespace"),
        None,
        Boundaries(allow_cluster_resources=frozenset({"Namespace"})),
        None,
    ),
    "a CRD allowed by kind.group": (
        obj("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        None,
        Boundaries(
            allow_cluster_resources=frozenset({"CustomResourceDefinition.apiextensions.k8s.io"})
        ),
        None,
    ),
    "allowing one cluster kind allows no other": (
        obj("scheduling.k8s.io/v1", "PriorityClass"),
        None,
        Boundaries(allow_cluster_resources=frozenset({"Namespace"})),
        (("kind",), "PriorityClass is cluster-scoped"),
    ),
    "a third-party kind discovery says is cluster-scoped": (
        obj("example.com/v1", "Tenant"),
        False,
        SAFE,
        (("kind",), "Tenant is cluster-scoped"),
    ),
    "a third-party namespaced kind in its own namespace": (
        obj("example.com/v1", "Widget", "team-a"),
        True,
        SAFE,
        None,
    ),
    "every kind allowed with *": (
        obj("rbac.authorization.k8s.io/v1", "ClusterRole"),
        None,
        Boundaries(allow_cluster_resources=frozenset({"*"})),
        None,
    ),
    # A path step as a name: `…/configmaps/..` is the Namespace's URL, `…/jobs/.` the
    # collection's (the round failed with an internal error once kube refused such URLs).
    "a name that is a path step, whatever is allowed": (
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ".."}},
        True,
        Boundaries.unrestricted(),
        (("metadata", "name"), "metadata.name '..': '..' is not a name"),
    ),
    "a namespace that is a path step": (
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "."}},
        True,
        Boundaries.unrestricted(),
        (("metadata", "namespace"), "metadata.namespace '.': '.' is not a name"),
    ),
}


@pytest.mark.parametrize(
    ("manifest", "namespaced", "boundaries", "expected"), OBJECTS.values(), ids=OBJECTS
)
def test_objects_stay_in_the_repositorys_namespace_and_out_of_cluster_scope_unless_allowed(
    manifest: dict[str, Any],
    namespaced: bool | None,
    boundaries: Boundaries,
    expected: tuple[tuple[str, ...], str] | None,
) -> None:
    got = tenancy.check_object(
        manifest,
        repository_namespace="team-a",
        destination="team-a",
        namespaced=namespaced,
        boundaries=boundaries,
    )
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert got.path == expected[0]
    assert expected[1] in got.message


def test_a_destination_in_another_namespace_is_refused_naming_the_destination() -> None:
    got = tenancy.check_object(
        obj("v1", "ConfigMap"),
        repository_namespace="team-a",
        destination="team-b",
        namespaced=True,
        boundaries=SAFE,
    )
    assert got is not None
    assert got.path == ("metadata",)
    assert got.message.startswith("destination.namespace team-b is not the JobRepository's")
    assert "--allow-cross-namespace" in got.message


MANIFESTS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data: {a: "1"}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: pwn
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
---
apiVersion: v1
kind: Secret
metadata:
  name: stolen
  namespace: team-b
"""


def test_enforce_turns_each_refusal_into_an_entry_error_at_its_line_and_keeps_the_rest() -> None:
    checked = preflight(entries_from_text("all.yaml", MANIFESTS))
    out = tenancy.enforce(
        checked,
        repository_namespace="team-a",
        destination="team-a",
        scopes={("v1", "ConfigMap"): True, ("v1", "Secret"): True},
        boundaries=SAFE,
    )
    settings, binding, secret = out
    assert settings is checked[0] and settings.error is None
    assert binding.desired is None and binding.where == "all.yaml:8"
    assert binding.error is not None and "ClusterRoleBinding is cluster-scoped" in binding.error
    assert secret.desired is None and secret.where == "all.yaml:17"
    assert secret.error is not None and "namespace team-b" in secret.error


# --- sources and Secrets ----------------------------------------------------------------------

SOURCES = {
    "file URL": ("file:///srv/git/team-b/jobs.git", True),
    "absolute path": ("/srv/git/team-b/jobs.git", True),
    "relative path": ("./jobs", True),
    "https": ("https://git.example.com/team-a/jobs.git", False),
    "scp-like": ("git@git.example.com:team-a/jobs.git", False),
    "ssh": ("ssh://git@git.example.com/team-a/jobs.git", False),
}


@pytest.mark.parametrize(("url", "local"), SOURCES.values(), ids=SOURCES)
def test_local_repositories_are_refused_unless_allowed(url: str, local: bool) -> None:
    assert tenancy.is_local(url) is local
    refusal = tenancy.check_source(url, SAFE)
    assert (refusal is not None) is local
    if refusal:
        assert "--allow-local-repos" in refusal
    assert tenancy.check_source(url, Boundaries(allow_local_repos=True)) is None


MATCHES = {
    "the same URL": (
        "https://git.example.com/team-a/jobs.git",
        "https://git.example.com/team-a/jobs.git",
        True,
    ),
    "without .git": (
        "https://git.example.com/team-a/jobs.git",
        "https://git.example.com/team-a/jobs",
        True,
    ),
    "an organisation prefix": (
        "https://git.example.com/team-a/jobs.git",
        "https://git.example.com/team-a/",
        True,
    ),
    "host case": (
        "https://GIT.example.com/team-a/jobs.git",
        "https://git.example.com/team-a",
        True,
    ),
    "a longer name is no path boundary": (
        "https://git.example.com/team-a-evil/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a longer host": (
        "https://git.example.com.evil.io/team-a/x.git",
        "https://git.example.com",
        False,
    ),
    "userinfo naming the host": (
        "https://git.example.com@127.0.0.1:9/x.git",
        "https://git.example.com",
        False,
    ),
    "http is not https": (
        "http://git.example.com/team-a/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "another port": (
        "https://git.example.com:8443/team-a/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "scp-like matches its ssh form": (
        "git@git.example.com:team-a/jobs.git",
        "ssh://git.example.com/team-a",
        True,
    ),
    "empty prefix": ("https://git.example.com/team-a/x.git", "", False),
    "a dot-dot segment out of the prefix": (
        "http://127.0.0.1:18081/team-a/../team-b/x.git",
        "http://127.0.0.1:18081/team-a",
        False,
    ),
    "a dot-dot segment staying inside": (
        "https://git.example.com/team-a/b/../x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a dot segment": ("https://git.example.com/team-a/./x.git", "https://git.example.com", False),
    "an encoded dot-dot": (
        "https://git.example.com/team-a/%2e%2e/team-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "an encoded dot-dot, upper and lower case": (
        "https://git.example.com/team-a/%2E%2e/team-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a twice-encoded dot-dot": (
        "https://git.example.com/team-a/%252e%252e/team-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a dot-dot with a ;parameter": (
        "https://git.example.com/team-a/..;x/team-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "an encoded slash": (
        "https://git.example.com/team-a%2f..%2fteam-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "an encoded backslash": (
        "https://git.example.com/team-a/..%5cteam-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a backslash": (
        "https://git.example.com/team-a/..\\team-b/x.git",
        "https://git.example.com/team-a",
        False,
    ),
    "a dot-dot in scp form": (
        "git@git.example.com:team-a/../team-b/x.git",
        "ssh://git.example.com/team-a",
        False,
    ),
    "a dot-dot in the prefix matches nothing": (
        "https://git.example.com/team-b/x.git",
        "https://git.example.com/team-a/../team-b",
        False,
    ),
    "an escaped unreserved character is the character": (
        "https://git.example.com/team-%61/x.git",
        "https://git.example.com/team-a",
        True,
    ),
    "a dot inside a name is no dot segment": (
        "https://git.example.com/team-a/x.y..z.git",
        "https://git.example.com/team-a",
        True,
    ),
    "an encoded dot inside a name": (
        "https://git.example.com/team-a/v1%2e2.git",
        "https://git.example.com/team-a",
        True,
    ),
}


@pytest.mark.parametrize(("url", "prefix", "expected"), MATCHES.values(), ids=MATCHES)
def test_secret_urls_match_at_path_boundaries(url: str, prefix: str, expected: bool) -> None:
    assert tenancy.url_matches(url, prefix) is expected


def test_the_binding_is_the_longest_secret_url_covering_the_repository() -> None:
    secret = {"stringData": {"url": "https://h/ https://h/team-a/x https://h/team-a"}}
    assert tenancy.secret_binding(secret, "https://h/team-a/x.git") == "https://h/team-a/x"
    assert tenancy.secret_binding(secret, "https://h/team-a/y.git") == "https://h/team-a"
    assert tenancy.secret_binding(secret, "http://h/team-a/y.git") is None


def test_a_dot_segment_repository_url_is_refused_with_the_reason() -> None:
    secret = {"stringData": {"url": "http://127.0.0.1:18081/team-a"}}
    why = tenancy.check_secret(
        secret, "http://127.0.0.1:18081/team-a/../team-b/x.git", where="team-a/git"
    )
    assert why is not None
    assert "'.' or '..' segment" in why
    assert why.startswith("secret team-a/git (secretRef): repoURL ")


def _secret(url: str | None = None, annotation: str | None = None) -> dict[str, Any]:
    secret: dict[str, Any] = {
        "metadata": {"name": "prod-db", "namespace": "team-a"},
        "data": {"password": base64.b64encode(b"hunter2").decode()},
    }
    if url is not None:
        secret["data"]["url"] = base64.b64encode(url.encode()).decode()
    if annotation is not None:
        secret["metadata"]["annotations"] = {tenancy.SECRET_URL_ANNOTATION: annotation}
    return secret


def test_a_secret_naming_no_url_is_sent_nowhere() -> None:
    refusal = tenancy.check_secret(_secret(), "http://127.0.0.1:9/x.git", where="team-a/prod-db")
    assert refusal is not None
    assert refusal.startswith("secret team-a/prod-db (secretRef) names no repository URL")
    assert "add the key url" in refusal


def test_a_secret_for_another_url_is_refused_naming_both() -> None:
    refusal = tenancy.check_secret(
        _secret("https://git.example.com/team-a/"),
        "http://user:pw@127.0.0.1:9/x.git",
        where="team-a/prod-db",
    )
    assert refusal is not None
    assert "is for https://git.example.com/team-a/, not for http://***@127.0.0.1:9/x.git" in refusal
    assert "pw" not in refusal
    assert "pw" not in refusal


def test_a_secret_is_used_for_the_urls_of_its_key_or_its_annotation() -> None:
    url = "https://git.example.com/team-a/jobs.git"
    assert tenancy.check_secret(_secret("https://git.example.com/team-a"), url, where="s") is None
    both = _secret(annotation="https://other.example.com/x, https://git.example.com/team-a/jobs")
    assert tenancy.check_secret(both, url, where="s") is None
    assert tenancy.secret_urls(both) == (
        "https://other.example.com/x",
        "https://git.example.com/team-a/jobs",
    )


# --- live scope -------------------------------------------------------------------------------


def test_live_state_is_read_in_the_repositorys_namespace_unless_wider_rules_are_on() -> None:
    scope = tenancy.live_scope("team-a", "team-a", SAFE)
    assert scope is not None and scope.namespaces == frozenset({"team-a"})
    assert not scope.lists_cluster_kind("", "Namespace")
    wide = tenancy.live_scope("team-a", "team-a", Boundaries(allow_cross_namespace=True))
    assert wide is not None and wide.namespaces is None
    assert tenancy.live_scope("team-a", "team-a", Boundaries.unrestricted()) is None


# --- `trainops up`'s flags --------------------------------------------------------------------


def _up_boundaries(*argv: str) -> Boundaries:
    import argparse

    from trainops.commands import up_gitops

    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig")
    up_gitops.add_tenancy_arguments(parser)
    result: Boundaries = up_gitops.boundaries(parser.parse_args(argv))
    return result


def test_embedded_up_acts_as_itself_and_reads_local_repositories_but_keeps_the_boundaries() -> None:
    assert _up_boundaries() == Boundaries.single_user()


def test_up_on_a_cluster_is_safe_unless_each_rule_is_widened_by_its_flag() -> None:
    assert _up_boundaries("--kubeconfig", "k") == Boundaries()
    assert _up_boundaries(
        *("--kubeconfig", "k", "--default-service-account", "gitops", "--allow-local-repos"),
        *("--allow-cross-namespace", "--allow-cluster-resources", "Namespace,ClusterRole"),
    ) == Boundaries(
        default_service_account="gitops",
        allow_local_repos=True,
        allow_cross_namespace=True,
        allow_cluster_resources=frozenset({"Namespace", "ClusterRole"}),
    )


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("file:///srv/jobs.git", "local repositories (file:// and paths) are refused"),
        ("https://example.com/jobs.git", "pass --default-service-account NAME"),
    ],
    ids=["a local repository", "no ServiceAccount"],
)
def test_up_on_a_cluster_refuses_a_repo_it_would_not_sync_before_starting_anything(
    tmp_path: Any, repo: str, expected: str
) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [
            *(sys.executable, "-m", "trainops", "up", "--data-dir", str(tmp_path / "data")),
            *("--kubeconfig", str(tmp_path / "absent"), "--repo", repo),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert out.stderr.startswith(f"trainops up: --repo {repo}: ")
    assert expected in out.stderr
    assert not (tmp_path / "data").exists()  # nothing started
