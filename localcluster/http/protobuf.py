"""Decode Kubernetes protobuf request bodies into the JSON form the pipeline works on.

kubectl's typed commands (`kubectl create namespace|configmap|secret|serviceaccount|
deployment|service …`) send `application/vnd.kubernetes.protobuf`: the magic `k8s\\0`, then a
`runtime.Unknown` envelope (typeMeta, raw) whose `raw` is the object's message. Field tables
come from `protoschema.py` (generated from the Kubernetes API's proto definitions). Responses
stay JSON, which every client accepts.

Go's generated marshallers write non-pointer fields even when empty; JSON omits them
(`omitempty`). So empty strings, empty messages/lists/maps and zero timestamps are dropped,
which gives the object kubectl would have sent as JSON.
"""

from __future__ import annotations

import base64
import json
import struct
from datetime import UTC, datetime
from typing import Any

from localcluster.api import apierrors
from localcluster.http import protoschema

__all__ = ["MAGIC", "ProtobufError", "decode", "empty_openapi_v2"]

MAGIC = b"k8s\x00"
_Field = tuple[int, str, str, bool]
_SCHEMA: dict[str, dict[int, _Field]] = {}


class ProtobufError(ValueError):
    """A body that is not a well-formed Kubernetes protobuf message."""


def _table(message: str) -> dict[int, _Field]:
    table = _SCHEMA.get(message)
    if table is None:
        table = {}
        for entry in protoschema.MESSAGES[message].split(";"):
            number, name, kind = entry.split(" ")
            repeated = kind.endswith("*")
            table[int(number)] = (int(number), name, kind.rstrip("*"), repeated)
        _SCHEMA[message] = table
    return table


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _wire_fields(data: bytes) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise ProtobufError("truncated length-delimited field")
            value, i = data[i : i + size], i + size
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, wire: int, value: Any) -> Any:
    if kind == "s":
        return bytes(value).decode("utf-8")
    if kind == "b":
        return base64.b64encode(bytes(value)).decode()
    if kind == "f":
        return bool(value)
    if kind == "i":
        return _signed(value)
    if kind == "z":
        return (value >> 1) ^ -(value & 1)
    if kind == "d":
        return struct.unpack("<d", value)[0]
    raise ProtobufError(f"unknown field kind {kind}")


def _packed(kind: str, data: bytes) -> list[Any]:
    values, i = [], 0
    while i < len(data):
        value, i = _varint(data, i)
        values.append(_scalar(kind, 0, value))
    return values


def _special(how: str, data: bytes) -> Any:
    fields = {n: v for n, _, v in _wire_fields(data)}
    if how in ("time", "microtime"):
        seconds, nanos = _signed(fields.get(1, 0)), fields.get(2, 0)
        if not seconds and not nanos:
            return None
        stamp = datetime.fromtimestamp(seconds, UTC)
        if how == "time":
            return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    if how == "quantity":
        return bytes(fields.get(1, b"")).decode() or None
    if how == "intorstring":
        if fields.get(1, 0) == 1:
            return bytes(fields.get(3, b"")).decode()
        return _signed(fields.get(2, 0))
    if how == "duration":
        return f"{_signed(fields.get(1, 0)) / 1e9:g}s"
    if how == "raw":
        raw = bytes(fields.get(1, b""))
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return base64.b64encode(raw).decode()
    raise ProtobufError(f"unknown special type {how}")


def _value(kind: str, wire: int, value: Any) -> Any:
    if kind.startswith("m:"):
        ref = kind[2:]
        how = protoschema.SPECIAL.get(ref)
        return _special(how, value) if how else _message(ref, value)
    return _scalar(kind, wire, value)


# Optional (pointer) fields whose zero value means something: kept when sent as 0 or false.
# Every other 0/false is a non-pointer field Go would omit from JSON (`omitempty`).
_MEANINGFUL_ZERO = frozenset(
    {
        "replicas",
        "automountServiceAccountToken",
        "immutable",
        "terminationGracePeriodSeconds",
        "activeDeadlineSeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
        "deletionGracePeriodSeconds",
        "gracePeriodSeconds",
        "allowPrivilegeEscalation",
        "readOnlyRootFilesystem",
        "runAsNonRoot",
        "runAsUser",
        "runAsGroup",
        "fsGroup",
        "privileged",
        "enableServiceLinks",
        "hostUsers",
        "shareProcessNamespace",
        "setHostnameAsFQDN",
        "optional",
        "defaultMode",
        "mode",
        "orphanDependents",
        "blockOwnerDeletion",
        "controller",
        "allocateLoadBalancerNodePorts",
        "ready",
        "serving",
        "terminating",
        "holderIdentity",
        "leaseDurationSeconds",
        "leaseTransitions",
        "timeoutSeconds",
        "count",
    }
)


def _empty(field: str, value: Any) -> bool:
    if value is None or value == "" or value == {} or value == []:
        return True
    zero = value is False or (type(value) is int and value == 0)
    return zero and field not in _MEANINGFUL_ZERO


def _message(name: str, data: bytes) -> dict[str, Any]:
    table = _table(name)
    out: dict[str, Any] = {}
    for number, wire, raw in _wire_fields(data):
        spec = table.get(number)
        if spec is None:
            continue
        _, field, kind, repeated = spec
        if kind.startswith("M"):
            entry = {n: v for n, _, v in _wire_fields(raw)}
            key = bytes(entry.get(1, b"")).decode()
            value_kind = kind[1:]
            value = (
                _value(value_kind, 2, entry[2])
                if 2 in entry
                else ("" if value_kind == "s" else None)
            )
            out.setdefault(field, {})[key] = "" if value is None and value_kind == "b" else value
        elif repeated:
            items = out.setdefault(field, [])
            if wire == 2 and kind in ("i", "z", "f"):
                items.extend(_packed(kind, raw))
            else:
                items.append(_value(kind, wire, raw))
        else:
            out[field] = _value(kind, wire, raw)
    return {k: v for k, v in out.items() if not _empty(k, v)}


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf request body; ApiError 400/415 when it cannot be read."""
    if not body.startswith(MAGIC):
        raise apierrors.bad_request("protobuf body does not start with the Kubernetes magic prefix")
    try:
        envelope = {n: v for n, _, v in _wire_fields(body[len(MAGIC) :])}
        type_meta = {n: bytes(v).decode() for n, _, v in _wire_fields(envelope.get(1, b""))}
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        root = protoschema.ROOTS.get((api_version, kind))
        if root is None:
            raise apierrors.unsupported_media_type(
                f"application/vnd.kubernetes.protobuf ({api_version}, Kind={kind})"
            )
        if envelope.get(4) and envelope[4] != b"application/vnd.kubernetes.protobuf":
            raise apierrors.unsupported_media_type(bytes(envelope[4]).decode())
        obj = _message(root, bytes(envelope.get(2, b"")))
    except (ProtobufError, UnicodeDecodeError, struct.error, KeyError, IndexError) as e:
        raise apierrors.bad_request(f"unable to decode protobuf body: {e}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}


def _length_delimited(number: int, payload: bytes) -> bytes:
    out = bytearray([number << 3 | 2])
    size = len(payload)
    while True:
        byte = size & 0x7F
        size >>= 7
        out.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(out) + payload


def empty_openapi_v2(title: str, version: str) -> bytes:
    """An OpenAPI v2 document with no definitions, in gnostic's protobuf encoding.

    kubectl asks for `/openapi/v2` as protobuf only to validate kinds the v3 documents do not
    describe. A document without definitions makes it skip validation for them and report
    what a real cluster reports (e.g. `no matches for kind ...` when a CRD is missing).
    Fields: Document.swagger = 1, Document.info = 2; Info.title = 1, Info.version = 2.
    """
    info = _length_delimited(1, title.encode()) + _length_delimited(2, version.encode())
    return _length_delimited(1, b"2.0") + _length_delimited(2, info)
