"""Virtual "review" resources: answered at once, never stored.

`kubectl auth can-i` posts a SelfSubjectAccessReview and `kubectl auth whoami` a
SelfSubjectReview; tools such as Helm ask the former before acting. localcluster does no RBAC:
its users (the kubeconfig's `admin` and the HTTP API's `API_USER`) have every permission
(`system:masters`), so every access review is allowed, with the reason RBAC would give.

Servers that authenticate users themselves (trainops' HTTP API and dashboard, as Headlamp and
the Kubernetes Dashboard do) post a TokenReview (authentication.k8s.io/v1: is this bearer token
one of the server's, and whose) and a SubjectAccessReview (authorization.k8s.io/v1: may that
user do this). TokenReview answers from the tokens the server accepts (`users`: token → user
info); a SubjectAccessReview is allowed for any user, as there is no RBAC to deny it.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from localcluster.api import apierrors
from localcluster.api.types import ResourceInfo

__all__ = ["ADMIN", "API_USER", "REVIEWS", "review"]

ADMIN = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}
API_USER = {"username": "trainops-user", "groups": ["system:masters", "system:authenticated"]}
"""The user of `DATA_DIR/api-token` (`localcluster.kubeconfig.Credentials.api_token`)."""
_NO_RBAC = "allowed: the embedded API server does no RBAC (every user is system:masters)"

REVIEWS: tuple[ResourceInfo, ...] = (
    ResourceInfo(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        False,
        verbs=("create",),
    ),
    ResourceInfo(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        False,
        verbs=("create",),
    ),
    ResourceInfo(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        False,
        verbs=("create",),
    ),
    ResourceInfo(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        False,
        verbs=("create",),
    ),
)


def review(
    info: ResourceInfo, body: Any, users: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """The answered review for a POSTed one; `users` (token → user info) answers TokenReviews."""
    if not isinstance(body, dict):
        raise apierrors.bad_request("the request body must be a JSON object")
    answer: dict[str, Any] = {
        "kind": info.kind,
        "apiVersion": info.api_version,
        "metadata": {"creationTimestamp": None},
    }
    if info.kind == "TokenReview":
        return _token_review(answer, body, users or {})
    if info.kind in ("SelfSubjectAccessReview", "SubjectAccessReview"):
        spec = body.get("spec")
        if not isinstance(spec, dict) or not (
            spec.get("resourceAttributes") or spec.get("nonResourceAttributes")
        ):
            raise apierrors.invalid(
                info.kind,
                info.group,
                "",
                [
                    apierrors.cause(
                        "FieldValueRequired",
                        "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                        "spec.resourceAttributes",
                    )
                ],
            )
        if info.kind == "SubjectAccessReview" and not (spec.get("user") or spec.get("groups")):
            raise apierrors.invalid(
                info.kind,
                info.group,
                "",
                [
                    apierrors.cause(
                        "FieldValueRequired",
                        "Required value: at least one of user or group must be specified",
                        "spec.user",
                    )
                ],
            )
        answer["spec"] = spec
        reason = 'allowed by the "system:masters" group'
        answer["status"] = {
            "allowed": True,
            "reason": reason if info.kind == "SelfSubjectAccessReview" else _NO_RBAC,
        }
    else:
        answer["status"] = {"userInfo": ADMIN}
    return answer


def _token_review(
    answer: dict[str, Any], body: dict[str, Any], users: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any]:
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise apierrors.invalid(
            "TokenReview",
            "authentication.k8s.io",
            "",
            [apierrors.cause("FieldValueRequired", "Required value", "spec.token")],
        )
    answer["spec"] = {k: v for k, v in spec.items() if k != "token"}  # the token is not echoed
    user = next(
        (u for known, u in users.items() if hmac.compare_digest(known.encode(), token.encode())),
        None,
    )
    if user is None:
        answer["status"] = {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    else:
        answer["status"] = {
            "authenticated": True,
            "user": dict(user),
            "audiences": list(spec.get("audiences") or []),
        }
    return answer
