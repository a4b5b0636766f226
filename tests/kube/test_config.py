"""Kubeconfig and in-cluster settings as kubectl reads them (kube/config.py, pure): merging,
context choice, relative paths, data over files, the combinations kubectl refuses, and the
exec plugin's input and output (kube/execplugin.py)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kube.config import (
    Config,
    ConfigError,
    ExecConfig,
    in_cluster,
    kubeconfig_paths,
    merge,
    parse_kubeconfig,
    resolve,
)
from kube.execplugin import exec_info, parse_exec_credential

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def kubeconfig(
    *,
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    context: dict[str, Any] | None = None,
    name: str = "dev",
    current: str | None = "dev",
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "clusters": [{"name": name, "cluster": cluster or {"server": "https://10.0.0.1:6443"}}],
        "users": [{"name": name, "user": user or {}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name, **(context or {})}}],
    }
    if current is not None:
        doc["current-context"] = current
    return doc


def one(
    doc: dict[str, Any], context: str | None = None, path: str = "/home/u/.kube/config"
) -> Config:
    return resolve(merge([(path, doc)]), context)


# -- which files -------------------------------------------------------------------------------

PATHS = {
    "an explicit file alone, even when $KUBECONFIG is set": (
        "/x/cfg",
        "/a:/b",
        ["/a", "/b"],
        ["/x/cfg"],
    ),
    "$KUBECONFIG in order, missing and repeated entries skipped": (
        None,
        "/a::/missing:/b:/a",
        ["/a", "/b"],
        ["/a", "/b"],
    ),
    "~/.kube/config without $KUBECONFIG": (
        None,
        None,
        ["/home/u/.kube/config"],
        ["/home/u/.kube/config"],
    ),
    "nothing when ~/.kube/config does not exist": (None, None, [], []),
    "$KUBECONFIG naming no existing file is no configuration": (
        None,
        "/gone",
        ["/home/u/.kube/config"],
        [],
    ),
}


@pytest.mark.parametrize(
    ("explicit", "env", "exists", "expected"), PATHS.values(), ids=PATHS.keys()
)
def test_the_files_read_are_kubectls(
    explicit: str | None, env: str | None, exists: list[str], expected: list[str]
) -> None:
    assert kubeconfig_paths(explicit, env, "/home/u", exists) == expected


# -- merging -----------------------------------------------------------------------------------


def test_the_first_file_to_name_a_cluster_user_or_context_wins_whole() -> None:
    first = kubeconfig(cluster={"server": "https://first:6443"}, user={"token": "t1"})
    second = kubeconfig(
        cluster={"server": "https://second:6443", "insecure-skip-tls-verify": True},
        user={"token": "t2"},
        current="other",
    )
    second["contexts"].append({"name": "other", "context": {"cluster": "dev"}})
    cfg = resolve(merge([("/a/config", first), ("/b/config", second)]))
    assert (cfg.server, cfg.token, cfg.insecure, cfg.context) == (
        "https://first:6443",
        "t1",
        False,
        "dev",
    )


def test_current_context_is_the_first_one_set() -> None:
    first = {"clusters": [{"name": "c", "cluster": {"server": "https://c:1"}}]}
    second = {
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "namespace": "team"}}],
        "current-context": "ctx",
    }
    cfg = resolve(merge([("/a", first), ("/b", second)]))
    assert (cfg.server, cfg.namespace, cfg.source) == ("https://c:1", "team", "/b")


def test_context_flag_overrides_the_current_context() -> None:
    doc = kubeconfig()
    doc["clusters"].append({"name": "prod", "cluster": {"server": "https://prod:443"}})
    doc["contexts"].append({"name": "prod", "context": {"cluster": "prod"}})
    assert one(doc, "prod").server == "https://prod:443"
    assert one(doc).server == "https://10.0.0.1:6443"


def test_relative_paths_are_relative_to_the_file_that_names_them() -> None:
    doc = kubeconfig(
        cluster={"server": "https://s:1", "certificate-authority": "pki/ca.crt"},
        user={
            "client-certificate": "../certs/me.crt",
            "client-key": "/abs/me.key",
            "tokenFile": "tok",
        },
    )
    del doc["users"][0]["user"]["tokenFile"]
    cfg = one(doc, path="/etc/kube/config")
    assert (cfg.ca_file, cfg.client_cert_file, cfg.client_key_file) == (
        "/etc/kube/pki/ca.crt",
        "/etc/certs/me.crt",
        "/abs/me.key",
    )
    assert (
        one(kubeconfig(user={"tokenFile": "tok"}), path="/etc/kube/config").token_file
        == "/etc/kube/tok"
    )


def test_data_fields_win_over_their_files_and_are_decoded() -> None:
    cfg = one(
        kubeconfig(
            cluster={
                "server": "https://s:1",
                "certificate-authority": "ca.crt",
                "certificate-authority-data": b64(CA),
            },
            user={
                "client-certificate-data": b64(b"CERT"),
                "client-certificate": "x.crt",
                "client-key-data": b64(b"KEY"),
            },
        )
    )
    assert (
        cfg.ca_data,
        cfg.ca_file,
        cfg.client_cert_data,
        cfg.client_cert_file,
        cfg.client_key_data,
    ) == (CA, None, b"CERT", None, b"KEY")


def test_every_setting_is_carried() -> None:
    cfg = one(
        kubeconfig(
            cluster={
                "server": "https://s:1/",
                "tls-server-name": "api.internal",
                "proxy-url": "http://proxy:3128",
            },
            user={"username": "admin", "password": "pw"},
            context={"namespace": "team-a"},
        )
    )
    assert cfg == Config(
        server="https://s:1",
        source="/home/u/.kube/config",
        context="dev",
        namespace="team-a",
        tls_server_name="api.internal",
        proxy_url="http://proxy:3128",
        username="admin",
        password="pw",
        field_paths=cfg.field_paths,
    )
    assert cfg.where("server") == "clusters[dev].cluster.server"


def test_a_context_without_a_user_sends_no_credentials() -> None:
    doc = kubeconfig()
    del doc["contexts"][0]["context"]["user"]
    cfg = one(doc)
    assert (cfg.token, cfg.username, cfg.client_cert_data, cfg.exec) == (None, None, None, None)


# -- refusals: one line naming the file and the field ------------------------------------------

REFUSED = {
    "no current context": (kubeconfig(current=None), None, "current-context: not set"),
    "an unknown context": (kubeconfig(), "nope", "--context: no context named 'nope'"),
    "a context naming no cluster": (
        kubeconfig(context={"cluster": "gone"}),
        None,
        "contexts[dev].context.cluster: no cluster named 'gone'",
    ),
    "a context naming no user": (
        kubeconfig(context={"user": "gone"}),
        None,
        "contexts[dev].context.user: no user named 'gone'",
    ),
    "a cluster without a server": (
        kubeconfig(cluster={"insecure-skip-tls-verify": True}),
        None,
        "clusters[dev].cluster.server: required",
    ),
    "a server that is no URL": (
        kubeconfig(cluster={"server": "10.0.0.1:6443"}),
        None,
        "clusters[dev].cluster.server: '10.0.0.1:6443' is not",
    ),
    "a CA with insecure-skip-tls-verify": (
        kubeconfig(
            cluster={
                "server": "https://s:1",
                "insecure-skip-tls-verify": True,
                "certificate-authority": "/ca",
            }
        ),
        None,
        "clusters[dev].cluster.insecure-skip-tls-verify: a certificate authority together",
    ),
    "CA data that is not base64": (
        kubeconfig(cluster={"server": "https://s:1", "certificate-authority-data": "not base64!"}),
        None,
        "clusters[dev].cluster.certificate-authority-data: not valid base64",
    ),
    "a socks proxy": (
        kubeconfig(cluster={"server": "https://s:1", "proxy-url": "socks5://p:1080"}),
        None,
        "clusters[dev].cluster.proxy-url: 'socks5://p:1080': only http(s)",
    ),
    "a certificate without a key": (
        kubeconfig(user={"client-certificate-data": b64(b"C")}),
        None,
        "users[dev].user: client-certificate without",
    ),
    "a key without a certificate": (
        kubeconfig(user={"client-key": "k"}),
        None,
        "users[dev].user: client-key without",
    ),
    "token and basic auth together": (
        kubeconfig(user={"token": "t", "username": "u", "password": "p"}),
        None,
        "users[dev].user: more than one way to authenticate (token, username/password)",
    ),
    "a legacy auth-provider": (
        kubeconfig(user={"auth-provider": {"name": "gcp"}}),
        None,
        "users[dev].user.auth-provider: 'gcp' is not supported",
    ),
    "exec with an auth-provider": (
        kubeconfig(user={"auth-provider": {"name": "oidc"}, "exec": {"command": "x"}}),
        None,
        "users[dev].user.auth-provider: not allowed together with exec",
    ),
    "exec without a command": (
        kubeconfig(
            user={
                "exec": {
                    "apiVersion": "client.authentication.k8s.io/v1",
                    "interactiveMode": "Never",
                }
            }
        ),
        None,
        "users[dev].user.exec.command: required",
    ),
    "exec of an unknown apiVersion": (
        kubeconfig(
            user={"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}}
        ),
        None,
        "users[dev].user.exec.apiVersion: 'client.authentication.k8s.io/v1alpha1'; supported",
    ),
    "exec v1 without interactiveMode": (
        kubeconfig(
            user={"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1"}}
        ),
        None,
        "users[dev].user.exec.interactiveMode: required by client.authentication.k8s.io/v1",
    ),
    "a token that is a number": (
        kubeconfig(user={"token": 42}),
        None,
        "users[dev].user.token: expected a string, got int",
    ),
    "clusters that are a mapping": (
        {"clusters": {"dev": {}}},
        None,
        "clusters: expected a list, got a mapping",
    ),
    "an entry without a name": ({"users": [{"user": {}}]}, None, "users[0].name: required"),
}


@pytest.mark.parametrize(("doc", "context", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_unusable_settings_are_one_line_naming_file_and_field(
    doc: dict[str, Any], context: str | None, message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        one(doc, context)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith("/home/u/.kube/config: ")
    assert message in text


def test_yaml_that_does_not_parse_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"^/k: not valid YAML at line 2: "):
        parse_kubeconfig("kind: Config\n\tclusters: []\n", "/k")
    assert parse_kubeconfig("", "/k") == {}
    with pytest.raises(ConfigError, match=r"^/k: expected a mapping, got a list$"):
        parse_kubeconfig("- 1\n", "/k")


# -- exec plugins ------------------------------------------------------------------------------

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"


def test_an_exec_plugin_is_read_with_its_env_and_a_command_relative_to_the_file() -> None:
    cfg = one(
        kubeconfig(
            cluster={
                "server": "https://s:1",
                "extensions": [
                    {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "a"}}
                ],
            },
            user={
                "exec": {
                    "command": "./bin/get-token",
                    "args": ["--x"],
                    "apiVersion": V1BETA1,
                    "env": [{"name": "FOO", "value": "bar"}],
                    "provideClusterInfo": True,
                    "installHint": "install it",
                }
            },
        ),
        path="/etc/kube/config",
    )
    assert cfg.exec == ExecConfig(
        command="/etc/kube/bin/get-token",
        args=("--x",),
        env=(("FOO", "bar"),),
        api_version=V1BETA1,
        interactive_mode="IfAvailable",
        provide_cluster_info=True,
        install_hint="install it",
        cluster_config={"audience": "a"},
    )
    bare = one(
        kubeconfig(user={"exec": {"command": "aws", "apiVersion": V1, "interactiveMode": "Never"}})
    )
    assert bare.exec is not None and bare.exec.command == "aws"  # on $PATH, not the file's dir


def test_the_plugin_gets_cluster_details_only_when_it_asks() -> None:
    plugin = ExecConfig(
        command="p", api_version=V1, provide_cluster_info=True, cluster_config={"k": 1}
    )
    cfg = Config(
        server="https://s:1", ca_data=CA, tls_server_name="api", proxy_url="http://p:1", exec=plugin
    )
    assert exec_info(cfg) == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {
            "interactive": False,
            "cluster": {
                "server": "https://s:1",
                "tls-server-name": "api",
                "certificate-authority-data": b64(CA),
                "proxy-url": "http://p:1",
                "config": {"k": 1},
            },
        },
    }
    quiet = Config(server="https://s:1", exec=ExecConfig(command="p", api_version=V1BETA1))
    assert exec_info(quiet) == {
        "apiVersion": V1BETA1,
        "kind": "ExecCredential",
        "spec": {"interactive": False},
    }


def _cred(status: dict[str, Any], version: str = V1) -> bytes:
    return json.dumps({"apiVersion": version, "kind": "ExecCredential", "status": status}).encode()


def test_a_token_with_its_expiry_is_read() -> None:
    cred = parse_exec_credential(
        _cred({"token": "abc", "expirationTimestamp": "2026-11-26T10:00:00Z"}),
        ExecConfig(command="p", api_version=V1),
        "/k",
    )
    assert (cred.token, cred.expiry) == ("abc", datetime(2026, 11, 26, 10, tzinfo=UTC))
    pair = parse_exec_credential(
        _cred({"clientCertificateData": "CERT", "clientKeyData": "KEY"}),
        ExecConfig(command="p"),
        "/k",
    )
    assert (pair.token, pair.client_cert, pair.client_key, pair.expiry) == (
        None,
        b"CERT",
        b"KEY",
        None,
    )


BAD_OUTPUT = {
    "not JSON": (b"oops", "printed no JSON ExecCredential"),
    "another kind": (json.dumps({"kind": "Secret", "apiVersion": V1}).encode(), "kind: 'Secret'"),
    "another apiVersion": (
        _cred({"token": "t"}, V1BETA1),
        "apiVersion: 'client.authentication.k8s.io/v1beta1', the kubeconfig asks for",
    ),
    "no status": (
        json.dumps({"kind": "ExecCredential", "apiVersion": V1}).encode(),
        "status: missing",
    ),
    "nothing in the status": (_cred({}), "status: neither a token nor a client certificate"),
    "a certificate without its key": (
        _cred({"clientCertificateData": "C"}),
        "status: clientCertificateData and clientKeyData",
    ),
    "a bad expiry": (
        _cred({"token": "t", "expirationTimestamp": "soon"}),
        "status.expirationTimestamp: 'soon' is not RFC 3339",
    ),
}


@pytest.mark.parametrize(("output", "message"), BAD_OUTPUT.values(), ids=BAD_OUTPUT.keys())
def test_bad_plugin_output_names_the_plugin_and_field(output: bytes, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_exec_credential(output, ExecConfig(command="/bin/p", api_version=V1), "/k")
    assert str(e.value).startswith("/k: exec plugin /bin/p: ")
    assert message in str(e.value)


# -- in a pod ----------------------------------------------------------------------------------

IN_CLUSTER = {
    "IPv4": (
        {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
        "https://10.96.0.1:443",
    ),
    "IPv6 in brackets": (
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"},
        "https://[fd00::1]:443",
    ),
}


@pytest.mark.parametrize(("env", "server"), IN_CLUSTER.values(), ids=IN_CLUSTER.keys())
def test_in_a_pod_the_service_address_token_ca_and_namespace_are_used(
    env: dict[str, str], server: str
) -> None:
    cfg = in_cluster(env, token="tok\n", namespace="team\n", ca_present=True)
    assert (cfg.server, cfg.token, cfg.namespace, cfg.ca_file, cfg.token_file) == (
        server,
        "tok",
        "team",
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
        "/var/run/secrets/kubernetes.io/serviceaccount/token",
    )


def test_in_a_pod_without_a_token_or_the_service_address_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"^in-cluster credentials: .*/token: missing or empty$"):
        in_cluster(
            {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"},
            token=None,
            namespace=None,
            ca_present=True,
        )
    with pytest.raises(ConfigError, match=r"KUBERNETES_SERVICE_PORT: not set"):
        in_cluster({"KUBERNETES_SERVICE_HOST": "h"}, token="t", namespace=None, ca_present=True)
    assert (
        in_cluster(
            {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"},
            token="t",
            namespace=None,
            ca_present=False,
        ).namespace
        == "default"
    )
