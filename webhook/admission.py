"""Admission decisions: an AdmissionReview dict in, an AdmissionReview dict out. Pure.

No HTTP, no clock, no I/O: the aiohttp shell in `webhook.app` parses the body, calls `review()`
and serialises what comes back. Two kinds of failure are kept apart, as the API server does:

- the *review* is malformed (not JSON, not an AdmissionReview, no `uid`, a CREATE without an
  object): `ReviewError`, which the shell answers with HTTP 400. The API server counts that as
  a failed call and applies the webhook's `failurePolicy`.
- the *object* is wrong: HTTP 200 with `allowed: false` and a `Status` explaining why.

Why 403/Forbidden for a denial, not 422/Invalid: kubectl special-cases `reason: Invalid`
(it rewrites the error as "The <kind> "<name>" is invalid: …" built from `details`) and would drop
the `admission webhook "<name>" denied the request:` context the API server adds. With any other
reason kubectl prints `Error from server (Forbidden): error when creating "job.yaml": admission
webhook "<name>" denied the request: <field>: <message>` — the line users search for, and what
controller-runtime webhooks produce. `details.causes` still lists every violation (field,
reason, message) for API clients.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, cast

import orjson

import policies
from policies.fieldpath import FieldError, aggregate_message
from webhook.review import (
    API_VERSIONS,
    KIND,
    OPERATIONS,
    AdmissionRequest,
    AdmissionResponse,
    AdmissionReview,
    Status,
)

__all__ = [
    "DENIAL_CODE",
    "DENIAL_REASON",
    "MAX_WARNING_LENGTH",
    "Endpoint",
    "LevelOf",
    "Outcome",
    "ReviewError",
    "denial_status",
    "mutate",
    "parse_review",
    "review",
    "validate",
]

Endpoint = Literal["mutate", "validate"]
LevelOf = Callable[[str], str | None]
"""A namespace's enforced Pod Security level (`policies.podsecurity.enforced_level` of its
labels), or None when the webhook does not know the namespace (yet): `webhook.namespaces`."""
Verdict = Literal["allowed", "patched", "denied", "skipped", "error"]

DENIAL_CODE = 403
DENIAL_REASON = "Forbidden"
MAX_WARNING_LENGTH = 120
OTHER_KIND = "other"


class ReviewError(ValueError):
    """The request body is not a usable AdmissionReview (answered with HTTP 400)."""


class Outcome(NamedTuple):
    """The answer, plus the low-cardinality labels the metrics are counted by.

    (A NamedTuple: one is built per request, and a frozen dataclass costs twice as much.)
    """

    review: AdmissionReview
    kind: str
    operation: str
    verdict: Verdict


def review(
    endpoint: Endpoint, doc: Any, *, check_schema: bool = False, level_of: LevelOf | None = None
) -> Outcome:
    """Answer one parsed AdmissionReview for `/mutate` or `/validate`.

    `check_schema` makes `/validate` repeat the CRD schema check (see `validate`); `level_of`
    makes it check the namespace's Pod Security level on CREATE.
    Raises `ReviewError` for a malformed review, including JSON nested too deeply to process.
    """
    api_version, request = parse_review(doc)
    try:
        if endpoint == "mutate":
            response, verdict = mutate(request)
        else:
            response, verdict = validate(request, check_schema=check_schema, level_of=level_of)
    except RecursionError:
        raise ReviewError("object is nested too deeply to be checked") from None
    obj = request.get("object") or request.get("oldObject")
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return Outcome(  # positional: a NamedTuple's keyword arguments cost a third more
        {"apiVersion": api_version, "kind": KIND, "response": response},
        kind if kind in policies.KINDS else OTHER_KIND,
        request["operation"],
        verdict,
    )


def parse_review(doc: Any) -> tuple[str, AdmissionRequest]:
    """Check the envelope the API server sends; return its apiVersion and request."""
    if not isinstance(doc, dict):
        raise ReviewError("body is not a JSON object")
    api_version = doc.get("apiVersion")
    if doc.get("kind") != KIND or api_version not in API_VERSIONS:
        raise ReviewError(
            f"body is not an AdmissionReview (kind {_short(doc.get('kind'))}, apiVersion "
            f"{_short(api_version)}; expected kind 'AdmissionReview', apiVersion one of "
            f"{', '.join(API_VERSIONS)})"
        )
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid is missing or not a string")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise ReviewError(
            f"request.operation {_short(operation)} is not one of {', '.join(OPERATIONS)}"
        )
    if operation in ("CREATE", "UPDATE") and not isinstance(request.get("object"), dict):
        raise ReviewError(f"request.object must be an object for operation {operation}")
    if operation == "UPDATE" and not isinstance(request.get("oldObject"), dict):
        raise ReviewError(f"request.oldObject must be an object for operation {operation}")
    return cast(str, api_version), cast(AdmissionRequest, request)


def mutate(request: AdmissionRequest) -> tuple[AdmissionResponse, Verdict]:
    """Complete a training job with its defaults, as a JSON Patch (none when nothing changes)."""
    uid = request["uid"]
    if request["operation"] not in ("CREATE", "UPDATE"):
        return {"uid": uid, "allowed": True}, "allowed"
    obj = cast("dict[str, Any]", request.get("object"))  # a string: no alias built per call
    if not policies.is_training_job(obj):
        return _unhandled(uid, obj), "skipped"
    try:
        patch = policies.default_patch(obj)  # the patch alone: no defaulted copy is needed
    except RecursionError:
        raise
    except Exception as exc:  # a bug in a rule must not let an unchecked object through
        return _internal_error(uid, "defaulting", exc), "error"
    if not patch:
        return {"uid": uid, "allowed": True}, "allowed"
    encoded = orjson.dumps(patch)
    return {
        "uid": uid,
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": binascii.b2a_base64(encoded, newline=False).decode("ascii"),
    }, "patched"


def validate(
    request: AdmissionRequest, *, check_schema: bool = False, level_of: LevelOf | None = None
) -> tuple[AdmissionResponse, Verdict]:
    """Deny a training job that breaks a rule, naming every violated field.

    The object is checked as it will be stored: the API server calls validating webhooks only
    after every mutating webhook (ours included, which applied the defaults) and the CRD's
    schema defaulting have run, so it is already the defaulted object `policies.validate`
    expects — defaulting it again would be wasted work on the hot path. (Installing the
    ValidatingWebhookConfiguration without the mutating one therefore validates objects
    without their defaults; deploy/webhook installs both.)

    For the same reason the CRD's structural schema (unknown fields, JSON types) is not walked
    again: the API server validates the object against it before calling validating webhooks
    (on UPDATE, validation ratcheting lets fields the user did not change through, as the
    server intends). `check_schema=True` walks it anyway, for API servers whose CRDs were
    installed without the trainops schema.

    With `level_of`, a CREATE is also checked against the Pod Security level its namespace
    enforces (`policies.podsecurity`): a job whose pods the API server would refuse is refused
    now, naming the template field. A namespace `level_of` does not know is not checked (a
    warning says so): the API server's own Pod Security admission still refuses the pods.
    """
    uid = request["uid"]
    if request["operation"] not in ("CREATE", "UPDATE"):
        return {"uid": uid, "allowed": True}, "allowed"
    obj = cast("dict[str, Any]", request.get("object"))  # a string: no alias built per call
    if not policies.is_training_job(obj):
        return _unhandled(uid, obj), "skipped"
    old = request.get("oldObject") if request["operation"] == "UPDATE" else None
    level, unknown = _level(request, obj, level_of) if old is None else (None, None)
    try:
        errors, warnings = policies.validate(
            obj, old, schema_checked=not check_schema, pod_security=level
        )
    except RecursionError:
        raise
    except Exception as exc:
        return _internal_error(uid, "validation", exc), "error"
    response: AdmissionResponse = {"uid": uid, "allowed": not errors}
    if errors:
        response["status"] = denial_status(errors, obj)
    lines = _warnings([*warnings, unknown] if unknown else warnings)
    if lines:
        response["warnings"] = lines
    return response, "denied" if errors else "allowed"


def _level(
    request: AdmissionRequest, obj: dict[str, Any], level_of: LevelOf | None
) -> tuple[str | None, str | None]:
    """The Pod Security level to check a CREATE against, and a warning when it is unknown."""
    if level_of is None:
        return None, None
    namespace = request.get("namespace") or (obj.get("metadata") or {}).get("namespace")
    if not isinstance(namespace, str) or not namespace:
        return None, None
    level = level_of(namespace)
    if level is None:
        return None, f"namespace {namespace}: Pod Security labels not known yet; not checked"
    return level, None


def denial_status(errors: Sequence[FieldError], obj: dict[str, Any]) -> Status:
    """The Status for a denied object: every `field: message` in the message, one cause each.

    One error renders as `field: message`; several as `[f1: m1, f2: m2]`, the way
    apimachinery renders an aggregate, so the text matches what the API server itself prints.
    """
    message = aggregate_message(errors)
    metadata = obj.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    details: dict[str, Any] = {
        "group": policies.GROUP,
        "kind": str(obj.get("kind", "")),
        "causes": [e.as_cause() for e in errors],
    }
    if isinstance(name, str):
        details["name"] = name
    return {
        "status": "Failure",
        "code": DENIAL_CODE,
        "reason": DENIAL_REASON,
        "message": message,
        "details": cast(Any, details),
    }


def _unhandled(uid: str, obj: dict[str, Any]) -> AdmissionResponse:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    text = f"trainops webhook does not check {kind}.{api_version}; admitted unchanged"
    return {"uid": uid, "allowed": True, "warnings": _warnings([text])}


def _internal_error(uid: str, stage: str, exc: Exception) -> AdmissionResponse:
    return {
        "uid": uid,
        "allowed": False,
        "status": {
            "status": "Failure",
            "code": 500,
            "reason": "InternalError",
            "message": f"trainops webhook failed during {stage}: {type(exc).__name__}",
        },
    }


def _short(value: Any) -> str:
    """A client-supplied value for an error message, never more than 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _warnings(texts: Sequence[str]) -> list[str]:
    """Deduplicated, one line each, at most 120 characters (longer ones are cut with `...`)."""
    out: list[str] = []
    for text in texts:
        line = " ".join(str(text).split())
        if len(line) > MAX_WARNING_LENGTH:
            line = line[: MAX_WARNING_LENGTH - 3] + "..."
        if line and line not in out:
            out.append(line)
    return out
