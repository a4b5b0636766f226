"""Who is calling the HTTP API and dashboard, and what they may read and do (pure).

Kubernetes-native, as Headlamp and the Kubernetes Dashboard are: every request carries a bearer
token (the `Authorization` header, or the dashboard's login cookie `COOKIE`); the API server
says whose it is (a TokenReview) and whether that user may do what the request does (a
SubjectAccessReview with the user's name, uid, groups and extra). This module holds the
decisions; `gitops.api.reviews` posts the reviews through `kube`, and `gitops.api.routes` applies them.

- `Rule`s, one per route name (`API_RULES`; the dashboard adds its own): `PUBLIC` (no token:
  the signed push hook, static assets, the login page), `LISTED` (a token; what is shown is
  filtered per namespace by the handler: `may_list` checks), or a tuple of `Need`s, each one
  access review (`needs` fills in the namespace and the job kind from the URL). A route
  without a rule is refused: a route added later cannot forget its check.
- `forbidden_message`: the API server's wording (`User "x" cannot patch resource
  "jobrepositories" in API group "gitops.trainops.dev" in the namespace "team-a"`).
- `user_from_review` / `access_review`: the review bodies, both ways.
- `TtlCache`: answers kept `ttl` seconds, at most `size` of them (the oldest dropped first);
  the caller passes `now`.
- `served_securely`: whether the browser reached us over TLS — our own, or a proxy's that
  says so (`X-Forwarded-Proto: https`) from an address `proxy_networks` trusts; the login
  cookie is `Secure` then.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

__all__ = [
    "API_RULES",
    "COOKIE",
    "GROUP",
    "JOB_GROUP",
    "LISTED",
    "PUBLIC",
    "REPOSITORIES",
    "Check",
    "Need",
    "Rule",
    "TtlCache",
    "User",
    "access_review",
    "bearer_token",
    "forbidden_message",
    "job_plural",
    "needs",
    "proxy_networks",
    "served_securely",
    "user_from_review",
]

GROUP = "gitops.trainops.dev"
REPOSITORIES = "jobrepositories"
JOB_GROUP = "batch.tensorstack.dev"
_JOB_PLURALS = {
    "TensorFlowTrainingJob": "tensorflowtrainingjobs",
    "XGBoostTrainingJob": "xgboosttrainingjobs",
}
COOKIE = "trainops-token"
"""The dashboard's login cookie: the bearer token, HttpOnly, SameSite=Strict, Path=/ (and
Secure when `served_securely`)."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """`--trusted-proxy` values (an address or a CIDR, several comma-separated) as networks;
    ValueError naming the value that is neither."""
    out: list[Network] = []
    for value in values:
        for part in value.split(","):
            text = part.strip()
            if not text:
                continue
            try:
                out.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise ValueError(f"{text!r} is not an IP address or CIDR") from None
    return tuple(out)


def served_securely(
    *, tls: bool, peer: str | None, forwarded_proto: str | None, trusted: tuple[Network, ...]
) -> bool:
    """Whether the browser's connection is TLS: ours (`tls`), or — only when the direct `peer`
    is in `trusted` — the proxy's, as its `X-Forwarded-Proto` says (the last value: the one
    the nearest proxy set). From anyone else the header is ignored: a client cannot talk the
    cookie into, or out of, `Secure`."""
    if tls:
        return True
    if not forwarded_proto or not peer or not trusted:
        return False
    try:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if not any(address in network for network in trusted):
        return False
    return forwarded_proto.rsplit(",", 1)[-1].strip().lower() == "https"


@dataclass(frozen=True)
class User:
    """A user as a TokenReview names them: what a SubjectAccessReview is asked about."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class Need:
    """One access review a route needs: `resource` `{plural}` is the URL's job kind."""

    verb: str
    group: str
    resource: str
    subresource: str = ""


@dataclass(frozen=True)
class Check:
    """One access review, ready to ask: `namespace` "" is the cluster scope (all namespaces)."""

    verb: str
    group: str
    resource: str
    namespace: str
    subresource: str = ""
    name: str = ""


PUBLIC: Literal["public"] = "public"
LISTED: Literal["listed"] = "listed"
Rule = Literal["public", "listed"] | tuple[Need, ...]

API_RULES: dict[str, Rule] = {
    "git-webhook": PUBLIC,  # its own signature (gitops.source.pushhooks)
    "repositories": LISTED,
    "jobs": LISTED,
    "stream": LISTED,
    "repository-get": (Need("get", GROUP, REPOSITORIES),),
    "repository-diff": (Need("get", GROUP, REPOSITORIES),),
    "repository-delete": (Need("delete", GROUP, REPOSITORIES),),
    "repository-sync": (Need("patch", GROUP, REPOSITORIES),),
    "repository-refresh": (Need("patch", GROUP, REPOSITORIES),),
}
"""The API's own routes (by route name); `/metrics` is added by `trainops up` as PUBLIC."""


def needs(rule: tuple[Need, ...], params: Mapping[str, str]) -> list[Check]:
    """The access reviews of a route's `rule` for a request's URL parameters (`namespace`,
    `name`, `plural`)."""
    namespace = params.get("namespace", "")
    name = params.get("name", "")
    plural = params.get("plural", "")
    return [
        Check(
            verb=n.verb,
            group=n.group,
            resource=plural if n.resource == "{plural}" else n.resource,
            namespace=namespace,
            subresource=n.subresource,
            name="" if n.subresource else name,
        )
        for n in rule
    ]


def job_plural(kind: Any) -> str | None:
    """The plural of a training job's kind (`TensorFlowTrainingJob` → `tensorflowtrainingjobs`)."""
    return _JOB_PLURALS.get(kind) if isinstance(kind, str) else None


def bearer_token(authorization: str | None, cookie: str | None) -> str | None:
    """The request's token: `Authorization: Bearer <token>` (the scheme case-insensitive),
    else the login cookie; None without either (another scheme counts as none)."""
    if authorization:
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() == "bearer" and given.strip():
            return given.strip()
        return None
    if cookie and cookie.strip():
        return cookie.strip()
    return None


def forbidden_message(user: User, check: Check) -> str:
    """What kube-apiserver says when RBAC denies `check` to `user`."""
    resource = f"{check.resource}/{check.subresource}" if check.subresource else check.resource
    where = f'in the namespace "{check.namespace}"' if check.namespace else "at the cluster scope"
    return (
        f'User "{user.name}" cannot {check.verb} resource "{resource}" in API group '
        f'"{check.group}" {where}'
    )


def user_from_review(review: Mapping[str, Any]) -> User | None:
    """The user of an answered TokenReview; None when the token is not authenticated."""
    status = review.get("status")
    if not isinstance(status, Mapping) or status.get("authenticated") is not True:
        return None
    info = status.get("user")
    if not isinstance(info, Mapping) or not isinstance(info.get("username"), str):
        return None
    if not info["username"]:
        return None
    groups = info.get("groups") or []
    extra = info.get("extra") or {}
    return User(
        name=info["username"],
        uid=str(info.get("uid") or ""),
        groups=tuple(str(g) for g in groups if isinstance(g, str)),
        extra=tuple(
            sorted(
                (str(k), tuple(str(v) for v in values))
                for k, values in (extra.items() if isinstance(extra, Mapping) else [])
                if isinstance(values, list)
            )
        ),
    )


def access_review(user: User, check: Check) -> dict[str, Any]:
    """The SubjectAccessReview asking whether `user` may do `check`."""
    attributes: dict[str, Any] = {
        "verb": check.verb,
        "group": check.group,
        "resource": check.resource,
    }
    for key, value in (
        ("namespace", check.namespace),
        ("subresource", check.subresource),
        ("name", check.name),
    ):
        if value:
            attributes[key] = value
    spec: dict[str, Any] = {"user": user.name, "resourceAttributes": attributes}
    if user.groups:
        spec["groups"] = list(user.groups)
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


K = TypeVar("K")
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    """Answers kept `ttl` seconds; at most `size` (the least recently stored dropped first)."""

    def __init__(self, ttl: float, size: int) -> None:
        if size < 1:
            raise ValueError("a cache holds at least one entry")
        self.ttl = ttl
        self.size = size
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        stored, value = entry
        if now - stored >= self.ttl or now < stored:
            del self._entries[key]
            return None
        return value

    def put(self, key: K, value: V, now: float) -> None:
        self._entries.pop(key, None)
        self._entries[key] = (now, value)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
