"""The admission chain against a real TLS webhook server on loopback, and its matching rules."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from certs import pki
from localcluster.admission import match
from localcluster.admission.chain import AdmissionChain
from localcluster.api.types import AdmissionAttributes, ApiError, ResourceInfo

POD = ResourceInfo("", "v1", "Pod", "pods", "pod", True, subresources=("status",))
NAMESPACE = ResourceInfo("", "v1", "Namespace", "namespaces", "namespace", False)
NODE = ResourceInfo("", "v1", "Node", "nodes", "node", False)
JOB = ResourceInfo(
    "batch.tensorstack.dev", "v1beta1", "TensorFlowTrainingJob", "tensorflowtrainingjobs",
    "tensorflowtrainingjob", True, crd={}, crd_version={"name": "v1beta1"},
)  # fmt: skip
VWC = ResourceInfo(
    "admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations", "validatingwebhookconfiguration", False,
)  # fmt: skip


def attrs(
    info: ResourceInfo = POD,
    operation: str = "CREATE",
    labels: dict[str, str] | None = None,
    old_labels: dict[str, str] | None = None,
    subresource: str = "",
    dry_run: bool = False,
) -> AdmissionAttributes:
    obj = {"apiVersion": info.api_version, "kind": info.kind,
           "metadata": {"name": "x", "labels": labels or {}}}  # fmt: skip
    old = None
    if old_labels is not None:
        old = {**obj, "metadata": {"name": "x", "labels": old_labels}}
    return AdmissionAttributes(
        operation=operation,  # type: ignore[arg-type]
        info=info,
        namespace="team-a" if info.namespaced else "",
        name="x",
        obj=obj,
        old_obj=old,
        subresource=subresource,
        dry_run=dry_run,
    )


def rule(resources: list[str], **extra: Any) -> dict[str, Any]:
    base = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"]}
    return {"rules": [{**base, **extra, "resources": resources}]}


@pytest.mark.parametrize(
    ("hook", "request_attrs", "expected"),
    [
        pytest.param(rule(["pods"]), attrs(), True, id="exact-resource"),
        pytest.param(rule(["pods"]), attrs(subresource="status"), False,
                     id="resource-does-not-cover-subresource"),
        pytest.param(rule(["pods/status"]), attrs(subresource="status"), True,
                     id="named-subresource"),
        pytest.param(rule(["pods/*"]), attrs(), True, id="resource-star-covers-main"),
        pytest.param(rule(["*"]), attrs(subresource="status"), False,
                     id="star-excludes-subresources"),
        pytest.param(rule(["*/*"]), attrs(subresource="status"), True, id="star-star"),
        pytest.param(rule(["*/status"]), attrs(subresource="status"), True, id="star-status"),
        pytest.param(rule(["pods"], operations=["UPDATE"]), attrs(), False, id="operation"),
        pytest.param(rule(["pods"], operations=["*"]), attrs(operation="DELETE"), True,
                     id="operation-star"),
        pytest.param(rule(["*"], apiGroups=["apps"]), attrs(), False, id="group"),
        pytest.param(rule(["*"], scope="Cluster"), attrs(), False, id="scope-cluster"),
        pytest.param(rule(["*"], scope="Namespaced"), attrs(NODE), False, id="scope-namespaced"),
        pytest.param(rule(["*"], scope="Cluster"), attrs(NAMESPACE), True,
                     id="namespace-is-cluster-scoped"),
    ],
)  # fmt: skip
def test_rules_match_like_the_api_server(
    hook: dict, request_attrs: AdmissionAttributes, expected: bool
) -> None:
    assert match.matches_rules(hook, request_attrs) is expected


SELECT_PROD = {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}


@pytest.mark.parametrize(
    ("request_attrs", "namespace_labels", "expected"),
    [
        pytest.param(attrs(), {"env": "prod"}, True, id="namespaced-uses-namespace-labels"),
        pytest.param(attrs(), {"env": "dev"}, False, id="namespace-does-not-match"),
        pytest.param(attrs(NODE), None, True, id="other-cluster-scoped-always-matches"),
        pytest.param(attrs(NAMESPACE, labels={"env": "prod"}), None, True,
                     id="namespace-object-uses-own-labels"),
        pytest.param(attrs(NAMESPACE, labels={"env": "dev"}), None, False,
                     id="namespace-object-own-labels-mismatch"),
    ],
)  # fmt: skip
def test_namespace_selector(
    request_attrs: AdmissionAttributes, namespace_labels: dict | None, expected: bool
) -> None:
    ns = {"metadata": {"name": "team-a", "labels": namespace_labels}} if namespace_labels else None
    hook = {"namespaceSelector": SELECT_PROD}
    assert match.matches_namespace(hook, request_attrs, ns) is expected


@pytest.mark.parametrize(
    ("selector", "new", "old", "expected"),
    [
        pytest.param({"matchLabels": {"a": "1"}}, {"a": "1"}, None, True, id="new-matches"),
        pytest.param({"matchLabels": {"a": "1"}}, {}, {"a": "1"}, True, id="old-matches"),
        pytest.param({"matchLabels": {"a": "1"}}, {}, {}, False, id="neither"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, None,
                     True, id="does-not-exist"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
                     {"a": "1"}, None, False, id="not-in"),
        pytest.param({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, None,
                     True, id="exists"),
    ],
)  # fmt: skip
def test_object_selector_matches_new_or_old_labels(
    selector: dict, new: dict, old: dict | None, expected: bool
) -> None:
    request_attrs = attrs(labels=new, old_labels=old)
    assert match.matches_object({"objectSelector": selector}, request_attrs) is expected


def test_webhooks_run_in_configuration_name_order_then_declaration_order() -> None:
    configs = [
        {"metadata": {"name": "b"}, "webhooks": [{"name": "b1"}]},
        {"metadata": {"name": "a"}, "webhooks": [{"name": "a1"}, {"name": "a0"}]},
    ]
    assert [h.name for h in match.ordered_webhooks(configs)] == ["a1", "a0", "b1"]


# --------------------------------------------------------------------------- calls


class Lookup:
    """The storage side of the chain, as plain data."""

    def __init__(self) -> None:
        self.configs: dict[str, list[dict]] = {"mutating": [], "validating": []}
        self.namespaces: dict[str, dict] = {"team-a": {"metadata": {"name": "team-a"}}}
        self.endpoints: dict[tuple[str, str], dict] = {}

    async def webhook_configurations(self, kind: str) -> list[dict]:
        return self.configs[kind]

    async def get_namespace(self, name: str) -> dict | None:
        return self.namespaces.get(name)

    async def get_endpoints(self, namespace: str, name: str) -> dict | None:
        return self.endpoints.get((namespace, name))


_CHAINS: list[AdmissionChain] = []


def make_chain(lookup: Lookup) -> AdmissionChain:
    """An AdmissionChain whose webhook sessions are closed after the test."""
    chain = AdmissionChain(lookup)
    _CHAINS.append(chain)
    return chain


@pytest.fixture(autouse=True)
async def _close_chains() -> AsyncIterator[None]:
    yield
    while _CHAINS:
        await _CHAINS.pop().close()


class WebhookServer:
    """A TLS webhook on loopback whose answer per path is set by the test."""

    def __init__(self, ca: pki.KeyPair) -> None:
        self.ca = ca
        self.port = 0
        self.reviews: list[tuple[str, dict]] = []
        self.hosts: list[str] = []
        self.peers: set[Any] = set()  # client (address, port): one per TCP connection

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append((request.path, review))
        self.hosts.append(request.headers.get("Host", ""))
        assert request.transport is not None
        self.peers.add(request.transport.get_extra_info("peername"))
        assert request.query.get("timeout", "").endswith("s")
        uid = review["request"]["uid"]
        path = request.path
        response: dict[str, Any] = {"uid": uid, "allowed": True}
        if path == "/deny":
            response = {
                "uid": uid,
                "allowed": False,
                "status": {"code": 403, "reason": "Forbidden", "message": "spec.replicaSpecs: bad"},
            }
        elif path == "/deny-bare":
            response = {"uid": uid, "allowed": False}
        elif path.startswith("/label-"):
            value = path.removeprefix("/label-")
            ops = [{"op": "add", "path": "/metadata/labels/stamp", "value": value}]
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        elif path == "/big-patch":  # an answer far larger than one socket read (~150 KiB)
            ops = [{"op": "add", "path": "/metadata/annotations",
                    "value": {"blob": "x" * 150 * 1024}}]  # fmt: skip
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        elif path == "/huge":  # over the response cap (2 × 3 MiB + envelope)
            response["warnings"] = ["y" * (7 * 1024 * 1024)]
        elif path == "/warn":
            response["warnings"] = ["be careful"]
        elif path == "/slow":
            await asyncio.sleep(1.5)
        elif path == "/bad-uid":
            response["uid"] = "nope"
        elif path == "/error":
            return web.Response(status=500)
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )  # fmt: skip

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()


@pytest.fixture(scope="module")
def pki_pair() -> tuple[pki.KeyPair, pki.KeyPair]:
    ca = pki.new_ca("admission-test-ca")
    return ca, pki.new_serving_cert(ca, ["hook.webhooks.svc", "127.0.0.1"])


@pytest.fixture
async def server(pki_pair: tuple[pki.KeyPair, pki.KeyPair]) -> AsyncIterator[WebhookServer]:
    ca, serving = pki_pair
    hook = WebhookServer(ca)
    app = web.Application()
    app.router.add_post("/{tail:.*}", hook.handle)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert.write_bytes(serving.cert_pem)
        key.write_bytes(serving.key_pem)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert, key)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    hook.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield hook
    await runner.cleanup()


def config(name: str, *hooks: dict) -> dict:
    return {"metadata": {"name": name}, "webhooks": list(hooks)}


def hook(name: str, client: dict, **extra: Any) -> dict:
    return {"name": name, "clientConfig": client, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], **rule(["pods"], operations=["*"]), **extra}  # fmt: skip


def by_url(server: WebhookServer, path: str, *, ca: bool = True) -> dict:
    client = {"url": server.url(path)}
    if ca:
        client["caBundle"] = server.ca_bundle
    return client


async def test_mutating_webhooks_apply_patches_in_order_and_see_earlier_changes(
    server: WebhookServer,
) -> None:
    lookup = Lookup()
    lookup.configs["mutating"] = [
        config("b-second", hook("second.example.com", by_url(server, "/label-two"))),
        config("a-first", hook("first.example.com", by_url(server, "/label-one"))),
    ]
    obj, warnings = await make_chain(lookup).mutate(attrs())
    assert obj is not None and obj["metadata"]["labels"] == {"stamp": "two"}
    assert [p for p, _ in server.reviews] == ["/label-one", "/label-two"]
    second_saw = server.reviews[1][1]["request"]["object"]["metadata"]["labels"]
    assert second_saw == {"stamp": "one"}
    request = server.reviews[0][1]["request"]
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert (request["operation"], request["namespace"], request["name"]) == (
        "CREATE",
        "team-a",
        "x",
    )
    assert request["options"] == {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    assert warnings == []


async def test_if_needed_webhooks_are_reinvoked_after_later_changes(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["mutating"] = [config("c", hook(
        "first.example.com", by_url(server, "/warn"), reinvocationPolicy="IfNeeded"),
        hook("second.example.com", by_url(server, "/label-x")))]  # fmt: skip
    _, warnings = await make_chain(lookup).mutate(attrs())
    assert [p for p, _ in server.reviews] == ["/warn", "/label-x", "/warn"]
    assert warnings == ["be careful", "be careful"]


async def test_denial_carries_the_webhook_status_and_the_api_server_text(
    server: WebhookServer,
) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [config("v", hook("deny.example.com", by_url(server, "/deny")))]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs())
    assert (err.value.code, err.value.reason) == (403, "Forbidden")
    assert err.value.message == (
        'admission webhook "deny.example.com" denied the request: spec.replicaSpecs: bad'
    )


async def test_denial_without_status_defaults_to_400(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [
        config("v", hook("d.example.com", by_url(server, "/deny-bare")))
    ]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs())
    assert err.value.code == 400
    assert (
        err.value.message
        == 'admission webhook "d.example.com" denied the request without explanation'
    )


async def test_validating_webhooks_run_concurrently_and_the_first_denial_in_order_wins(
    server: WebhookServer,
) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [
        config("a", hook("warn.example.com", by_url(server, "/warn"))),
        config("b", hook("deny.example.com", by_url(server, "/deny"))),
        config("c", hook("bare.example.com", by_url(server, "/deny-bare"))),
    ]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs())
    assert "deny.example.com" in err.value.message
    assert len(server.reviews) == 3


@pytest.mark.parametrize(
    ("client_for", "timeout", "cause"),
    [
        pytest.param(lambda s: {"url": "https://127.0.0.1:1/v"}, None,
                     'Post "https://127.0.0.1:1/v?timeout=10s": dial tcp 127.0.0.1:1: connect: '
                     "connection refused", id="refused"),
        pytest.param(lambda s: by_url(s, "/v", ca=False), None,
                     "tls: failed to verify certificate: x509: certificate signed by unknown "
                     "authority", id="unknown-authority"),
        pytest.param(lambda s: by_url(s, "/slow"), 1, 'timeout=1s": context deadline exceeded',
                     id="timeout"),
        pytest.param(lambda s: by_url(s, "/bad-uid"), None,
                     'received invalid webhook response: expected response.uid=', id="bad-uid"),
        pytest.param(lambda s: by_url(s, "/error"), None,
                     "the server responded with the status code 500", id="http-500"),
        pytest.param(lambda s: {"service": {"name": "gone", "namespace": "webhooks",
                                            "path": "/v"}}, None,
                     'Post "https://gone.webhooks.svc:443/v?timeout=10s": no endpoints available '
                     'for service "gone"', id="no-endpoints"),
    ],
)  # fmt: skip
async def test_failed_calls_are_internal_errors_with_failure_policy_fail(
    server: WebhookServer, client_for, timeout: int | None, cause: str
) -> None:
    lookup = Lookup()
    extra = {"timeoutSeconds": timeout} if timeout else {}
    lookup.configs["validating"] = [config("v", hook("f.example.com", client_for(server), **extra))]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs())
    assert (err.value.code, err.value.reason) == (500, "InternalError")
    assert err.value.message.startswith(
        'Internal error occurred: failed calling webhook "f.example.com": '
    )
    assert cause in err.value.message


async def test_failure_policy_ignore_skips_a_broken_webhook(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [config("v", hook(
        "f.example.com", {"url": "https://127.0.0.1:1/v"}, failurePolicy="Ignore"))]  # fmt: skip
    assert await make_chain(lookup).validate(attrs()) == []


async def test_service_references_dial_the_endpoints_with_the_service_dns_name(
    server: WebhookServer,
) -> None:
    lookup = Lookup()
    lookup.endpoints[("webhooks", "hook")] = {"subsets": [
        {"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": server.port}]}]}  # fmt: skip
    client = {"service": {"name": "hook", "namespace": "webhooks", "path": "/warn"},
              "caBundle": server.ca_bundle}  # fmt: skip
    lookup.configs["validating"] = [config("v", hook("svc.example.com", client))]
    assert await make_chain(lookup).validate(attrs()) == ["be careful"]
    assert server.hosts == ["hook.webhooks.svc:443"]


async def test_selectors_and_match_conditions_filter_calls(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.namespaces["team-a"]["metadata"]["labels"] = {"env": "dev"}
    lookup.configs["validating"] = [config("v",
        hook("ns.example.com", by_url(server, "/deny"), namespaceSelector=SELECT_PROD),
        hook("obj.example.com", by_url(server, "/deny"),
             objectSelector={"matchLabels": {"checked": "yes"}}),
        hook("cel.example.com", by_url(server, "/deny"), matchConditions=[
            {"name": "only-updates", "expression": "request.operation == 'UPDATE'"}]),
        hook("warn.example.com", by_url(server, "/warn")),
    )]  # fmt: skip
    assert await make_chain(lookup).validate(attrs()) == ["be careful"]
    assert [p for p, _ in server.reviews] == ["/warn"]


async def test_dry_run_with_side_effects_is_refused(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [
        config("v", hook("se.example.com", by_url(server, "/warn"), sideEffects="Some"))
    ]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs(dry_run=True))
    assert err.value.code == 400
    assert 'admission webhook "se.example.com" does not support dry run' in err.value.message


async def test_webhook_configurations_themselves_are_never_sent_to_webhooks(
    server: WebhookServer,
) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [config("v", {
        **hook("deny.example.com", by_url(server, "/deny")),
        "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                   "resources": ["*"]}]})]  # fmt: skip
    assert await make_chain(lookup).validate(attrs(VWC)) == []
    with pytest.raises(ApiError):
        await make_chain(lookup).validate(attrs(JOB))


async def test_a_mutating_answer_larger_than_one_read_is_read_whole(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["mutating"] = [
        config("m", hook("big.example.com", by_url(server, "/big-patch")))
    ]
    obj, _ = await make_chain(lookup).mutate(attrs())
    assert obj is not None and obj["metadata"]["annotations"]["blob"] == "x" * 150 * 1024


async def test_an_answer_over_the_size_cap_is_a_failed_call(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["validating"] = [config("v", hook("huge.example.com", by_url(server, "/huge")))]
    with pytest.raises(ApiError) as err:
        await make_chain(lookup).validate(attrs())
    assert (err.value.code, err.value.reason) == (500, "InternalError")
    assert err.value.message.startswith(
        'Internal error occurred: failed calling webhook "huge.example.com": failed to call '
        f'webhook: Post "{server.url("/huge")}?timeout=10s": response body too large'
    )


async def test_calls_reuse_one_connection_per_webhook_server(server: WebhookServer) -> None:
    lookup = Lookup()
    lookup.configs["mutating"] = [config("m", hook("one.example.com", by_url(server, "/label-a")))]
    lookup.configs["validating"] = [config("v", hook("two.example.com", by_url(server, "/warn")))]
    chain = make_chain(lookup)
    for _ in range(3):
        await chain.mutate(attrs())
        assert await chain.validate(attrs()) == ["be careful"]
    assert len(server.reviews) == 6
    assert len(server.peers) == 1
    await chain.close()  # closes the pooled connection; the chain opens a new one when needed
    await chain.validate(attrs())
    assert len(server.peers) == 2
