"""Generate localcluster/http/protoschema.py: protobuf field tables of the built-in kinds we serve.

kubectl's typed commands (`kubectl create namespace|configmap|secret|deployment|service|...`)
send request bodies as Kubernetes protobuf. Decoding needs each message's field numbers, names
and types. They are facts of the Kubernetes API, published as its `generated.proto` files; the
Go binaries carry them as gzip-compressed FileDescriptorProto blobs. This script reads those
from an installed kubectl and writes a compact table of the messages reachable from the kinds
localcluster serves. Run by hand when the served kinds change:

    .venv/bin/python scripts/gen_protoschema.py /usr/bin/kubectl > localcluster/http/protoschema.py
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

# descriptor.proto field numbers (google/protobuf/descriptor.proto).
_FILE_NAME, _FILE_PACKAGE, _FILE_MESSAGES = 1, 2, 4
_MSG_NAME, _MSG_FIELDS, _MSG_NESTED, _MSG_OPTIONS = 1, 2, 3, 7
_FIELD_NAME, _FIELD_NUMBER, _FIELD_LABEL, _FIELD_TYPE, _FIELD_TYPE_NAME = 1, 3, 4, 5, 6
_MAP_ENTRY_OPTION = 7

ROOTS = {
    ("v1", "Namespace"): "k8s.io.api.core.v1.Namespace",
    ("v1", "ConfigMap"): "k8s.io.api.core.v1.ConfigMap",
    ("v1", "Secret"): "k8s.io.api.core.v1.Secret",
    ("v1", "ServiceAccount"): "k8s.io.api.core.v1.ServiceAccount",
    ("v1", "Service"): "k8s.io.api.core.v1.Service",
    ("v1", "Pod"): "k8s.io.api.core.v1.Pod",
    ("v1", "Endpoints"): "k8s.io.api.core.v1.Endpoints",
    ("v1", "Event"): "k8s.io.api.core.v1.Event",
    ("v1", "Node"): "k8s.io.api.core.v1.Node",
    ("v1", "Binding"): "k8s.io.api.core.v1.Binding",
    ("v1", "DeleteOptions"): "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
    ("apps/v1", "Deployment"): "k8s.io.api.apps.v1.Deployment",
    ("autoscaling/v1", "Scale"): "k8s.io.api.autoscaling.v1.Scale",
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
    ): "k8s.io.api.authorization.v1.SelfSubjectAccessReview",
    (
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
    ): "k8s.io.api.authentication.v1.SelfSubjectReview",
    ("coordination.k8s.io/v1", "Lease"): "k8s.io.api.coordination.v1.Lease",
    ("events.k8s.io/v1", "Event"): "k8s.io.api.events.v1.Event",
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
    ): "k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration",
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ): "k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration",
}
# Messages with a JSON form of their own (decoded specially, not walked).
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "microtime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "duration",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "quantity",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "intorstring",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "raw",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "raw",
}
_SCALAR = {
    9: "s",
    12: "b",
    8: "f",
    1: "d",
    2: "d",
    3: "i",
    4: "i",
    5: "i",
    13: "i",
    17: "z",
    18: "z",
}


def _fields(data: bytes) -> list[tuple[int, int, object]]:
    out, i = [], 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i : i + size], i + size
        elif wire == 1:
            value, i = data[i : i + 8], i + 8
        elif wire == 5:
            value, i = data[i : i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        out.append((number, wire, value))
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _messages(
    prefix: str,
    blobs: list[bytes],
    out: dict[str, list[tuple[int, str, str, bool]]],
    maps: set[str],
) -> None:
    for blob in blobs:
        fields = _fields(blob)
        name = next(v.decode() for n, _, v in fields if n == _MSG_NAME)  # type: ignore[union-attr]
        full = f"{prefix}.{name}"
        options = [v for n, _, v in fields if n == _MSG_OPTIONS]
        if any(num == _MAP_ENTRY_OPTION and val for o in options for num, _, val in _fields(o)):  # type: ignore[arg-type]
            maps.add(full)
        entries = []
        for n, _, v in fields:
            if n != _MSG_FIELDS:
                continue
            f = {fn: fv for fn, _, fv in _fields(v)}  # type: ignore[arg-type]
            ftype = f[_FIELD_TYPE]
            kind = (
                "m:" + f[_FIELD_TYPE_NAME].decode().lstrip(".")
                if ftype == 11
                else _SCALAR.get(ftype, "i")
            )  # type: ignore[union-attr]
            entries.append(
                (f[_FIELD_NUMBER], f[_FIELD_NAME].decode(), kind, f.get(_FIELD_LABEL) == 3)
            )  # type: ignore[union-attr]
        out[full] = entries
        _messages(full, [v for n, _, v in fields if n == _MSG_NESTED], out, maps)  # type: ignore[misc]


def extract(binary: bytes) -> tuple[dict[str, list[tuple[int, str, str, bool]]], set[str]]:
    messages: dict[str, list[tuple[int, str, str, bool]]] = {}
    maps: set[str] = set()
    start = 0
    while (start := binary.find(b"\x1f\x8b\x08\x00\x00\x00\x00\x00", start)) >= 0:
        try:
            data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(
                binary[start : start + 4_000_000]
            )
        except zlib.error:
            start += 1
            continue
        start += 1
        if b"generated.proto" not in data[:120]:
            continue
        fields = _fields(data)
        package = next(v.decode() for n, _, v in fields if n == _FILE_PACKAGE)  # type: ignore[union-attr]
        _messages(package, [v for n, _, v in fields if n == _FILE_MESSAGES], messages, maps)  # type: ignore[misc]
    return messages, maps


def main() -> None:
    binary = Path(sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/kubectl").resolve().read_bytes()
    messages, maps = extract(binary)
    needed: dict[str, str] = {}
    todo = list(ROOTS.values())
    while todo:
        name = todo.pop()
        if name in needed or name in SPECIAL:
            continue
        parts = []
        for number, field, kind, repeated in sorted(messages[name]):
            if kind.startswith("m:"):
                ref = kind[2:]
                if ref in maps:
                    value_kind = next(k for n, _, k, _ in messages[ref] if n == 2)
                    if value_kind.startswith("m:"):
                        todo.append(value_kind[2:])
                        value_kind = "m:" + _short(value_kind[2:])
                    kind = "M" + value_kind
                    repeated = False
                else:
                    todo.append(ref)
                    kind = "m:" + _short(ref)
            parts.append(f"{number} {field} {kind}{'*' if repeated else ''}")
        needed[name] = ";".join(parts)
    print(
        '"""Protobuf field tables of the served built-in kinds (generated by scripts/gen_protoschema.py).'
    )
    print()
    print("Each message: `number name kind[*]` entries separated by `;`. Kinds: s string, b bytes,")
    print(
        "i integer, z zigzag integer, f bool, d double, m:<Message>, M<kind> a map<string, kind>;"
    )
    print("`*` marks a repeated field. Do not edit by hand.")
    print('"""')
    print()
    print("ROOTS = {")
    for (api_version, kind), name in sorted(ROOTS.items()):
        print(f"    ({api_version!r}, {kind!r}): {_short(name)!r},")
    print("}")
    print()
    print("SPECIAL = {")
    for name, how in sorted(SPECIAL.items()):
        print(f"    {_short(name)!r}: {how!r},")
    print("}")
    print()
    print("MESSAGES = {")
    for name in sorted(needed):
        print(f"    {_short(name)!r}: {needed[name]!r},")
    print("}")


def _short(name: str) -> str:
    return name.replace("k8s.io.apimachinery.pkg.", "").replace("k8s.io.api.", "")


if __name__ == "__main__":
    main()
