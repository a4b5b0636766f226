"""Where the tenancy rules meet a reconcile round: whom each JobRepository acts as (I/O shell).

`gitops.engine.tenancy` decides (pure); this module applies the decisions to one round of one
repository, for `gitops.runtime.reconciler`:

- `admit` settles, before any request of the round, the identity the repository acts as,
  checks its URL and that the ServiceAccount exists (from a cache of accounts' metadata where
  there is one) (`tenancy.Refused` otherwise: the round
  records a ComparisonError, nothing is fetched, applied or pruned);
- `engine` is the sync engine acting as that identity — one per ServiceAccount, cached, on a
  `kube.Client.impersonating` view of the reconciler's client; the reconciler's own engine
  only when the rules say the repository acts as the reconciler. It fails closed: a key not
  admitted this round has no engine. Every engine reads the same shared cache (training jobs,
  read with the reconciler's rights and kept within the repository's scope); its lists and
  GETs of other kinds are the identity's;
- `secret` reads the `secretRef` Secret as that identity and refuses it unless it names the
  repository URL, before git is run;
- `bounded` is the pre-flight's boundary step (`tenancy.enforce`) with each kind's scope
  asked of discovery; `levels` the Pod Security level each namespace enforces, for the
  pre-flight's next step (from a cache of namespaces' metadata where there is one); `scope`
  where live state may be read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from gitops.engine import keys, kinds, preflight, tenancy
from gitops.engine.preflight import Checked
from gitops.engine.spec import RepoSpec
from gitops.engine.urls import GitError
from gitops.runtime.discovery import Discovery
from gitops.runtime.memo import Source
from gitops.runtime.metacache import MetadataCache
from gitops.runtime.sync import SyncEngine
from kube import errors, resources
from kube.client import Client
from kube.informer import Informer
from policies.podsecurity import enforced_level

__all__ = ["PROCESS_HOLDER", "Tenants", "acting_as", "repository_key"]

log = logging.getLogger(__name__)

PROCESS_HOLDER = "(admission of every repository)"
"""Who holds the metadata informers of namespaces (their Pod Security labels) and
ServiceAccounts (that a repository's exists) in `gitops.runtime.metacache`: no repository, so no
round settles or forgets them."""


class Tenants:
    def __init__(
        self,
        client: Client,
        discovery: Discovery,
        own: SyncEngine,
        boundaries: tenancy.Boundaries,
        metadata: MetadataCache | None = None,
    ) -> None:
        self.client = client
        self.discovery = discovery
        self.own = own
        """The reconciler's own engine (repositories acting as the reconciler)."""
        self.boundaries = boundaries
        self.metadata = metadata
        """Where namespaces' labels are watched (`levels`), when the process has one."""
        self.identities: dict[str, tenancy.Identity | None] = {}
        """The identity each repository acts as, settled at the start of its round."""
        self._engines: dict[tenancy.Identity, SyncEngine] = {}

    async def admit(self, obj: dict[str, Any], spec: RepoSpec) -> None:
        """Settle the identity `obj` acts as, check its URL and that its ServiceAccount exists,
        before any request of its round; tenancy.Refused (naming what to set) otherwise."""
        key = repository_key(obj)
        self.identities.pop(key, None)
        identity = tenancy.identity_for(obj, self.boundaries)
        refusal = tenancy.check_source(spec.repo_url, self.boundaries)
        if refusal is not None:
            raise tenancy.Refused(refusal)
        if identity is not None:
            await self._exists(identity, obj)
        self.identities[key] = identity

    async def _exists(self, identity: tenancy.Identity, obj: dict[str, Any]) -> None:
        """Refuse an account that does not exist: the API server accepts impersonation of any
        name, so a RoleBinding left behind by a deleted account would still grant its rights
        (a Pod naming a missing account is refused; so is a repository). Read with the
        reconciler's own rights (the account may not read itself): found in the metadata-only
        informer of accounts where it may list and watch them (no request a round), else — and
        whenever the cache does not have it (one just made) — with a GET."""
        accounts = await self._watched(resources.SERVICE_ACCOUNTS)
        if accounts is not None and accounts.get(identity.namespace, identity.name) is not None:
            return
        try:
            await self.client.get(resources.SERVICE_ACCOUNTS, identity.name, identity.namespace)
        except errors.NotFound:
            raise tenancy.Refused(
                tenancy.missing_account(identity, tenancy.service_account_of(obj) is None)
            ) from None

    def engine(self, key: str) -> SyncEngine:
        """The sync engine acting as the identity admitted for `key` this round."""
        if key not in self.identities:  # fail closed: never act as ourselves by omission
            raise RuntimeError(f"{key}: no identity settled for this round")
        identity = self.identities[key]
        if identity is None:
            return self.own
        engine = self._engines.get(identity)
        if engine is None:
            client = acting_as(self.client, identity)
            engine = self._engines[identity] = SyncEngine(
                client, self.discovery, cache=self.own.cache, metadata=self.own.metadata
            )
        return engine

    def scope(self, obj: dict[str, Any], spec: RepoSpec) -> tenancy.Scope | None:
        namespace = str((obj.get("metadata") or {}).get("namespace") or "")
        return tenancy.live_scope(namespace, spec.destination, self.boundaries)

    async def secret(self, obj: dict[str, Any], spec: RepoSpec) -> dict[str, Any]:
        """The `secretRef` Secret, read as the repository's identity (it may name only a
        Secret its account may read) and refused unless it names the repository URL."""
        assert spec.secret_name
        namespace = str((obj.get("metadata") or {}).get("namespace", ""))
        where = f"{namespace}/{spec.secret_name}"
        problem = resources.name_problem(spec.secret_name)
        if problem is not None:  # `..`: a path step, another object's URL
            raise tenancy.Refused(f"spec.secretRef.name {spec.secret_name!r}: {problem}")
        client = self.engine(repository_key(obj)).client
        try:
            secret = await client.get(resources.SECRETS, spec.secret_name, namespace)
        except errors.NotFound:
            raise GitError(f"secret {where} (secretRef) not found") from None
        except errors.Forbidden as exc:
            raise tenancy.Refused(f"secret {where} (secretRef): {exc.message or exc}") from None
        refusal = tenancy.check_secret(secret, spec.repo_url, where=where)
        if refusal is not None:
            raise tenancy.Refused(refusal)
        return secret

    async def bounded(
        self, obj: dict[str, Any], spec: RepoSpec, checked: list[Checked]
    ) -> tuple[list[Checked], frozenset[tuple[str, str]]]:
        """The pre-flight's boundary step: a refused manifest becomes an entry error at its
        file:line. The scope of each kind is discovery's (the built-in table otherwise); the
        cluster-scoped (group, kind)s so decided come back with the entries, for pairing."""
        scopes: dict[tuple[str, str], bool] = {}
        for c in checked:
            if c.desired is None:
                continue
            api_version, kind = str(c.desired.get("apiVersion")), str(c.desired.get("kind"))
            if (api_version, kind) not in scopes:
                resource = await self.discovery.resource(api_version, kind)
                if resource is not None:
                    scopes[(api_version, kind)] = resource.namespaced
        bounded = await asyncio.to_thread(  # every manifest of the repository: off the loop
            lambda: tenancy.enforce(
                checked,
                repository_namespace=str((obj.get("metadata") or {}).get("namespace") or ""),
                destination=spec.destination,
                scopes=scopes,
                boundaries=self.boundaries,
            )
        )
        return bounded, kinds.cluster_scoped(scopes)

    async def pod_security(
        self,
        spec: RepoSpec,
        source: Source,
        wanted: tuple[str, str, bool, str],
        levels: tuple[tuple[str, str], ...] | None = None,
    ) -> bool:
        """The pre-flight's Pod Security step on `source.bounded` into `source.checked` (and
        its desired keys and kinds), each job against the level its namespace enforces, read
        every round (`levels`: read this round already, of `job_namespaces`). True when the
        verdicts changed for the same commit (a label changed since): the comparison must be
        made again."""
        if levels is None:
            levels = await self.levels(self.job_namespaces(spec, source))
        if source.levels_for == (wanted, levels):
            return False
        source.checked = await asyncio.to_thread(
            preflight.pod_security, source.bounded, spec.destination, dict(levels)
        )
        source.desired, source.git_kinds = await asyncio.to_thread(
            lambda: (
                keys.desired_keys(source.checked, spec.destination, source.cluster_scoped),
                keys.kinds_of(source.checked),
            )
        )
        changed = source.levels_for is not None
        source.levels_for = (wanted, levels)
        return changed

    @staticmethod
    def job_namespaces(spec: RepoSpec, source: Source) -> set[str]:
        """The namespaces whose Pod Security levels `source.bounded`'s jobs are checked with."""
        return preflight.job_namespaces(source.bounded, spec.destination)

    async def levels(self, namespaces: Iterable[str]) -> tuple[tuple[str, str], ...]:
        """(namespace, enforced Pod Security level) of each namespace, read with the
        reconciler's own rights (a tenant's account may not read its namespace): from a
        metadata-only informer of every namespace where it may list and watch them (deploy/
        grants it; held for the process's life: a round asks nothing), else — and for one the
        cache has not seen yet — with a GET. One it cannot read is left out — not checked, as
        the webhook fails open — and the API server's admission still decides the apply."""
        cache = await self._watched(resources.NAMESPACES)
        out: list[tuple[str, str]] = []
        for namespace in sorted(namespaces):
            if resources.name_problem(namespace) is not None:
                continue
            found = cache.get(None, namespace) if cache is not None else None
            if found is None:  # no cache, or one that has not seen it yet (a new namespace)
                try:
                    found = await self.client.get(resources.NAMESPACES, namespace)
                except errors.APIError as exc:
                    log.debug("namespace %s: Pod Security level not read: %s", namespace, exc)
                    continue
            level = enforced_level((found.get("metadata") or {}).get("labels"))
            if level != "privileged":
                out.append((namespace, level))
        return tuple(out)

    async def _watched(self, resource: resources.Resource) -> Informer | None:
        """The synced metadata-only informer of `resource` in every namespace, held for the
        process; None where the reconciler may not list and watch it (or there is no cache)."""
        if self.metadata is None:
            return None
        return await self.metadata.informer(PROCESS_HOLDER, resource, None)


def acting_as(client: Client, identity: tenancy.Identity | None) -> Client:
    """`client` acting as `identity` (impersonated; None: the reconciler itself). The one place
    an impersonating client is made: the engines above, and the push secrets' reads
    (`gitops.runtime.pushsecrets`)."""
    if identity is None:
        return client
    return client.impersonating(identity.user, identity.groups)


def repository_key(obj: dict[str, Any]) -> str:
    """`namespace/name` of a JobRepository object (the work queue's key)."""
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"
