"""Pod volumes on the local file system: what to create (pure plan) and creating it.

Local processes cannot own absolute paths such as `/etc/config` or `/dev/shm`, so every pod has
a root directory (`DATA_DIR/pods/<uid>/root`) and a mount path `/etc/config` becomes the
symlink `<root>/etc/config` pointing at the volume's directory
(`DATA_DIR/pods/<uid>/volumes/<volume>`, or the claim's or host's directory). The process runs
with `TRAINOPS_POD_ROOT=<root>` and, without a `workingDir`, in `<root>`; command and args
elements that start with a mount path are rewritten to the mapped path (see docs/KUBELET.md).

Volume kinds: `emptyDir` (a directory; `medium: Memory` too), `configMap` and `secret` (files
materialised from the objects, honouring `items`, `defaultMode`, `mode`, `optional`),
`downwardAPI` (the pod's name, namespace, uid, labels, annotations, written at start),
`projected` (configMap, secret, downwardAPI and serviceAccountToken sources into one
directory; the token is the one the caller got by TokenRequest, as a kubelet does), `hostPath`
(the host path itself), `persistentVolumeClaim` (a per-claim directory under
`DATA_DIR/volumes/<namespace>/<claim>` that outlives the pod). Anything else is refused with a
clear message rather than silently ignored.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = [
    "MountLink",
    "VolumeFile",
    "VolumePlan",
    "materialise",
    "plan_volumes",
    "rewrite_env_value",
    "rewrite_path",
    "token_key",
    "token_requests",
]


_NOT_OTHERS = 0o770
"""Volume files keep their mode (`defaultMode`, `mode`) less the bits for other users."""


@dataclass(frozen=True)
class VolumeFile:
    volume: str
    path: str  # relative to the volume directory
    content: bytes
    mode: int


@dataclass(frozen=True)
class MountLink:
    mount_path: str  # absolute, as in the pod spec
    target: str  # "volume:<name>[/subPath]", "host:<abs path>" or "claim:<ns>/<claim>[/subPath]"


@dataclass(frozen=True)
class VolumePlan:
    volumes: tuple[str, ...] = ()  # names of per-pod volume directories
    files: tuple[VolumeFile, ...] = ()
    links: tuple[MountLink, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def plan_volumes(
    pod: Mapping[str, Any],
    *,
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    tokens: Mapping[str, str] | None = None,
) -> VolumePlan | str:
    """The directories, files and mount links of `pod`, or an error message. `tokens` holds the
    service-account token of each projected `serviceAccountToken` source, by
    `token_key(volume, path)`."""
    spec = pod.get("spec") or {}
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    volumes: list[str] = []
    files: list[VolumeFile] = []
    sources: dict[str, str] = {}
    for vol in spec.get("volumes") or []:
        name = str(vol.get("name") or "")
        if "emptyDir" in vol:
            volumes.append(name)
            sources[name] = f"volume:{name}"
        elif "configMap" in vol or "secret" in vol:
            volumes.append(name)
            sources[name] = f"volume:{name}"
            got = _object_files(pod, name, vol, config_maps, secrets, projected=False)
            if isinstance(got, str):
                return got
            files.extend(got)
        elif "downwardAPI" in vol:
            volumes.append(name)
            sources[name] = f"volume:{name}"
            got = _downward_files(pod, name, vol["downwardAPI"] or {}, None)
            if isinstance(got, str):
                return got
            files.extend(got)
        elif "projected" in vol:
            volumes.append(name)
            sources[name] = f"volume:{name}"
            projected = vol["projected"] or {}
            default_mode = int(projected.get("defaultMode", 0o644))
            for src in projected.get("sources") or []:
                if "configMap" in src or "secret" in src:
                    got = _object_files(
                        pod,
                        name,
                        src,
                        config_maps,
                        secrets,
                        projected=True,
                        default_mode=default_mode,
                    )
                elif "downwardAPI" in src:
                    got = _downward_files(pod, name, src["downwardAPI"] or {}, default_mode)
                elif "serviceAccountToken" in src:
                    path = str((src["serviceAccountToken"] or {}).get("path") or "")
                    token = (tokens or {}).get(token_key(name, path))
                    if token is None:
                        return f'volume "{name}": no token for the pod\'s service account yet'
                    got = [VolumeFile(name, path, token.encode(), default_mode)]
                else:
                    kinds = sorted(src)
                    return (
                        f'volume "{name}": projected source {", ".join(kinds) or "<none>"} is '
                        "not supported by the local kubelet (configMap, secret, downwardAPI and "
                        "serviceAccountToken are)"
                    )
                if isinstance(got, str):
                    return got
                files.extend(got)
        elif "hostPath" in vol:
            sources[name] = "host:" + str((vol["hostPath"] or {}).get("path") or "/")
        elif "persistentVolumeClaim" in vol:
            claim = str((vol["persistentVolumeClaim"] or {}).get("claimName") or "")
            sources[name] = f"claim:{namespace}/{claim}"
        else:
            kinds = sorted(k for k in vol if k != "name")
            return f'volume "{name}": type {", ".join(kinds) or "<none>"} is not supported by the local kubelet'

    links: list[MountLink] = []
    claimed: dict[str, str] = {}
    all_containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    for c in all_containers:
        for m in c.get("volumeMounts") or []:
            vname = str(m.get("name") or "")
            path = str(m.get("mountPath") or "")
            if vname not in sources:
                return f'container "{c.get("name")}": volumeMount "{vname}" not found'
            target = sources[vname]
            sub = str(m.get("subPath") or "").strip("/")
            if ".." in PurePosixPath(sub).parts:
                return f'container "{c.get("name")}": subPath {sub!r} must not contain ".."'
            if sub:
                target = f"{target}/{sub}"
            norm = str(PurePosixPath("/") / path.lstrip("/"))
            if norm in claimed and claimed[norm] != target:
                return (
                    f"mountPath {norm} is used for two different volumes in this pod: the "
                    "containers of a pod share one root directory locally"
                )
            if norm not in claimed:
                claimed[norm] = target
                links.append(MountLink(norm, target))
    return VolumePlan(tuple(volumes), tuple(files), tuple(links))


def token_key(volume: str, path: str) -> str:
    return f"{volume}/{path}"


def token_requests(pod: Mapping[str, Any]) -> list[tuple[str, str | None, int]]:
    """The `(token_key, audience, expirationSeconds)` of each projected serviceAccountToken
    source of `pod` (a real API server's ServiceAccount admission adds one, `kube-api-access-*`,
    to every pod that mounts its service account's token)."""
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        for src in (vol.get("projected") or {}).get("sources") or []:
            tok = src.get("serviceAccountToken")
            if tok is not None:
                key = token_key(str(vol.get("name") or ""), str(tok.get("path") or ""))
                out.append(
                    (key, tok.get("audience") or None, int(tok.get("expirationSeconds") or 3600))
                )
    return out


def _object_files(
    pod: Mapping[str, Any],
    name: str,
    source: Mapping[str, Any],
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    *,
    projected: bool,
    default_mode: int = 0o644,
) -> list[VolumeFile] | str:
    """The files of a configMap or secret volume (or projected source), or an error."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    is_secret = "secret" in source
    src = source["secret" if is_secret else "configMap"] or {}
    # A secret volume names it `secretName`; a projected secret source, like configMaps, `name`.
    obj_name = str(src.get("name" if projected or not is_secret else "secretName") or "")
    store = secrets if is_secret else config_maps
    obj = store.get(obj_name)
    if obj is None:
        if src.get("optional"):
            return []
        kind = "secret" if is_secret else "configmap"
        return f'MountVolume.SetUp failed for volume "{name}" : {kind} "{obj_name}" not found'
    data = _data(obj, secret=is_secret)
    default_mode = int(src.get("defaultMode", default_mode))
    items = src.get("items")
    files: list[VolumeFile] = []
    if not items:
        return [VolumeFile(name, key, data[key], default_mode) for key in sorted(data)]
    for item in items:
        key = str(item.get("key") or "")
        if key not in data:
            if src.get("optional"):
                continue
            label = "Secret" if is_secret else "ConfigMap"
            return (
                f'MountVolume.SetUp failed for volume "{name}" : configmap references'
                f" non-existent config key: {key}"
                if not is_secret
                else f"couldn't find key {key} in {label} {namespace}/{obj_name}"
            )
        rel = str(item.get("path") or key)
        if rel.startswith("/") or ".." in PurePosixPath(rel).parts:
            return f'volume "{name}": item path {rel!r} must be relative, without ".."'
        files.append(VolumeFile(name, rel, data[key], int(item.get("mode", default_mode))))
    return files


_DOWNWARD_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid")


def _downward_files(
    pod: Mapping[str, Any], name: str, source: Mapping[str, Any], default_mode: int | None
) -> list[VolumeFile] | str:
    """The files of a downwardAPI volume (or projected source): the pod's name, namespace, uid,
    labels and annotations, formatted as the kubelet writes them (`key="value"` lines).

    Written once when the pod starts: label changes later are not reflected (a real kubelet
    refreshes them). `resourceFieldRef` items are refused by name."""
    meta = pod.get("metadata") or {}
    mode = int(source.get("defaultMode", default_mode if default_mode is not None else 0o644))
    files: list[VolumeFile] = []
    for item in source.get("items") or []:
        rel = str(item.get("path") or "")
        if not rel or rel.startswith("/") or ".." in PurePosixPath(rel).parts:
            return f'volume "{name}": item path {rel!r} must be relative, without ".."'
        field_path = str((item.get("fieldRef") or {}).get("fieldPath") or "")
        if field_path in _DOWNWARD_FIELDS:
            value = str(meta.get(field_path.split(".")[1]) or "")
        elif field_path in ("metadata.labels", "metadata.annotations"):
            values = meta.get(field_path.split(".")[1]) or {}
            value = "\n".join(f'{k}="{values[k]}"' for k in sorted(values))
        elif field_path.startswith(("metadata.labels['", "metadata.annotations['")):
            group, _, rest = field_path[len("metadata.") :].partition("['")
            value = str((meta.get(group) or {}).get(rest.removesuffix("']"), ""))
        elif "resourceFieldRef" in item:
            return (
                f'volume "{name}": downwardAPI item {rel!r}: resourceFieldRef is not supported '
                "by the local kubelet (use it in env instead)"
            )
        else:
            return (
                f'volume "{name}": downwardAPI item {rel!r}: unsupported fieldPath {field_path!r}'
            )
        files.append(VolumeFile(name, rel, value.encode(), int(item.get("mode", mode))))
    return files


def rewrite_path(value: str, root: str, mount_paths: list[str]) -> str:
    """`/etc/config/x` → `<root>/etc/config/x` when `/etc/config` is a mount path."""
    for mp in sorted(mount_paths, key=len, reverse=True):
        if value == mp or value.startswith(mp.rstrip("/") + "/"):
            return root + value
    return value


def rewrite_env_value(value: str, root: str, mount_paths: list[str]) -> str:
    """An environment value whose path (or colon-separated path list, as PYTHONPATH) starts with
    a mount path, mapped as `rewrite_path` maps arguments: `PYTHONPATH=/trainops` with a volume
    at `/trainops` finds the volume."""
    if not mount_paths or "/" not in value:
        return value
    return ":".join(rewrite_path(part, root, mount_paths) for part in value.split(":"))


def materialise(plan: VolumePlan, *, pod_dir: Path, data_dir: Path) -> None:
    """Create volume directories, write files (atomically per file), and link mount paths."""
    root = pod_dir / "root"
    root.mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    vol_root = pod_dir / "volumes"
    for name in plan.volumes:
        (vol_root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
    by_volume: dict[str, list[VolumeFile]] = {}
    for f in plan.files:
        by_volume.setdefault(f.volume, []).append(f)
    for name, vfiles in by_volume.items():
        base = vol_root / name
        for f in vfiles:
            dest = base / f.path
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.tmp")
            with open(tmp, "wb", opener=lambda p, flags: os.open(p, flags, 0o600)) as out:
                out.write(f.content)
            # Never readable by other local users (a Secret, a token): the pod runs as this user.
            os.chmod(tmp, f.mode & _NOT_OTHERS)
            os.replace(tmp, dest)
    for link in plan.links:
        kind, _, rest = link.target.partition(":")
        if kind == "volume":
            target = vol_root / rest
        elif kind == "claim":
            target = data_dir / "volumes" / rest
        else:
            target = Path(rest)
        if kind != "host":
            target.mkdir(parents=True, exist_ok=True)
        at = root / link.mount_path.lstrip("/")
        at.parent.mkdir(parents=True, exist_ok=True)
        if at.is_symlink() or at.exists():
            if at.is_symlink() and os.readlink(at) == str(target):
                continue
            if at.is_dir() and not at.is_symlink():
                shutil.rmtree(at)
            else:
                at.unlink()
        at.symlink_to(target)


def _data(obj: Mapping[str, Any], *, secret: bool) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if secret:
        for key, value in (obj.get("data") or {}).items():
            out[key] = base64.b64decode(str(value or ""))
        for key, value in (obj.get("stringData") or {}).items():
            out[key] = str(value).encode()
    else:
        for key, value in (obj.get("binaryData") or {}).items():
            out[key] = base64.b64decode(str(value or ""))
        for key, value in (obj.get("data") or {}).items():
            out[key] = str(value).encode()
    return out
