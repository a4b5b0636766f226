"""How to reach an API server, worked out from kubeconfig documents or a pod's environment: pure.

kubectl's rules, so a file that works with kubectl works here the same way:

- `$KUBECONFIG` is a list of files (`os.pathsep`-separated; empty entries and repeats skipped,
  files that do not exist skipped); without it `~/.kube/config`; `--kubeconfig` names one file,
  which must exist (`kubeconfig_paths`).
- Merging (`merge`): for each named cluster, user and context the first file that names it
  wins, whole; `current-context` is the first one set. A relative path in an entry
  (`certificate-authority`, `client-certificate`, `client-key`, `tokenFile`, and an exec
  plugin's `command` when it has a directory part) is relative to the file of that entry.
- `resolve` picks the context (`--context`, else `current-context`), its cluster and user.
  `*-data` fields win over their file twins; a CA together with `insecure-skip-tls-verify`, two
  ways of authenticating (token and basic), a client certificate without its key, or an exec
  plugin together with an auth-provider are refused as kubectl refuses them.

In a pod (`in_cluster`): `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, the
ServiceAccount's token file (re-read as it rotates, by `kube.auth`), CA and namespace.

An exec credential plugin (client.authentication.k8s.io/v1 and v1beta1) is checked here
(`ExecConfig`); what it is given and what it prints are `kube.execplugin`'s.

Nothing here reads a file, the environment or the clock: `kube.auth` does, and passes them in.
Every error is a `ConfigError`, one line naming the file and the field.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXEC_API_VERSIONS",
    "IN_CLUSTER_DIR",
    "Config",
    "ConfigError",
    "ExecConfig",
    "Merged",
    "in_cluster",
    "kubeconfig_paths",
    "merge",
    "parse_kubeconfig",
    "resolve",
]

EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)
IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where a pod's ServiceAccount token, CA and namespace are mounted."""


class ConfigError(ValueError):
    """A kubeconfig (or in-cluster setting) that cannot be used: `source` is the file (or
    "in-cluster credentials", or an exec plugin), `field` the path in it, `detail` why."""

    def __init__(self, source: str, field: str, detail: str) -> None:
        self.source, self.field, self.detail = source, field, detail
        where = f"{source}: {field}" if field else source
        super().__init__(f"{where}: {detail}")


@dataclass(frozen=True)
class ExecConfig:
    """A user's `exec` credential plugin, its command resolved against the file's directory."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""
    cluster_config: Any = None
    """The cluster's `extensions` entry `client.authentication.k8s.io/exec`, passed on."""


@dataclass(frozen=True)
class Config:
    """Everything a client needs to reach one API server as one user. Paths are absolute or
    as given; data fields are decoded (PEM bytes). `source` names where it came from."""

    server: str
    source: str = ""
    context: str = ""
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    client_cert_file: str | None = None
    client_cert_data: bytes | None = None
    client_key_file: str | None = None
    client_key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    exec: ExecConfig | None = None
    field_paths: Mapping[str, str] = field(default_factory=dict)
    """Where in `source` each setting came from (`users[admin].user.tokenFile`), for errors."""

    def where(self, setting: str) -> str:
        return self.field_paths.get(setting, setting)


@dataclass(frozen=True)
class _Entry:
    """One named cluster, user or context, and the file that defined it."""

    name: str
    body: Mapping[str, Any]
    source: str


@dataclass(frozen=True)
class Merged:
    """Kubeconfig files merged by kubectl's rules (first definition of a name wins)."""

    clusters: Mapping[str, _Entry]
    users: Mapping[str, _Entry]
    contexts: Mapping[str, _Entry]
    current_context: str = ""
    current_context_source: str = ""
    sources: tuple[str, ...] = ()


def kubeconfig_paths(
    explicit: str | None, env_value: str | None, home: str, exists: Sequence[str]
) -> list[str]:
    """The kubeconfig files to merge: `explicit` alone (it must exist: the caller reads it),
    else `$KUBECONFIG`'s existing entries (none: no configuration), else ~/.kube/config when
    it exists. `exists` is the subset of candidate paths that exist."""
    if explicit:
        return [explicit]
    if env_value:
        seen: list[str] = []
        for entry in env_value.split(os.pathsep):
            if entry and entry not in seen and entry in exists:
                seen.append(entry)
        return seen
    default = os.path.join(home, ".kube", "config")
    return [default] if default in exists else []


def parse_kubeconfig(text: str | bytes, source: str) -> dict[str, Any]:
    """One kubeconfig file's YAML (an empty file is an empty configuration)."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "not valid YAML"
        raise ConfigError(source, "", f"not valid YAML{at}: {problem}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(source, "", f"expected a mapping, got {_kind(doc)}")
    return doc


def merge(docs: Sequence[tuple[str, Mapping[str, Any]]]) -> Merged:
    """Merge `(file, document)` pairs in order, as kubectl merges `$KUBECONFIG`."""
    tables: dict[str, dict[str, _Entry]] = {"clusters": {}, "users": {}, "contexts": {}}
    current, current_source = "", ""
    for source, doc in docs:
        for key, inner in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            items = doc.get(key)
            if items is None:
                continue
            if not isinstance(items, list):
                raise ConfigError(source, key, f"expected a list, got {_kind(items)}")
            for i, item in enumerate(items):
                where = f"{key}[{i}]"
                if not isinstance(item, dict):
                    raise ConfigError(source, where, f"expected a mapping, got {_kind(item)}")
                name = item.get("name")
                if not isinstance(name, str) or not name:
                    raise ConfigError(source, f"{where}.name", "required")
                body = item.get(inner)
                if body is None:
                    body = {}
                if not isinstance(body, dict):
                    raise ConfigError(
                        source, f"{key}[{name}].{inner}", f"expected a mapping, got {_kind(body)}"
                    )
                tables[key].setdefault(name, _Entry(name, body, source))
        ctx = doc.get("current-context")
        if not current and isinstance(ctx, str) and ctx:
            current, current_source = ctx, source
    return Merged(
        clusters=tables["clusters"],
        users=tables["users"],
        contexts=tables["contexts"],
        current_context=current,
        current_context_source=current_source,
        sources=tuple(source for source, _ in docs),
    )


def resolve(merged: Merged, context: str | None = None) -> Config:
    """The Config of `context` (default: the current context)."""
    files = ", ".join(merged.sources) or "no kubeconfig file"
    name = context or merged.current_context
    if not name:
        raise ConfigError(files, "current-context", "not set (and no --context given)")
    ctx = merged.contexts.get(name)
    if ctx is None:
        where = "--context" if context else "current-context"
        src = files if context else merged.current_context_source
        raise ConfigError(src, where, f"no context named {name!r}")
    cpath = f"contexts[{name}].context"
    cluster_name = _str(ctx.body, "cluster", ctx.source, cpath)
    if not cluster_name:
        raise ConfigError(ctx.source, f"{cpath}.cluster", "required")
    cluster = merged.clusters.get(cluster_name)
    if cluster is None:
        raise ConfigError(ctx.source, f"{cpath}.cluster", f"no cluster named {cluster_name!r}")
    user_name = _str(ctx.body, "user", ctx.source, cpath)
    user = merged.users.get(user_name) if user_name else None
    if user_name and user is None:
        raise ConfigError(ctx.source, f"{cpath}.user", f"no user named {user_name!r}")
    namespace = _str(ctx.body, "namespace", ctx.source, cpath) or "default"
    settings: dict[str, Any] = {"context": name, "namespace": namespace}
    paths: dict[str, str] = {}
    cluster_exec_config = _cluster_settings(cluster, settings, paths)
    if user is not None:
        _user_settings(user, settings, paths, cluster_exec_config)
    return Config(source=ctx.source, field_paths=paths, **settings)


def in_cluster(
    env: Mapping[str, str],
    *,
    token: str | None,
    namespace: str | None,
    ca_present: bool,
    directory: str = IN_CLUSTER_DIR,
) -> Config:
    """A pod's Config: the API server's Service address from the environment and the
    ServiceAccount files mounted in `directory` (`token` and `namespace` as read, None when
    missing)."""
    source = "in-cluster credentials"
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            source, "KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT", "not set (not in a pod?)"
        )
    try:
        is_v6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        is_v6 = False
    token_file = f"{directory}/token"
    if not token:
        raise ConfigError(source, token_file, "missing or empty")
    return Config(
        server=f"https://[{host}]:{port}" if is_v6 else f"https://{host}:{port}",
        source=source,
        namespace=(namespace or "").strip() or "default",
        ca_file=f"{directory}/ca.crt" if ca_present else None,
        token=token.strip(),
        token_file=token_file,
    )


# -- private ---------------------------------------------------------------------------------


def _cluster_settings(entry: _Entry, out: dict[str, Any], paths: dict[str, str]) -> Any:
    """Fill `out` from a cluster entry; returns its exec extension (for `provideClusterInfo`)."""
    src, base = entry.source, f"clusters[{entry.name}].cluster"
    body = entry.body
    server = _str(body, "server", src, base)
    if not server:
        raise ConfigError(src, f"{base}.server", "required")
    if not server.startswith(("https://", "http://")):
        raise ConfigError(src, f"{base}.server", f"{server!r} is not an http(s) URL")
    out["server"] = server.rstrip("/")
    ca_data = _data(body, "certificate-authority-data", src, base)
    ca_file = _path(body, "certificate-authority", src, base)
    insecure = body.get("insecure-skip-tls-verify", False)
    if not isinstance(insecure, bool):
        raise ConfigError(src, f"{base}.insecure-skip-tls-verify", "expected true or false")
    if insecure and (ca_data or ca_file):
        raise ConfigError(
            src,
            f"{base}.insecure-skip-tls-verify",
            "a certificate authority together with insecure-skip-tls-verify is not allowed",
        )
    if ca_data:
        out["ca_data"] = ca_data
        paths["ca"] = f"{base}.certificate-authority-data"
    elif ca_file:
        out["ca_file"] = ca_file
        paths["ca"] = f"{base}.certificate-authority"
    out["insecure"] = insecure
    out["tls_server_name"] = _str(body, "tls-server-name", src, base) or None
    proxy = _str(body, "proxy-url", src, base) or None
    if proxy is not None and not proxy.startswith(("http://", "https://")):
        raise ConfigError(
            src, f"{base}.proxy-url", f"{proxy!r}: only http(s) proxies are supported"
        )
    out["proxy_url"] = proxy
    paths["server"] = f"{base}.server"
    extensions = body.get("extensions")
    for ext in extensions if isinstance(extensions, list) else []:
        if isinstance(ext, dict) and ext.get("name") == "client.authentication.k8s.io/exec":
            return ext.get("extension")
    return None


def _user_settings(
    entry: _Entry, out: dict[str, Any], paths: dict[str, str], cluster_exec_config: Any
) -> None:
    src, base = entry.source, f"users[{entry.name}].user"
    body = entry.body
    cert_data = _data(body, "client-certificate-data", src, base)
    cert_file = _path(body, "client-certificate", src, base)
    key_data = _data(body, "client-key-data", src, base)
    key_file = _path(body, "client-key", src, base)
    has_cert, has_key = bool(cert_data or cert_file), bool(key_data or key_file)
    if has_cert and not has_key:
        raise ConfigError(src, base, "client-certificate without client-key(-data)")
    if has_key and not has_cert:
        raise ConfigError(src, base, "client-key without client-certificate(-data)")
    if cert_data:
        out["client_cert_data"] = cert_data
        paths["client_cert"] = f"{base}.client-certificate-data"
    elif cert_file:
        out["client_cert_file"] = cert_file
        paths["client_cert"] = f"{base}.client-certificate"
    if key_data:
        out["client_key_data"] = key_data
        paths["client_key"] = f"{base}.client-key-data"
    elif key_file:
        out["client_key_file"] = key_file
        paths["client_key"] = f"{base}.client-key"
    token = _str(body, "token", src, base) or None
    token_file = _path(body, "tokenFile", src, base)
    username = _str(body, "username", src, base) or None
    password = _str(body, "password", src, base) or None
    methods = []
    if token or token_file:
        methods.append("token")
    if username or password:
        methods.append("username/password")
    if len(methods) > 1:
        raise ConfigError(src, base, f"more than one way to authenticate ({', '.join(methods)})")
    out["token"], out["token_file"] = token, token_file
    paths["token"] = f"{base}.token"
    if token_file:
        paths["token_file"] = f"{base}.tokenFile"
    out["username"], out["password"] = username, password
    provider = body.get("auth-provider")
    plugin = body.get("exec")
    if provider is not None and plugin is not None:
        raise ConfigError(src, f"{base}.auth-provider", "not allowed together with exec")
    if provider is not None:
        pname = provider.get("name") if isinstance(provider, dict) else None
        raise ConfigError(
            src,
            f"{base}.auth-provider",
            f"{pname!r} is not supported: use an exec credential plugin (client.authentication.k8s.io)",
        )
    if plugin is not None:
        out["exec"] = _exec(plugin, src, f"{base}.exec", cluster_exec_config)
        paths["exec"] = f"{base}.exec"


def _exec(plugin: Any, src: str, base: str, cluster_config: Any) -> ExecConfig:
    if not isinstance(plugin, dict):
        raise ConfigError(src, base, f"expected a mapping, got {_kind(plugin)}")
    command = _str(plugin, "command", src, base)
    if not command:
        raise ConfigError(src, f"{base}.command", "required")
    if os.sep in command and not os.path.isabs(command):
        command = os.path.normpath(os.path.join(os.path.dirname(src), command))
    version = _str(plugin, "apiVersion", src, base)
    if version not in EXEC_API_VERSIONS:
        raise ConfigError(
            src,
            f"{base}.apiVersion",
            f"{version!r}; supported: {', '.join(EXEC_API_VERSIONS)}" if version else "required",
        )
    mode = _str(plugin, "interactiveMode", src, base)
    if not mode:
        if version == EXEC_API_VERSIONS[0]:
            raise ConfigError(src, f"{base}.interactiveMode", f"required by {version}")
        mode = "IfAvailable"
    if mode not in ("Never", "IfAvailable", "Always"):
        raise ConfigError(src, f"{base}.interactiveMode", f"{mode!r}: Never, IfAvailable or Always")
    args = plugin.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(src, f"{base}.args", "expected a list of strings")
    env: list[tuple[str, str]] = []
    raw_env = plugin.get("env") or []
    if not isinstance(raw_env, list):
        raise ConfigError(src, f"{base}.env", "expected a list of {name, value}")
    for i, item in enumerate(raw_env):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ConfigError(src, f"{base}.env[{i}]", "expected {name, value}")
        env.append((item["name"], str(item.get("value") or "")))
    provide = plugin.get("provideClusterInfo", False)
    if not isinstance(provide, bool):
        raise ConfigError(src, f"{base}.provideClusterInfo", "expected true or false")
    return ExecConfig(
        command=command,
        args=tuple(args),
        env=tuple(env),
        api_version=version,
        interactive_mode=mode,
        provide_cluster_info=provide,
        install_hint=_str(plugin, "installHint", src, base),
        cluster_config=cluster_config,
    )


def _str(body: Mapping[str, Any], key: str, src: str, base: str) -> str:
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(src, f"{base}.{key}", f"expected a string, got {_kind(value)}")
    return value


def _path(body: Mapping[str, Any], key: str, src: str, base: str) -> str | None:
    value = _str(body, key, src, base)
    if not value:
        return None
    if os.path.isabs(value):
        return value
    return os.path.normpath(os.path.join(os.path.dirname(src), value))


def _data(body: Mapping[str, Any], key: str, src: str, base: str) -> bytes | None:
    value = _str(body, key, src, base)
    if not value:
        return None
    try:
        return base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(src, f"{base}.{key}", "not valid base64") from None


def _kind(value: Any) -> str:
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)
