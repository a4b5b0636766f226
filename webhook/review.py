"""The AdmissionReview wire format (`admission.k8s.io/v1`, and `v1beta1`, which is the same shape).

Typed views of the JSON the API server posts and the JSON we answer with. They are `TypedDict`s,
not classes, because the webhook works on the parsed JSON directly: no copying into objects and
back, and the shape written here is checked by mypy against the code that builds responses.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

__all__ = [
    "API_VERSIONS",
    "KIND",
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionReview",
    "GroupVersionKind",
    "GroupVersionResource",
    "Operation",
    "Status",
    "StatusCause",
    "StatusDetails",
    "UserInfo",
]

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
KIND: Literal["AdmissionReview"] = "AdmissionReview"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
OPERATIONS: tuple[Operation, ...] = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class GroupVersionKind(TypedDict):
    group: str
    version: str
    kind: str


class GroupVersionResource(TypedDict):
    group: str
    version: str
    resource: str


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict):
    """What the API server asks. `object`/`oldObject` are raw JSON of the resource."""

    uid: str
    kind: GroupVersionKind
    resource: GroupVersionResource
    operation: Operation
    userInfo: UserInfo
    subResource: NotRequired[str]
    requestKind: NotRequired[GroupVersionKind]
    requestResource: NotRequired[GroupVersionResource]
    requestSubResource: NotRequired[str]
    name: NotRequired[str]
    namespace: NotRequired[str]
    object: NotRequired[dict[str, Any] | None]
    oldObject: NotRequired[dict[str, Any] | None]
    dryRun: NotRequired[bool]
    options: NotRequired[dict[str, Any] | None]


class StatusCause(TypedDict):
    reason: str
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    causes: list[StatusCause]


class Status(TypedDict, total=False):
    """A `meta/v1` Status: how a denial is explained to the API server and on to the user."""

    status: Literal["Success", "Failure"]
    code: int
    reason: str
    message: str
    details: StatusDetails


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    status: NotRequired[Status]
    patch: NotRequired[str]
    patchType: NotRequired[Literal["JSONPatch"]]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReview(TypedDict):
    apiVersion: str
    kind: Literal["AdmissionReview"]
    request: NotRequired[AdmissionRequest]
    response: NotRequired[AdmissionResponse]
