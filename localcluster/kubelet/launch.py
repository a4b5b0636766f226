"""How one container becomes one process: argv, environment and directory (pure).

`references` names the ConfigMaps and Secrets a pod's volumes or a container's environment
read (the shell fetches them); `plan_launch` turns the container, those objects and the pod's
root into a `Launch`, or a `LaunchError` with the waiting reason the container then shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from localcluster.kubelet import expansion, podnet, volumes

__all__ = ["NO_COMMAND", "Launch", "LaunchError", "plan_launch", "references"]

NO_COMMAND = (
    "container has neither command nor args: the image's entrypoint is unknown to the local "
    "kubelet (images are not pulled); set command or args"
)


@dataclass(frozen=True)
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    warnings: tuple[str, ...] = ()
    termination_path: str = ""
    termination_policy: str = "File"


@dataclass(frozen=True)
class LaunchError:
    reason: str  # CreateContainerConfigError / CreateContainerError
    message: str


def references(
    pod: Mapping[str, Any], container: Mapping[str, Any] | None = None
) -> tuple[set[str], set[str]]:
    """(ConfigMap names, Secret names) read by the pod's volumes, or by `container`'s env."""
    cms: set[str] = set()
    secrets: set[str] = set()
    if container is None:
        for v in (pod.get("spec") or {}).get("volumes") or []:
            projected = (v.get("projected") or {}).get("sources") or []
            for src in [v, *projected]:
                if "configMap" in src:
                    cms.add(str((src["configMap"] or {}).get("name") or ""))
                if "secret" in src:
                    sec = src["secret"] or {}
                    secrets.add(str(sec.get("secretName") or sec.get("name") or ""))
        return cms, secrets
    for src in container.get("envFrom") or []:
        if "configMapRef" in src:
            cms.add(str((src["configMapRef"] or {}).get("name") or ""))
        if "secretRef" in src:
            secrets.add(str((src["secretRef"] or {}).get("name") or ""))
    for e in container.get("env") or []:
        vf = e.get("valueFrom") or {}
        if "configMapKeyRef" in vf:
            cms.add(str((vf["configMapKeyRef"] or {}).get("name") or ""))
        if "secretKeyRef" in vf:
            secrets.add(str((vf["secretKeyRef"] or {}).get("name") or ""))
    return cms, secrets


def plan_launch(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    config_maps: Mapping[str, Mapping[str, Any]],
    secrets: Mapping[str, Mapping[str, Any]],
    node: expansion.NodeFacts,
    root: str,
    mount_paths: list[str],
    inherited_env: Mapping[str, str],
) -> Launch | LaunchError:
    """The process for `container`. The environment is `inherited_env` (PATH, HOME, …), then
    HOSTNAME, TRAINOPS_POD_ROOT and TMPDIR, then the container's own variables, which win."""
    result = expansion.resolve_env(
        pod, container, config_maps=config_maps, secrets=secrets, node=node
    )
    if isinstance(result, expansion.EnvError):
        return LaunchError(result.reason, result.message)
    env, warnings = result
    command, args = expansion.expand_command(container, env)
    argv = command + args
    if not argv:
        return LaunchError("CreateContainerError", NO_COMMAND)
    argv = [volumes.rewrite_path(a, root, mount_paths) for a in argv]
    workdir = str(container.get("workingDir") or "")
    cwd = root + "/" + workdir.strip("/") if workdir.strip("/") else root
    proc_env = dict(inherited_env)
    proc_env.update(
        {
            "HOSTNAME": podnet.hostname(pod),
            "TRAINOPS_POD_ROOT": root,
            "TMPDIR": root + "/tmp",
        }
    )
    proc_env.update({k: volumes.rewrite_env_value(v, root, mount_paths) for k, v in env.items()})
    message_path = str(container.get("terminationMessagePath") or "/dev/termination-log")
    return Launch(
        argv,
        proc_env,
        cwd,
        tuple(warnings),
        termination_path=root + "/" + message_path.lstrip("/"),
        termination_policy=str(container.get("terminationMessagePolicy") or "File"),
    )
