"""Virtual "review" resources: answered at once, never stored.

`kubectl auth can-i` posts a SelfSubjectAccessReview and `kubectl auth whoami` a
SelfSubjectReview; tools such as Helm ask the former before acting. localcluster has one user
with every permission (`system:masters`), so every access review is allowed, with the reason
RBAC would give.
"""

from __future__ import annotations

from typing import Any

from localcluster.api import apierrors
from localcluster.api.types import ResourceInfo

__all__ = ["ADMIN", "REVIEWS", "review"]

ADMIN = {"username": "admin", "groups": ["system:masters", "system:authenticated"]}

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
)


def review(info: ResourceInfo, body: Any) -> dict[str, Any]:
    """The answered review for a POSTed one."""
    if not isinstance(body, dict):
        raise apierrors.bad_request("the request body must be a JSON object")
    answer: dict[str, Any] = {
        "kind": info.kind,
        "apiVersion": info.api_version,
        "metadata": {"creationTimestamp": None},
    }
    if info.kind == "SelfSubjectAccessReview":
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
        answer["spec"] = spec
        answer["status"] = {"allowed": True, "reason": 'allowed by the "system:masters" group'}
    else:
        answer["status"] = {"userInfo": ADMIN}
    return answer
