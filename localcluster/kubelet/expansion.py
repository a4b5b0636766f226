"""`$(VAR)` expansion and container environment resolution, exactly as the kubelet does them.

Pure: the caller passes the pod, the container, the ConfigMaps and Secrets it could read, and the
node facts; nothing here touches the API server, the clock or the file system. Errors are values
(`EnvError` with the Kubernetes waiting reason and message), because a container whose
environment cannot be built is not started: it waits with `CreateContainerConfigError`.

Expansion rules (Kubernetes `third_party/forked/golang/expansion`):

- `$(NAME)` is replaced by NAME's value when NAME is defined; otherwise it stays verbatim;
- `$$` is an escaped `$` (so `$$(NAME)` yields the literal `$(NAME)`);
- a `$` not followed by `(` or `$` is kept as is, and so is an unterminated `$(`.

Environment order (kubelet `makeEnvironmentVariables`): `envFrom` sources first, in order, then
`env` entries in order; a later definition of a name wins. An `env[].value` is expanded against
the variables defined before it; `valueFrom` results are never expanded. `command` and `args`
are expanded against the final environment.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal
from typing import Any

from policies.quantity import QuantityError, parse_quantity

__all__ = [
    "EnvError",
    "NodeFacts",
    "expand",
    "expand_command",
    "resolve_env",
]

# A C identifier-ish env var name is not required: Kubernetes allows any printable name except
# `=`; envFrom keys are skipped when not valid env var names (reported as an event).
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


@dataclass(frozen=True)
class EnvError:
    """Why a container's environment cannot be built (it waits with this reason)."""

    message: str
    reason: str = "CreateContainerConfigError"


@dataclass(frozen=True)
class NodeFacts:
    """What `fieldRef`/`resourceFieldRef` may read besides the pod itself."""

    host_ip: str = "127.0.0.1"
    pod_ip: str = "127.0.0.1"
    node_name: str = ""
    allocatable_cpu: str = "1"
    allocatable_memory: str = "1Gi"
    allocatable_ephemeral_storage: str = "10Gi"


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Expand `$(VAR)` references in `text`; `lookup` returns None for undefined names."""
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch != "$" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            value = lookup(name)
            out.append(value if value is not None else f"$({name})")
            i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)


def expand_command(
    container: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The container's `command` and `args`, each element expanded against `env`."""
    command = [expand(str(c), env.get) for c in container.get("command") or []]
    args = [expand(str(a), env.get) for a in container.get("args") or []]
    return command, args


def resolve_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    node: NodeFacts,
) -> tuple[dict[str, str], list[str]] | EnvError:
    """The container's environment (without inherited variables) and warnings, or an error.

    `config_maps`/`secrets` map names (in the pod's namespace) to the stored objects; a missing
    name means "not found". Warnings name envFrom keys skipped for being invalid names.
    """
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    env: dict[str, str] = {}
    warnings: list[str] = []

    for source in container.get("envFrom") or []:
        prefix = str(source.get("prefix") or "")
        if "configMapRef" in source:
            ref, kind, store = source["configMapRef"] or {}, "configmap", config_maps
        elif "secretRef" in source:
            ref, kind, store = source["secretRef"] or {}, "secret", secrets
        else:
            continue
        name = str(ref.get("name") or "")
        obj = store.get(name)
        if obj is None:
            if ref.get("optional"):
                continue
            return EnvError(f'{kind} "{name}" not found')
        data = _data(obj, secret=kind == "secret")
        invalid = []
        for key in sorted(data):
            var = prefix + key
            if not _ENV_NAME.match(var):
                invalid.append(key)
                continue
            env[var] = data[key]
        if invalid:
            warnings.append(
                f"Keys [{', '.join(invalid)}] from the EnvFrom {kind} {namespace}/{name} were "
                "skipped since they are considered invalid environment variable names."
            )

    for entry in container.get("env") or []:
        name = str(entry.get("name") or "")
        if "valueFrom" in entry and entry["valueFrom"] is not None:
            value = _value_from(pod, container, entry["valueFrom"], config_maps, secrets, node)
            if isinstance(value, EnvError):
                return value
            if value is None:  # optional reference that is absent: the variable is not set
                continue
            env[name] = value
        else:
            env[name] = expand(str(entry.get("value") or ""), dict(env).get)
    return env, warnings


def _data(obj: Mapping[str, Any], *, secret: bool) -> dict[str, str]:
    """Key/value pairs of a ConfigMap (data + binaryData) or Secret (base64 data)."""
    out: dict[str, str] = {}
    if secret:
        for key, value in (obj.get("data") or {}).items():
            out[key] = _b64(value)
        for key, value in (obj.get("stringData") or {}).items():
            out[key] = str(value)
    else:
        for key, value in (obj.get("binaryData") or {}).items():
            out[key] = _b64(value)
        for key, value in (obj.get("data") or {}).items():
            out[key] = str(value)
    return out


def _b64(value: Any) -> str:
    try:
        raw = base64.b64decode(str(value or ""), validate=False)
    except ValueError:
        return ""
    # Environment values are bytes on Linux; keep undecodable bytes round-trippable.
    return raw.decode("utf-8", errors="surrogateescape")


def _value_from(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    source: Mapping[str, Any],
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    node: NodeFacts,
) -> str | EnvError | None:
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    if "secretKeyRef" in source or "configMapKeyRef" in source:
        is_secret = "secretKeyRef" in source
        ref = source["secretKeyRef" if is_secret else "configMapKeyRef"] or {}
        kind, label, store = (
            ("secret", "Secret", secrets) if is_secret else ("configmap", "ConfigMap", config_maps)
        )
        name, key, optional = (
            str(ref.get("name") or ""),
            str(ref.get("key") or ""),
            ref.get("optional"),
        )
        obj = store.get(name)
        if obj is None:
            return None if optional else EnvError(f'{kind} "{name}" not found')
        data = _data(obj, secret=is_secret)
        if key not in data:
            if optional:
                return None
            return EnvError(f"couldn't find key {key} in {label} {namespace}/{name}")
        return data[key]
    if "fieldRef" in source:
        return _field_ref(pod, str((source["fieldRef"] or {}).get("fieldPath") or ""), node)
    if "resourceFieldRef" in source:
        return _resource_field_ref(pod, container, source["resourceFieldRef"] or {}, node)
    return EnvError(
        "valueFrom: must specify one of fieldRef, resourceFieldRef, configMapKeyRef or secretKeyRef"
    )


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")


def _field_ref(pod: Mapping[str, Any], path: str, node: NodeFacts) -> str | EnvError:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", "default"),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or node.node_name,
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.hostIP": node.host_ip,
        "status.hostIPs": node.host_ip,
        "status.podIP": node.pod_ip,
        "status.podIPs": node.pod_ip,
    }
    if path in simple:
        return str(simple[path])
    if path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{values[k]}"' for k in sorted(values))
    match = _SUBSCRIPT.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    return EnvError(f'unsupported fieldRef fieldPath "{path}"')


def _resource_field_ref(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    ref: Mapping[str, Any],
    node: NodeFacts,
) -> str | EnvError:
    name = str(ref.get("containerName") or container.get("name") or "")
    spec = pod.get("spec") or {}
    candidates = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    target = next((c for c in candidates if c.get("name") == name), container)
    resource = str(ref.get("resource") or "")
    kind, _, res = resource.partition(".")
    if kind not in ("limits", "requests") or res not in ("cpu", "memory", "ephemeral-storage"):
        return EnvError(f'unsupported resourceFieldRef resource "{resource}"')
    resources = target.get("resources") or {}
    raw = (resources.get(kind) or {}).get(res)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(res)
    if raw is None:
        # Unset limits default to the node's allocatable; unset requests to 0.
        fallback = {
            "cpu": node.allocatable_cpu,
            "memory": node.allocatable_memory,
            "ephemeral-storage": node.allocatable_ephemeral_storage,
        }
        raw = fallback[res] if kind == "limits" else "0"
    try:
        value = parse_quantity(raw)
        divisor = parse_quantity(ref.get("divisor") or "1")
    except QuantityError as e:
        return EnvError(f"resourceFieldRef {resource}: {e}")
    if divisor == 0:
        return EnvError(f"resourceFieldRef {resource}: divisor must be positive")
    result = (Decimal(value) / Decimal(divisor)).to_integral_value(rounding=ROUND_CEILING)
    return str(int(result)) if math.isfinite(result) else "0"
