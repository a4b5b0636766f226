"""Pod Security Standards for a training job's pod templates: refused at admission, not later.

A namespace labelled `pod-security.kubernetes.io/enforce: baseline` (or `restricted`) makes the
API server refuse every Pod that breaks that level. The controller creates a job's pods from its
replica templates, so a job whose template breaks the level would be admitted and then never
get a pod. `check(obj, level)` finds those violations on the job itself, each as a `FieldError`
on the template field at fault (`spec.replicaSpecs[0].template.spec.containers[0]
.securityContext.privileged: Forbidden: …`), for the webhook (the namespace's label), `trainops
check --pod-security LEVEL` and the GitOps pre-flight (the destination namespace's label).

The controls are the Pod Security Standards' (kubernetes.io/docs/concepts/security/
pod-security-standards, version `latest` as of Kubernetes 1.32), written here from that
definition. Pure: no I/O, the caller passes the level. docs/POLICIES.md lists every control.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.fieldpath import FieldError, Path, forbidden, required
from policies.kinds import replicas_of

__all__ = [
    "ENFORCE_LABEL",
    "LEVELS",
    "check",
    "check_template",
    "enforced_level",
]

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
LEVELS = ("privileged", "baseline", "restricted")

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
    }
)
SELINUX_TYPES = frozenset(
    {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
)
RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")

Parts = tuple[str | int, ...]
"""A path as plain parts: a `Path` is built only for a violation (most walks find none)."""


def enforced_level(labels: Any) -> str:
    """The level a namespace enforces, from its labels: `privileged` when unlabelled. A value
    that is not a level counts as `restricted` (the safe reading; the API server refuses such
    labels on namespaces written since Pod Security admission exists)."""
    value = labels.get(ENFORCE_LABEL) if isinstance(labels, Mapping) else None
    if value is None:
        return "privileged"
    return value if value in LEVELS else "restricted"


def check(obj: Any, level: str) -> list[FieldError]:
    """Every violation of `level` in the job's replica templates (none for `privileged`)."""
    if level not in ("baseline", "restricted") or not isinstance(obj, dict):
        return []
    errors: list[FieldError] = []
    for replica in replicas_of(obj):
        template = replica.raw.get("template")
        if isinstance(template, dict):
            errors.extend(check_template(template, replica.path.child("template"), level))
    return errors


def check_template(template: dict[str, Any], path: Path, level: str) -> list[FieldError]:
    """The violations of `level` in one pod template at `path`."""
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return []
    rule = _Rule(level, (*path.parts, "spec"))
    rule.pod(spec)
    for container, at in _containers(spec, rule.path):
        rule.container(spec, container, at)
    metadata = template.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if isinstance(annotations, dict):
        rule.apparmor_annotations(annotations, path.child("metadata", "annotations"))
    return rule.errors


class _Rule:
    """One template's walk: the level, where its pod spec is, and what was found."""

    def __init__(self, level: str, path: Parts) -> None:
        self.level = level
        self.restricted = level == "restricted"
        self.path = path
        self.errors: list[FieldError] = []

    def _forbid(self, path: Parts | Path, what: str, allowed: str) -> None:
        at = path if isinstance(path, Path) else Path(path)
        self.errors.append(forbidden(at, f"{what}: {self._by()}; {allowed}"))

    def _require(self, path: Parts, allowed: str) -> None:
        self.errors.append(required(Path(path), f"{self._by()} requires {allowed}"))

    def _by(self) -> str:
        return f'the namespace enforces Pod Security "{self.level}" ({ENFORCE_LABEL})'

    # --- the pod ------------------------------------------------------------------------------

    def pod(self, spec: dict[str, Any]) -> None:
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(field) is True:
                self._forbid((*self.path, field), "sharing the host's namespaces", "unset it")
        context = spec.get("securityContext")
        sc = context if isinstance(context, dict) else {}
        at = (*self.path, "securityContext")
        self._common_context(sc, at)
        sysctls = sc.get("sysctls")
        for i, sysctl in enumerate(sysctls if isinstance(sysctls, list) else []):
            name = sysctl.get("name") if isinstance(sysctl, dict) else None
            if isinstance(name, str) and name not in SAFE_SYSCTLS:
                self._forbid(
                    (*at, "sysctls", i, "name"),
                    f"sysctl {name} is not one of the safe sysctls",
                    "allowed: " + ", ".join(sorted(SAFE_SYSCTLS)),
                )
        volumes = spec.get("volumes")
        for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
            if isinstance(volume, dict):
                self._volume(volume, (*self.path, "volumes", i))
        if not self.restricted:
            return
        if sc.get("runAsNonRoot") is False:
            self._forbid((*at, "runAsNonRoot"), "running as root", "set it to true")

    def _volume(self, volume: dict[str, Any], at: Parts) -> None:
        for source in volume:
            if source == "name" or volume[source] is None:
                continue
            if source == "hostPath":
                self._forbid((*at, source), "hostPath volumes", "use another volume type")
            elif self.restricted and source not in RESTRICTED_VOLUMES:
                self._forbid(
                    (*at, source),
                    f"{source} volumes",
                    "allowed: " + ", ".join(sorted(RESTRICTED_VOLUMES)),
                )

    def _common_context(self, sc: dict[str, Any], at: Parts) -> None:
        """The controls the pod's and each container's securityContext share."""
        windows = sc.get("windowsOptions")
        if isinstance(windows, dict) and windows.get("hostProcess") is True:
            self._forbid(
                (*at, "windowsOptions", "hostProcess"), "host process containers", "unset it"
            )
        selinux = sc.get("seLinuxOptions")
        if isinstance(selinux, dict):
            kind = selinux.get("type")
            if isinstance(kind, str) and kind not in SELINUX_TYPES:
                self._forbid(
                    (*at, "seLinuxOptions", "type"),
                    f"SELinux type {kind}",
                    "allowed: " + ", ".join(sorted(t for t in SELINUX_TYPES if t)),
                )
            for field in ("user", "role"):
                if selinux.get(field):
                    self._forbid(
                        (*at, "seLinuxOptions", field), f"a custom SELinux {field}", "unset it"
                    )
        apparmor = sc.get("appArmorProfile")
        kind = apparmor.get("type") if isinstance(apparmor, dict) else None
        if isinstance(kind, str) and kind not in ("RuntimeDefault", "Localhost"):
            self._forbid(
                (*at, "appArmorProfile", "type"),
                f"AppArmor profile {kind}",
                "allowed: RuntimeDefault, Localhost",
            )
        seccomp = sc.get("seccompProfile")
        kind = seccomp.get("type") if isinstance(seccomp, dict) else None
        if kind == "Unconfined" or (
            self.restricted
            and isinstance(kind, str)
            and kind not in ("RuntimeDefault", "Localhost")
        ):
            self._forbid(
                (*at, "seccompProfile", "type"),
                f"seccomp profile {kind}",
                "allowed: RuntimeDefault, Localhost",
            )
        if self.restricted and sc.get("runAsUser") == 0 and not isinstance(sc["runAsUser"], bool):
            self._forbid((*at, "runAsUser"), "running as user 0 (root)", "use a non-zero uid")

    # --- each container -------------------------------------------------------------------------

    def container(self, spec: dict[str, Any], container: dict[str, Any], at: Parts) -> None:
        context = container.get("securityContext")
        sc = context if isinstance(context, dict) else {}
        sc_at = (*at, "securityContext")
        if sc.get("privileged") is True:
            self._forbid((*sc_at, "privileged"), "privileged containers", "unset it")
        self._common_context(sc, sc_at)
        if sc.get("procMount") not in (None, "Default"):
            self._forbid((*sc_at, "procMount"), "a custom /proc mount", "unset it or Default")
        ports = container.get("ports")
        for i, port in enumerate(ports if isinstance(ports, list) else []):
            host = port.get("hostPort") if isinstance(port, dict) else None
            if host not in (None, 0):
                self._forbid((*at, "ports", i, "hostPort"), "host ports", "unset it or 0")
        self._capabilities(sc.get("capabilities"), (*sc_at, "capabilities"), spec)
        if not self.restricted:
            return
        pod_context = spec.get("securityContext")
        pod_sc = pod_context if isinstance(pod_context, dict) else {}
        if sc.get("runAsNonRoot") is False:
            self._forbid((*sc_at, "runAsNonRoot"), "running as root", "set it to true")
        elif sc.get("runAsNonRoot") is not True and pod_sc.get("runAsNonRoot") is not True:
            self._require(
                (*sc_at, "runAsNonRoot"),
                "true here or in the pod's securityContext.runAsNonRoot",
            )
        if _windows(spec):
            return  # the next controls do not apply to Windows pods
        if sc.get("allowPrivilegeEscalation") is not False:
            path = (*sc_at, "allowPrivilegeEscalation")
            if sc.get("allowPrivilegeEscalation") is True:
                self._forbid(path, "privilege escalation", "set it to false")
            else:
                self._require(path, "false")
        seccomp = sc.get("seccompProfile")
        if not isinstance(seccomp, dict) or seccomp.get("type") is None:
            pod_seccomp = pod_sc.get("seccompProfile")
            if not isinstance(pod_seccomp, dict) or pod_seccomp.get("type") is None:
                self._require(
                    (*sc_at, "seccompProfile", "type"),
                    "RuntimeDefault or Localhost here or in the pod's securityContext",
                )

    def _capabilities(self, capabilities: Any, at: Parts, spec: dict[str, Any]) -> None:
        caps = capabilities if isinstance(capabilities, dict) else {}
        allowed = RESTRICTED_CAPABILITIES if self.restricted else BASELINE_CAPABILITIES
        added = caps.get("add")
        for i, name in enumerate(added if isinstance(added, list) else []):
            if isinstance(name, str) and name not in allowed:
                self._forbid(
                    (*at, "add", i),
                    f"adding capability {name}",
                    "allowed: " + ", ".join(sorted(allowed)),
                )
        if not self.restricted or _windows(spec):
            return
        dropped = caps.get("drop")
        if not (isinstance(dropped, list) and "ALL" in dropped):
            self._require((*at, "drop"), '"ALL" among the capabilities dropped')

    def apparmor_annotations(self, annotations: dict[str, Any], at: Path) -> None:
        for key, value in annotations.items():
            if not (isinstance(key, str) and key.startswith(APPARMOR_ANNOTATION)):
                continue
            if isinstance(value, str) and (
                value == "runtime/default" or value.startswith("localhost/")
            ):
                continue
            self._forbid(
                at.key(key), f"AppArmor profile {value}", "allowed: runtime/default, localhost/*"
            )


def _containers(spec: dict[str, Any], path: Parts) -> Iterator[tuple[dict[str, Any], Parts]]:
    for field in CONTAINER_LISTS:
        items = spec.get(field)
        for i, container in enumerate(items if isinstance(items, list) else []):
            if isinstance(container, dict):
                yield container, (*path, field, i)


def _windows(spec: dict[str, Any]) -> bool:
    os_ = spec.get("os")
    return isinstance(os_, dict) and os_.get("name") == "windows"
