"""Sessions (issue 29, item 4): the login cookie is `Secure` when the browser's connection is
TLS — ours, or a trusted proxy's (`X-Forwarded-Proto: https` from a `--trusted-proxy` address,
ignored from anyone else); an open event stream reviews its token again every `stream_recheck`
seconds and ends once it is no longer valid or cannot be checked, and after `stream_lifetime`
whatever happens. The reviews are answered from `TableAccess`'s table (which token is whose; a
revoked token is no one's); on real API servers, tests/gitops/test_api_access_cluster.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from gitops.api import routes as api
from gitops.api import rules
from tests.gitops.test_api import read_event, wait_for
from tests.gitops.test_api_access import TableAccess, bearer, hub, served

TRUSTED = rules.proxy_networks(["10.0.0.0/8", "fd00::/8", "127.0.0.1"])
SECURE = {
    "our own TLS": (True, "192.0.2.1", None, (), True),
    "our own TLS, whatever the header says": (True, "192.0.2.1", "http", TRUSTED, True),
    "plain, no header": (False, "10.1.2.3", None, TRUSTED, False),
    "a trusted proxy saying https": (False, "10.1.2.3", "https", TRUSTED, True),
    "in capitals": (False, "10.1.2.3", "HTTPS", TRUSTED, True),
    "a trusted proxy saying http": (False, "10.1.2.3", "http", TRUSTED, False),
    "the nearest proxy's value counts": (False, "10.1.2.3", "https, http", TRUSTED, False),
    "the nearest proxy's https": (False, "10.1.2.3", "http, https", TRUSTED, True),
    "anyone else saying https": (False, "192.0.2.1", "https", TRUSTED, False),
    "nobody trusted (the default)": (False, "10.1.2.3", "https", (), False),
    "a trusted IPv6 proxy": (False, "fd00::5", "https", TRUSTED, True),
    "an IPv4-mapped trusted peer": (False, "::ffff:10.1.2.3", "https", TRUSTED, True),
    "one trusted address": (False, "127.0.0.1", "https", TRUSTED, True),
    "a neighbour of it": (False, "127.0.0.2", "https", TRUSTED, False),
    "no peer address": (False, None, "https", TRUSTED, False),
    "a peer that is no address": (False, "unix-socket", "https", TRUSTED, False),
}


@pytest.mark.parametrize(
    ("tls", "peer", "proto", "trusted", "expected"), SECURE.values(), ids=SECURE
)
def test_served_securely(
    tls: bool, peer: str | None, proto: str | None, trusted: Any, expected: bool
) -> None:
    assert (
        rules.served_securely(tls=tls, peer=peer, forwarded_proto=proto, trusted=trusted)
        is expected
    )


def test_trusted_proxies_are_addresses_or_cidrs() -> None:
    assert [str(n) for n in rules.proxy_networks(["10.0.0.0/8, 192.0.2.7", "::1"])] == [
        "10.0.0.0/8",
        "192.0.2.7/32",
        "::1/128",
    ]
    with pytest.raises(ValueError, match="'ingress' is not an IP address or CIDR"):
        rules.proxy_networks(["10.0.0.0/8,ingress"])


def cookie_attributes(response: Any) -> set[str]:
    (value,) = [v for v in response.headers.getall("Set-Cookie", []) if "trainops-token=" in v]
    return {a.strip().lower() for a in value.split(";")[1:]}


@pytest.mark.parametrize(
    ("trusted", "headers", "secure"),
    [
        ((), {}, False),
        ((), {"X-Forwarded-Proto": "https"}, False),
        (("10.0.0.0/8",), {"X-Forwarded-Proto": "https"}, False),  # the peer is 127.0.0.1
        (("127.0.0.0/8",), {"X-Forwarded-Proto": "https"}, True),
        (("127.0.0.0/8",), {"X-Forwarded-Proto": "http"}, False),
        (("127.0.0.0/8",), {}, False),
    ],
    ids=["plain", "untrusted-header", "other-proxy", "trusted-proxy", "proxy-says-http", "none"],
)
async def test_the_login_cookie_is_secure_behind_a_trusted_tls_proxy(
    trusted: tuple[str, ...], headers: dict[str, str], secure: bool
) -> None:
    import dashboard

    fake = hub()
    app = api.create_app(
        fake,
        token=None,
        webhook_secret=None,
        allow_remote_writes=False,
        access=TableAccess(),
        trusted_proxies=trusted,
    )
    dashboard.install(app, hub=fake, client=None)  # type: ignore[arg-type]  # pages from the Hub
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        link = await client.get("/?token=tok-alice", headers=headers, allow_redirects=False)
        assert link.status == 303
        form = await client.post(
            "/login",
            data={"token": "tok-alice", "next": "/"},
            headers={**headers, "Sec-Fetch-Site": "same-origin"},
            allow_redirects=False,
        )
        assert form.status == 303
    for response in (link, form):
        attributes = cookie_attributes(response)
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        assert ("secure" in attributes) is secure


async def test_a_stream_whose_token_is_revoked_ends_within_the_recheck_period() -> None:
    access = TableAccess()
    async with served(hub(), access, stream_recheck=0.5, heartbeat=60) as client:
        response = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert await read_event(response) == ["retry: 2000"]
        # While the token holds, the stream stays open across recheck periods, each reviewed.
        before = access.reviews
        deadline = time.monotonic() + 10
        while access.reviews < before + 3:
            assert time.monotonic() < deadline, "the stream did not review its token"
            await asyncio.sleep(0.05)
        assert not response.content.at_eof()
        access.revoked.add("tok-alice")
        revoked = time.monotonic()
        assert await read_event(response, timeout=5) == [": the token is no longer valid"]
        with pytest.raises(EOFError):
            await read_event(response, timeout=5)
        ended = time.monotonic() - revoked
        await wait_for(lambda: client.app[api.STREAMS].open == 0)
    assert ended < 0.5 + 1.0  # the recheck period, and a second of slack for a slow machine


async def test_a_stream_ends_when_its_token_cannot_be_checked() -> None:
    access = TableAccess()
    async with served(hub(), access, stream_recheck=0.3) as client:
        response = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert await read_event(response) == ["retry: 2000"]
        access.down = True
        assert await read_event(response, timeout=5) == [
            ": the token cannot be checked now: the API server did not answer"
        ]
        with pytest.raises(EOFError):
            await read_event(response, timeout=5)


async def test_a_stream_ends_after_its_lifetime_and_the_browser_may_reconnect() -> None:
    access = TableAccess()
    async with served(hub(), access, stream_lifetime=0.5, heartbeat=0.2) as client:
        response = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        started = time.monotonic()
        assert await read_event(response) == ["retry: 2000"]
        lines: list[list[str]] = []
        with pytest.raises(EOFError):
            while True:
                lines.append(await read_event(response, timeout=5))
        assert lines[-1] == [": the stream's lifetime is over"]
        assert [": ping"] in lines  # it was alive until then
        assert time.monotonic() - started < 0.5 + 1.0
        again = await client.get("/api/v1/stream", headers=bearer("tok-alice"))
        assert await read_event(again) == ["retry: 2000"]
        again.close()
