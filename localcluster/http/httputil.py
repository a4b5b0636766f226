"""HTTP plumbing shared by the handlers: bodies in, JSON out, Warning headers, Accept parsing."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from localcluster.api import apierrors
from localcluster.api.fielderrors import FieldError, invalid_error
from localcluster.api.jsonyaml import YAMLError, load_json, load_yaml
from localcluster.http import protobuf
from localcluster.store.records import dumps
from localcluster.write.writes import WriteOptions

__all__ = [
    "Accept",
    "decode_body",
    "flag",
    "json_response",
    "parse_accept",
    "raw_response",
    "warning_value",
    "write_options",
]

JSON = "application/json"


def warning_value(text: str) -> str:
    """`299 - "<text>"` with the text escaped as an HTTP quoted-string."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f'299 - "{escaped}"'


def _headers(warnings: Iterable[str]) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    seen = set()
    for text in warnings:
        if text and text not in seen:
            seen.add(text)
            headers.add("Warning", warning_value(text))
    return headers


def raw_response(body: bytes, status: int = 200, warnings: Iterable[str] = ()) -> web.Response:
    """A JSON answer; like Go's json.Encoder, kube-apiserver ends each with a newline."""
    if body and not body.endswith(b"\n"):
        body += b"\n"
    return web.Response(body=body, status=status, content_type=JSON, headers=_headers(warnings))


def json_response(obj: Any, status: int = 200, warnings: Iterable[str] = ()) -> web.Response:
    return raw_response(dumps(obj), status, warnings)


def flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("true", "1")


def _no_constants(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


TOO_DEEP = "the request body is nested too deeply to decode"


async def decode_body(request: web.Request) -> Any:
    """The JSON (or YAML) request body; 400 for malformed input, 415 for other media types."""
    ctype = request.content_type or JSON
    raw = await request.read()
    if ctype in (JSON, "*/*", "text/plain", "application/octet-stream"):
        try:
            return load_json(raw or b"null", parse_constant=_no_constants)
        except ValueError as e:
            raise apierrors.bad_request(
                f"couldn't get version/kind; json parse error: {e}"
            ) from None
        except RecursionError:
            raise apierrors.bad_request(TOO_DEEP) from None
    if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
        try:
            return load_yaml(raw.decode("utf-8"))
        except (UnicodeDecodeError, YAMLError) as e:
            raise apierrors.bad_request(f"error converting YAML to JSON: {e}") from None
        except RecursionError:
            raise apierrors.bad_request(TOO_DEEP) from None
    if ctype == "application/vnd.kubernetes.protobuf":
        return protobuf.decode(raw)
    raise apierrors.unsupported_media_type(ctype)


@dataclass(frozen=True)
class Accept:
    """What representation the client asked for."""

    as_kind: str = ""  # "", "Table", "PartialObjectMetadata", "PartialObjectMetadataList"


def parse_accept(header: str | None) -> Accept:
    """Pick the first acceptable media range; protobuf-only clients get 406."""
    if not header:
        return Accept()
    for item in header.split(","):
        fields = [f.strip() for f in item.split(";")]
        media, params = fields[0], dict(f.split("=", 1) for f in fields[1:] if "=" in f)
        if media not in (JSON, "*/*", "application/*", "application/yaml"):
            continue
        as_kind = params.get("as", "")
        if as_kind:
            if (
                params.get("g") == "meta.k8s.io"
                and params.get("v") in ("v1", "v1beta1")
                and as_kind
                in (
                    "Table",
                    "PartialObjectMetadata",
                    "PartialObjectMetadataList",
                )
            ):
                return Accept(as_kind)
            continue
        return Accept()
    raise apierrors.not_acceptable(header)


_FIELD_VALIDATION = ("Strict", "Warn", "Ignore")


_OPTIONS_KIND = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def write_options(request: web.Request) -> WriteOptions:
    query = request.query
    dry = query.getall("dryRun", [])
    for value in dry:
        if value != "All":
            raise apierrors.bad_request(
                f'dryRun: Unsupported value: "{value}": supported values: "All"'
            )
    validation = query.get("fieldValidation", "Warn")
    if validation not in _FIELD_VALIDATION:
        raise apierrors.bad_request(
            f'fieldValidation: Unsupported value: "{validation}": supported values: "Ignore", "Strict", "Warn"'
        )
    manager = query.get("fieldManager") or request.headers.get("User-Agent", "").split("/")[0]
    if len(manager) > 128:
        # Validated as the request's options object, as kube-apiserver does: a 422 naming it.
        options = _OPTIONS_KIND.get(request.method, "CreateOptions")
        raise invalid_error(options, "meta.k8s.io", "", [FieldError.too_long("fieldManager", 128)])
    return WriteOptions(
        dry_run=bool(dry),
        field_manager=manager,
        field_validation=validation,
        force=flag(query, "force"),
    )
