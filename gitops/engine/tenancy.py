"""Tenancy: what one JobRepository may reach, decided before any request is sent (pure).

One reconciler serves many namespaces. A JobRepository may do only what its own namespace may
do, in two layers (docs/GITOPS.md, "Trust and tenancy"):

- **Identity** (`identity_for`): every read of live state, apply, prune and the `secretRef`
  Secret's read is made impersonating a ServiceAccount of the repository's namespace —
  `spec.serviceAccountName`, else the reconciler's `--default-service-account` (Flux's
  semantics) — so the API server's RBAC decides. With neither, the repository is refused,
  unless the reconciler runs with `allow_reconciler_identity` (embedded `trainops up`: one
  user, no RBAC), where its own identity is used.
- **Boundaries** (`check_object`, `check_source`, `check_secret`), checked before anything is
  sent, whatever the identity may do: namespaced objects only in the repository's namespace;
  no cluster-scoped kinds; no `file://` or local paths; credentials only for the URLs their
  Secret names. Each is widened by one reconciler flag (`Boundaries`). A refused manifest is an
  entry error at its file:line (`enforce`); the rest of the repository still syncs.

Nothing here does I/O: the reconciler passes the kinds' scopes (from discovery) and the Secret.
"""

from __future__ import annotations

import base64
import contextlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gitops.engine import kinds, names
from gitops.engine.preflight import Checked
from gitops.engine.urls import (
    GitError,
    canonical_url,
    is_local_path,
    path_problem,
    scrub,
    validate_url,
)
from kube.resources import name_problem

__all__ = [
    "SECRET_URL_ANNOTATION",
    "SECRET_URL_KEY",
    "Boundaries",
    "Identity",
    "Refused",
    "Scope",
    "Violation",
    "check_object",
    "check_secret",
    "check_source",
    "enforce",
    "identity_for",
    "is_local",
    "live_scope",
    "missing_account",
    "secret_binding",
    "secret_urls",
    "service_account_of",
    "url_matches",
]

SECRET_URL_KEY = "url"
"""The Secret key naming the repository URL(s), or prefixes, its credentials are for (as the
`url` of an Argo CD repository Secret); several separated by whitespace or commas."""
SECRET_URL_ANNOTATION = f"{names.GROUP}/repository-urls"
"""The same, as an annotation of the Secret (visible without reading the values)."""

_SA_GROUPS = ("system:serviceaccounts", "system:authenticated")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SPLIT = re.compile(r"[\s,]+")


class Refused(GitError):
    """A repository refused as a whole (no identity, a local URL, a Secret not for this URL):
    recorded like a fetch failure (ComparisonError), and nothing is fetched or sent."""


@dataclass(frozen=True)
class Boundaries:
    """The reconciler-wide rules; the defaults are the safe ones (a shared cluster)."""

    default_service_account: str | None = None
    """`--default-service-account`: the ServiceAccount (in each repository's namespace) of a
    repository without `spec.serviceAccountName`."""
    allow_reconciler_identity: bool = False
    """A repository naming no ServiceAccount (and no default) acts as the reconciler itself."""
    allow_local_repos: bool = False
    """`--allow-local-repos`: `file://` URLs and local paths."""
    allow_cross_namespace: bool = False
    """`--allow-cross-namespace`: namespaced objects in any namespace."""
    allow_cluster_resources: frozenset[str] = field(default_factory=frozenset)
    """`--allow-cluster-resources KIND,...`: cluster-scoped kinds allowed (`*`: all). A kind is
    named `Kind` (any group) or `Kind.group`."""

    @classmethod
    def single_user(cls, **overrides: Any) -> Boundaries:
        """Embedded `trainops up`: one user and no RBAC — the reconciler's own identity and
        local repositories; the namespace and cluster-scope rules stay unless widened."""
        return cls(**{"allow_reconciler_identity": True, "allow_local_repos": True, **overrides})

    @classmethod
    def unrestricted(cls) -> Boundaries:
        """Every rule off (the reconciler's own identity, any namespace, any kind, any URL)."""
        return cls(
            allow_reconciler_identity=True,
            allow_local_repos=True,
            allow_cross_namespace=True,
            allow_cluster_resources=frozenset({"*"}),
        )

    def allows_cluster_kind(self, group: str, kind: str) -> bool:
        allowed = self.allow_cluster_resources
        return "*" in allowed or kind in allowed or (f"{kind}.{group}" in allowed and bool(group))


@dataclass(frozen=True)
class Identity:
    """A ServiceAccount to impersonate."""

    namespace: str
    name: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups the API server gives the account's own tokens."""
        return (_SA_GROUPS[0], f"{_SA_GROUPS[0]}:{self.namespace}", _SA_GROUPS[1])


@dataclass(frozen=True)
class Violation:
    """Why one manifest is refused, and the field (path parts) whose line to show."""

    path: tuple[str, ...]
    message: str


@dataclass(frozen=True)
class Scope:
    """Where live state of one repository is read: namespaced kinds in `namespaces` (None:
    every namespace), cluster-scoped kinds only when `boundaries` allows them."""

    namespaces: frozenset[str] | None
    boundaries: Boundaries

    def lists_cluster_kind(self, group: str, kind: str) -> bool:
        return self.boundaries.allows_cluster_kind(group, kind)


# --- identity ---------------------------------------------------------------------------------


def service_account_of(repository: Mapping[str, Any]) -> str | None:
    spec = repository.get("spec")
    value = spec.get("serviceAccountName") if isinstance(spec, dict) else None
    return str(value) if isinstance(value, str) and value else None


def identity_for(repository: Mapping[str, Any], boundaries: Boundaries) -> Identity | None:
    """The ServiceAccount a repository acts as; None: the reconciler's own identity. Raises
    Refused when neither the repository nor the reconciler names one."""
    meta = repository.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    name = service_account_of(repository) or boundaries.default_service_account
    if name:
        if not _DNS_LABEL.match(name) and not _dns_subdomain(name):
            raise Refused(f"spec.serviceAccountName {name!r} is not a valid ServiceAccount name")
        return Identity(namespace, name)
    if boundaries.allow_reconciler_identity:
        return None
    raise Refused(
        "no ServiceAccount to act as: set spec.serviceAccountName to a ServiceAccount of "
        f"namespace {namespace} whose RBAC allows what the repository holds, or start the "
        "reconciler with --default-service-account NAME"
    )


def missing_account(identity: Identity, defaulted: bool) -> str:
    """Why a repository whose ServiceAccount does not exist is refused (the condition)."""
    where = "the reconciler's --default-service-account" if defaulted else "spec.serviceAccountName"
    return (
        f'{where} {identity.name!r}: serviceaccount "{identity.name}" not found in namespace '
        f"{identity.namespace}: nothing is applied or pruned as an account that does not exist "
        "(RoleBindings left by a deleted account would still grant its rights); create the "
        "ServiceAccount or name another"
    )


# --- the repository URL and its credentials ---------------------------------------------------


def is_local(url: str) -> bool:
    """Whether git would read `url` from this machine's disk (`file://` or a path)."""
    try:
        return validate_url(url).startswith("file://")
    except GitError:
        # A relative path is refused by `validate_url` (the engine reads no working
        # directory), but it is still a path on this machine; anything else git refuses anyway.
        return is_local_path(url)


def check_source(url: str, boundaries: Boundaries) -> str | None:
    """Why the repository URL is refused, or None."""
    if is_local(url) and not boundaries.allow_local_repos:
        return (
            f"repoURL {_shown(url)} is on the reconciler's own disk: local repositories "
            "(file:// and paths) are refused on a shared cluster; the reconciler allows them "
            "with --allow-local-repos"
        )
    return None


def secret_urls(secret: Mapping[str, Any]) -> tuple[str, ...]:
    """The URLs or prefixes a Secret's credentials are for: key `url` (base64 in `data`, or
    `stringData`) and the annotation `gitops.trainops.dev/repository-urls`."""
    texts: list[str] = []
    data = secret.get("data") or {}
    raw = data.get(SECRET_URL_KEY) if isinstance(data, dict) else None
    if isinstance(raw, str):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            texts.append(base64.b64decode(raw, validate=True).decode())
    string_data = secret.get("stringData") or {}
    if isinstance(string_data, dict) and isinstance(string_data.get(SECRET_URL_KEY), str):
        texts.append(string_data[SECRET_URL_KEY])
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    if isinstance(annotations.get(SECRET_URL_ANNOTATION), str):
        texts.append(annotations[SECRET_URL_ANNOTATION])
    return tuple(u for text in texts for u in _SPLIT.split(text.strip()) if u)


def url_matches(url: str, prefix: str) -> bool:
    """Whether `url` is `prefix` or below it, compared normalized (scheme and host in lower
    case, no userinfo, default port, `.git` or trailing slash; escapes of unreserved characters
    decoded) and only at a path boundary: `https://git.example.com/team-a` covers
    `…/team-a/jobs.git`, not `…/team-a-evil/x` nor `https://git.example.com.evil.io/…`, and an
    `https` prefix never covers `http`. A URL or prefix whose path a server could resolve
    elsewhere (`urls.path_problem`: `..`, `%2e%2e`, `%2f`) matches nothing."""
    if path_problem(url) or path_problem(prefix):
        return False
    u, p = canonical_url(url), canonical_url(prefix)
    if not p or not u:
        return False
    return u == p or u.startswith(p.rstrip("/") + "/")


def secret_binding(secret: Mapping[str, Any], url: str) -> str | None:
    """The Secret's URL (`secret_urls`) that covers `url` — the longest, when several do — or
    None: the credentials are given to git for requests under it alone."""
    covering = [p for p in secret_urls(secret) if url_matches(url, p)]
    return max(covering, key=lambda p: len(canonical_url(p)), default=None)


def check_secret(secret: Mapping[str, Any], url: str, *, where: str) -> str | None:
    """Why the Secret `where` (`ns/name`) may not be used for `url`, or None: it must name
    the URL, or a prefix of it (`secret_urls`). Checked before git runs: a refused Secret's
    credentials are sent nowhere."""
    urls = secret_urls(secret)
    how = (
        f"add the key {SECRET_URL_KEY} (the repository URL or a prefix of it, as the url of an "
        f"Argo CD repository Secret) or the annotation {SECRET_URL_ANNOTATION}"
    )
    if not urls:
        return (
            f"secret {where} (secretRef) names no repository URL, so its credentials are not "
            f"sent anywhere: {how}"
        )
    problem = path_problem(url)
    if problem:
        return (
            f"secret {where} (secretRef): repoURL {_shown(url)} is not matched against the "
            f"Secret's URLs because {problem} (a server may resolve it outside them): write "
            "the URL without it"
        )
    if any(url_matches(url, prefix) for prefix in urls):
        return None
    listed = ", ".join(_shown(u) for u in urls)
    return (
        f"secret {where} (secretRef) is for {listed}, not for {_shown(url)}: its credentials "
        f"are not sent there; {how}"
    )


# --- manifests --------------------------------------------------------------------------------


def check_object(
    obj: Mapping[str, Any],
    *,
    repository_namespace: str,
    destination: str,
    namespaced: bool | None,
    boundaries: Boundaries,
) -> Violation | None:
    """Why one manifest may not be applied by a repository of `repository_namespace`, or
    None. `namespaced` is the kind's scope from discovery (None: unknown, then the built-in
    table decides, else namespaced)."""
    api_version = str(obj.get("apiVersion") or "")
    kind = str(obj.get("kind") or "")
    group = kinds.group_of(api_version)
    for field_ in ("name", "namespace"):  # `..` would be a path step in the request's URL
        value = (obj.get("metadata") or {}).get(field_)
        problem = name_problem(value) if isinstance(value, str) and value else None
        if problem is not None:
            return Violation(("metadata", field_), f"metadata.{field_} {value!r}: {problem}")
    if namespaced is None:
        namespaced = (group, kind) not in kinds.CLUSTER_SCOPED
    if not namespaced:
        if boundaries.allows_cluster_kind(group, kind):
            return None
        named = f"{kind}.{group}" if group else kind
        return Violation(
            ("kind",),
            f"{kind} is cluster-scoped: a JobRepository may create only namespaced objects in "
            f"its own namespace ({repository_namespace}); the reconciler allows this kind "
            f"with --allow-cluster-resources {named}",
        )
    meta = obj.get("metadata") or {}
    explicit = meta.get("namespace") if isinstance(meta, dict) else None
    target = str(explicit) if explicit else destination
    if target == repository_namespace or boundaries.allow_cross_namespace:
        return None
    if explicit:
        path: tuple[str, ...] = ("metadata", "namespace")
        said = f"namespace {target}"
    else:
        path, said = ("metadata",), f"destination.namespace {target}"
    return Violation(
        path,
        f"{said} is not the JobRepository's namespace ({repository_namespace}): a "
        "JobRepository may write only to its own namespace; the reconciler allows other "
        "namespaces with --allow-cross-namespace",
    )


def enforce(
    checked: Iterable[Checked],
    *,
    repository_namespace: str,
    destination: str,
    scopes: Mapping[tuple[str, str], bool],
    boundaries: Boundaries,
) -> list[Checked]:
    """The pre-flight's boundary step: every entry that `check_object` refuses becomes an
    entry error at the line of the offending field (`kind:`, `namespace:`), so it is never
    applied and the others are. `scopes` maps (apiVersion, kind) to namespaced-or-not."""
    out: list[Checked] = []
    for c in checked:
        if c.error is not None or c.desired is None:
            out.append(c)
            continue
        key = (str(c.desired.get("apiVersion") or ""), str(c.desired.get("kind") or ""))
        violation = check_object(
            c.desired,
            repository_namespace=repository_namespace,
            destination=destination,
            namespaced=scopes.get(key),
            boundaries=boundaries,
        )
        if violation is None:
            out.append(c)
            continue
        document = c.entry.document
        line = document.line_of(violation.path) if document is not None else c.entry.line
        out.append(replace(c, desired=None, error=violation.message, line=line))
    return out


def live_scope(repository_namespace: str, destination: str, boundaries: Boundaries) -> Scope | None:
    """Where to read a repository's live state: None (everywhere, as before) when every rule
    is off; else its own namespace (and the destination when other namespaces are allowed)."""
    if boundaries.allow_cross_namespace:
        if "*" in boundaries.allow_cluster_resources:
            return None
        return Scope(None, boundaries)
    return Scope(frozenset({repository_namespace}), boundaries)


def _dns_subdomain(name: str) -> bool:
    return len(name) <= 253 and all(_DNS_LABEL.match(p) for p in name.split("."))


def _shown(url: str) -> str:
    """A URL for a message: userinfo removed."""
    return scrub(url)
