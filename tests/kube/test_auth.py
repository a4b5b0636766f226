"""Credentials at work against a small loopback server (kube/auth.py, kube/transport.py): a
token file read again as it rotates, an exec plugin run, renewed on expiry and after a 401,
basic auth, TLS with a CA file, a client certificate and tls-server-name, and kubeconfig files
found and merged as kubectl finds them."""

from __future__ import annotations

import base64
import json
import ssl
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from certs import pki
from kube import Client, Unauthorized, Unavailable, auth
from kube.config import Config, ConfigError, ExecConfig

V1 = "client.authentication.k8s.io/v1"


@dataclass
class Server:
    url: str
    accept: Callable[[str | None], bool]
    seen: list[str | None] = field(default_factory=list)
    peers: list[str] = field(default_factory=list)


async def _serve(
    accept: Callable[[str | None], bool], tls: ssl.SSLContext | None = None
) -> AsyncIterator[Server]:
    server = Server("", accept)

    async def handle(request: web.Request) -> web.Response:
        header = request.headers.get("Authorization")
        server.seen.append(header)
        cert = request.transport.get_extra_info("peercert") if request.transport else None
        if cert:
            server.peers.append(dict(x[0] for x in cert["subject"])["commonName"])
        if not server.accept(header):
            return web.json_response(
                {"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401
            )
        return web.json_response({"major": "1", "minor": "32"})

    app = web.Application()
    app.router.add_get("/version", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    server.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()


@pytest.fixture
async def tokens() -> AsyncIterator[Server]:
    allowed: set[str] = set()
    async for server in _serve(lambda h: h is not None and h.removeprefix("Bearer ") in allowed):
        server.allowed = allowed  # type: ignore[attr-defined]
        yield server


async def test_a_rotated_token_file_is_read_again_after_a_401(
    tokens: Server, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    tokens.allowed.add("first")  # type: ignore[attr-defined]
    client = Client.from_config(Config(server=tokens.url, token_file=str(token_file)), timeout=5)
    try:
        await client.request("GET", "/version")
        token_file.write_text("second")
        tokens.allowed.clear()  # type: ignore[attr-defined]
        tokens.allowed.add("second")  # type: ignore[attr-defined]
        await client.request("GET", "/version")
        assert tokens.seen == ["Bearer first", "Bearer first", "Bearer second"]
        assert client.bearer_token == "second"
    finally:
        await client.close()


async def test_a_token_file_is_read_again_once_a_minute_has_passed(
    tokens: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first")
    tokens.allowed.update({"first", "second"})  # type: ignore[attr-defined]
    client = Client.from_config(Config(server=tokens.url, token_file=str(token_file)), timeout=5)
    try:
        await client.request("GET", "/version")
        token_file.write_text("second")
        await client.request("GET", "/version")  # within the minute: the cached one
        monkeypatch.setattr(auth, "TOKEN_FILE_SECONDS", 0.0)
        await client.request("GET", "/version")
        assert tokens.seen == ["Bearer first", "Bearer first", "Bearer second"]
    finally:
        await client.close()


async def test_a_static_token_refused_is_unauthorized_without_a_retry(tokens: Server) -> None:
    client = Client.from_config(Config(server=tokens.url, token="wrong"), timeout=5)
    try:
        with pytest.raises(Unauthorized):
            await client.request("GET", "/version")
        assert tokens.seen == ["Bearer wrong"]
    finally:
        await client.close()


async def test_basic_auth_sends_user_and_password() -> None:
    expected = "Basic " + base64.b64encode(b"admin:s3cret").decode()
    async for server in _serve(lambda h: h == expected):
        client = Client.from_config(Config(server=server.url, username="admin", password="s3cret"))
        try:
            await client.request("GET", "/version")
        finally:
            await client.close()


PLUGIN = """
import json, os, sys
state = sys.argv[1]
n = int(open(state).read()) + 1 if os.path.exists(state) else 1
open(state, "w").write(str(n))
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
open(state + ".info", "w").write(json.dumps({"info": info, "FOO": os.environ.get("FOO")}))
if os.environ.get("FAIL"):
    print("the plugin cannot log in", file=sys.stderr)
    sys.exit(3)
status = {"token": f"token-{n}"}
if os.environ.get("EXPIRED"):
    status["expirationTimestamp"] = "2000-01-01T00:00:00Z"
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


def _plugin(tmp_path: Path, **env: str) -> tuple[ExecConfig, Path]:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    state = tmp_path / "count"
    plugin = ExecConfig(
        command=sys.executable,
        args=(str(script), str(state)),
        env=(("FOO", "bar"), *env.items()),
        api_version=V1,
        interactive_mode="Never",
        provide_cluster_info=True,
    )
    return plugin, state


async def test_an_exec_plugin_token_is_renewed_after_a_401(tokens: Server, tmp_path: Path) -> None:
    plugin, state = _plugin(tmp_path)
    tokens.allowed.add("token-1")  # type: ignore[attr-defined]
    client = Client.from_config(Config(server=tokens.url, exec=plugin), timeout=10)
    try:
        await client.request("GET", "/version")
        await client.request("GET", "/version")
        tokens.allowed.add("token-2")  # type: ignore[attr-defined]
        tokens.allowed.discard("token-1")  # type: ignore[attr-defined]
        await client.request("GET", "/version")
        assert tokens.seen == [
            "Bearer token-1",
            "Bearer token-1",
            "Bearer token-1",
            "Bearer token-2",
        ]
        ran = json.loads(Path(f"{state}.info").read_text())
        assert ran == {
            "FOO": "bar",
            "info": {
                "apiVersion": V1,
                "kind": "ExecCredential",
                "spec": {"interactive": False, "cluster": {"server": tokens.url}},
            },
        }
    finally:
        await client.close()


async def test_an_expired_exec_credential_is_renewed_before_the_next_request(
    tokens: Server, tmp_path: Path
) -> None:
    plugin, _ = _plugin(tmp_path, EXPIRED="1")
    tokens.allowed.update({"token-1", "token-2", "token-3"})  # type: ignore[attr-defined]
    client = Client.from_config(Config(server=tokens.url, exec=plugin), timeout=10)
    try:
        await client.request("GET", "/version")
        await client.request("GET", "/version")
        assert tokens.seen == ["Bearer token-1", "Bearer token-2"]
    finally:
        await client.close()


async def test_a_failing_exec_plugin_is_one_line_at_connect_and_unavailable_later(
    tokens: Server, tmp_path: Path
) -> None:
    plugin, _ = _plugin(tmp_path, FAIL="1")
    config = Config(
        server=tokens.url, exec=plugin, source="/k", field_paths={"exec": "users[me].user.exec"}
    )
    with pytest.raises(ConfigError) as e:
        await auth.Auth(config).prepare()
    assert str(e.value) == (
        f"/k: users[me].user.exec.command: {sys.executable} exited with 3: the plugin cannot log in"
    )
    client = Client.from_config(config, timeout=10)
    try:
        with pytest.raises(Unavailable, match="exited with 3"):
            await client.request("GET", "/version")
    finally:
        await client.close()


async def test_a_missing_exec_command_names_the_install_hint(tmp_path: Path) -> None:
    plugin = ExecConfig(
        command=str(tmp_path / "nope"), api_version=V1, install_hint="get nope from x"
    )
    with pytest.raises(
        ConfigError, match=r"exec\.command: .*/nope: No such file or directory \(get nope from x\)$"
    ):
        await auth.Auth(Config(server="http://127.0.0.1:9", exec=plugin, source="/k")).prepare()


# -- TLS ---------------------------------------------------------------------------------------


async def test_tls_with_a_ca_file_a_client_certificate_and_tls_server_name(tmp_path: Path) -> None:
    ca = pki.new_ca()
    serving = pki.new_serving_cert(ca, ["api.internal"])
    client_pair = pki.new_client_cert(ca, "jane")
    for name, data in {
        "ca.crt": ca.cert_pem,
        "tls.crt": serving.cert_pem,
        "tls.key": serving.key_pem,
    }.items():
        (tmp_path / name).write_bytes(data)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    tls.load_verify_locations(tmp_path / "ca.crt")
    tls.verify_mode = ssl.CERT_REQUIRED
    async for server in _serve(lambda h: True, tls):
        good = Config(
            server=server.url,
            ca_file=str(tmp_path / "ca.crt"),
            tls_server_name="api.internal",
            client_cert_data=client_pair.cert_pem,
            client_key_data=client_pair.key_pem,
        )
        client = Client.from_config(good, timeout=5)
        try:
            await client.request("GET", "/version")
            assert server.peers == ["jane"] and client.ca_pem == ca.cert_pem
        finally:
            await client.close()
        wrong_name = Client.from_config(
            Config(
                server=server.url,
                ca_data=ca.cert_pem,
                tls_server_name="other.internal",
                client_cert_data=client_pair.cert_pem,
                client_key_data=client_pair.key_pem,
            ),
            timeout=5,
        )
        try:
            with pytest.raises(Unavailable, match=r"Hostname mismatch|doesn't match|not valid for"):
                await wrong_name.request("GET", "/version")
        finally:
            await wrong_name.close()


def test_an_unreadable_ca_file_or_bad_key_names_the_field(tmp_path: Path) -> None:
    cfg = Config(
        server="https://s:1",
        ca_file=str(tmp_path / "gone.crt"),
        source="/k",
        field_paths={"ca": "clusters[c].cluster.certificate-authority"},
    )
    with pytest.raises(
        ConfigError,
        match=r"^/k: clusters\[c\].cluster.certificate-authority: .*gone.crt: No such file",
    ):
        auth.Auth(cfg)
    bad = Config(
        server="https://s:1",
        insecure=True,
        client_cert_data=b"x",
        client_key_data=b"y",
        source="/k",
        field_paths={"client_cert": "users[u].user.client-certificate-data"},
    )
    with pytest.raises(
        ConfigError,
        match=r"^/k: users\[u\].user.client-certificate-data: client certificate and key unusable",
    ):
        auth.Auth(bad)


# -- which kubeconfig --------------------------------------------------------------------------


def _write(
    path: Path, server: str, name: str, current: str | None = None, token: str = "t"
) -> None:
    doc: dict[str, Any] = {
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))


def test_kubeconfig_list_merges_and_context_picks(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "https://a:1", "a")
    _write(b, "https://b:1", "b", current="b")
    env = {"KUBECONFIG": f"{a}:{tmp_path / 'missing'}:{b}", "HOME": str(tmp_path)}
    assert auth.load(env=env).server == "https://b:1"
    assert auth.load(env=env, context="a").server == "https://a:1"
    assert auth.load(a, env=env, context="a").source == str(a)
    with pytest.raises(ConfigError, match=r"^.*/gone: No such file or directory$"):
        auth.load(tmp_path / "gone", env=env)
    with pytest.raises(ConfigError, match=r"no kubeconfig file found"):
        auth.load(env={"HOME": str(tmp_path)})


def test_in_a_pod_the_mounted_service_account_is_used(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("team")
    (tmp_path / "ca.crt").write_bytes(pki.new_ca().cert_pem)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    cfg = auth.load(env=env, in_cluster_dir=str(tmp_path))
    assert (cfg.server, cfg.token, cfg.namespace, cfg.token_file, cfg.ca_file) == (
        "https://10.96.0.1:443",
        "sa-token",
        "team",
        str(tmp_path / "token"),
        str(tmp_path / "ca.crt"),
    )
