"""Values shared by the embedded API server's modules (the seams between them).

`ResourceInfo` describes one served resource (built-in or CRD-defined); the request pipeline,
discovery, OpenAPI, table printing, patching and admission all read it. `AdmissionAttributes` is
what the pipeline hands to the admission chain for one write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["AdmissionAttributes", "ApiError", "PrinterColumn", "ResourceInfo"]


@dataclass(frozen=True)
class PrinterColumn:
    """One column of `kubectl get` (CRD `additionalPrinterColumns` shape)."""

    name: str
    type: str  # string, integer, number, boolean, date
    json_path: str  # e.g. ".status.phase"
    description: str = ""
    priority: int = 0  # 0: shown always; >0: only with -o wide
    format: str = ""


@dataclass(frozen=True)
class ResourceInfo:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    list_kind: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    subresources: tuple[str, ...] = ()  # e.g. ("status",), ("status", "log")
    printer_columns: tuple[PrinterColumn, ...] = ()
    # For CRD-served resources: the CRD's `spec.versions[]` entry for this version (schema,
    # subresources, additionalPrinterColumns) and the whole CRD object; None for built-ins.
    crd_version: dict[str, Any] | None = None
    crd: dict[str, Any] | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def is_custom(self) -> bool:
        return self.crd is not None


@dataclass(frozen=True)
class AdmissionAttributes:
    """One write as the admission chain sees it (fields of an AdmissionReview request)."""

    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    info: ResourceInfo
    namespace: str  # "" for cluster-scoped
    name: str
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None
    subresource: str = ""
    dry_run: bool = False
    user: dict[str, Any] = field(
        default_factory=lambda: {"username": "admin", "groups": ["system:masters"]}
    )
    options: dict[str, Any] | None = None


class ApiError(Exception):
    """An error the server answers with a `Status` object (code, reason, message, details)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:  # as Go's omitempty: no reason at all rather than ""
            del body["reason"]
        if self.details is not None:  # `{}` too, as kube-apiserver's generic responses have it
            body["details"] = self.details
        return body
