"""Every failure is a Status with the code, reason, message and details the real server uses."""

from __future__ import annotations

import pytest

from localcluster.api.fielderrors import too_long_detail
from tests.localcluster._http import Http, status_of
from tests.support.cluster import Cluster

POD = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["no token", "wrong token"])
def test_requests_without_the_right_token_are_401_unauthorized(
    http: Http, token: str | None
) -> None:
    reply = http.get("/api/v1/namespaces", token=token)
    assert reply.status == 401
    assert status_of(reply)["reason"] == "Unauthorized"


def test_health_and_version_are_served_to_anonymous_clients(http: Http) -> None:
    assert http.get("/healthz", token=None).data == b"ok"
    assert http.get("/version", token=None).json()["major"] == "1"


def test_malformed_json_is_a_400_bad_request(http: Http, namespace: str) -> None:
    reply = http.post(f"/api/v1/namespaces/{namespace}/configmaps", b"{not json")
    body = status_of(reply)
    assert (reply.status, body["reason"]) == (400, "BadRequest")
    assert "json parse error" in body["message"]


def test_yaml_bodies_are_accepted(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        b"metadata:\n  name: from-yaml\ndata:\n  a: b\n",
        content_type="application/yaml",
    )
    assert reply.status == 201
    assert reply.json()["data"] == {"a": "b"}


def test_protobuf_bodies_without_the_magic_prefix_are_400(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        b"k8z",
        content_type="application/vnd.kubernetes.protobuf",
    )
    assert reply.status == 400
    assert status_of(reply)["reason"] == "BadRequest"


def test_unknown_media_types_are_415_unsupported(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps", b"<xml/>", content_type="application/xml"
    )
    assert reply.status == 415
    assert status_of(reply)["reason"] == "UnsupportedMediaType"


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/widgets",
        "/apis/nope.example.com/v1/things",
        "/apis/apps/v9/deployments",
        "/api/v1/nodes/x/log",
    ],
    ids=["unknown core resource", "unknown group", "unknown version", "unknown subresource"],
)
def test_unknown_resources_are_404_not_found(http: Http, path: str) -> None:
    reply = http.get(path)
    assert reply.status == 404
    assert status_of(reply)["reason"] == "NotFound"


def test_a_verb_the_resource_does_not_support_is_405(http: Http) -> None:
    reply = http.delete("/api/v1/namespaces")
    assert reply.status == 405
    assert status_of(reply)["reason"] == "MethodNotAllowed"


def test_creating_in_a_missing_namespace_is_404_for_the_namespace(http: Http) -> None:
    reply = http.post("/api/v1/namespaces/no-such-ns/configmaps", {"metadata": {"name": "x"}})
    body = status_of(reply)
    assert (reply.status, body["message"]) == (404, 'namespaces "no-such-ns" not found')


def test_creating_in_a_terminating_namespace_is_403_forbidden(http: Http, namespace: str) -> None:
    http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": "keep", "finalizers": ["test/hold"]}},
    )
    http.delete(f"/api/v1/namespaces/{namespace}")
    reply = http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "late"}})
    body = status_of(reply)
    assert (reply.status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        f'configmaps "late" is forbidden: unable to create new content in namespace {namespace} '
        "because it is being terminated"
    )
    http.patch(
        f"/api/v1/namespaces/{namespace}/configmaps/keep", {"metadata": {"finalizers": None}}
    )


@pytest.mark.parametrize(
    ("name", "field_message"),
    [
        (
            "Upper_Case",
            'metadata.name: Invalid value: "Upper_Case": a lowercase RFC 1123 subdomain',
        ),
        ("x" * 254, "metadata.name: Invalid value"),
    ],
    ids=["bad characters", "too long"],
)
def test_invalid_names_are_422_invalid_with_causes(
    http: Http, namespace: str, name: str, field_message: str
) -> None:
    reply = http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": name}})
    body = status_of(reply)
    assert (reply.status, body["reason"]) == (422, "Invalid")
    assert body["message"].startswith(f'ConfigMap "{name}" is invalid: ')
    assert field_message.split(": ", 1)[1] in body["message"]
    assert body["details"]["causes"][0]["field"] == "metadata.name"
    assert body["details"]["causes"][0]["reason"] == "FieldValueInvalid"


def test_namespace_names_must_be_dns_labels(http: Http) -> None:
    reply = http.post("/api/v1/namespaces", {"metadata": {"name": "has.dots"}})
    assert reply.status == 422
    assert "RFC 1123 label" in status_of(reply)["message"]


def test_a_missing_name_is_422_required(http: Http, namespace: str) -> None:
    reply = http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {}})
    body = status_of(reply)
    assert reply.status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: name or generateName is required",
            "field": "metadata.name",
        }
    ]


def test_pods_without_containers_are_invalid(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/pods", {"metadata": {"name": "empty"}, "spec": {}}
    )
    body = status_of(reply)
    assert reply.status == 422
    assert body["message"] == 'Pod "empty" is invalid: spec.containers: Required value'


def test_a_body_name_that_differs_from_the_url_is_400(http: Http, namespace: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "a"}})
    reply = http.put(f"{path}/a", {"metadata": {"name": "b"}})
    assert reply.status == 400
    assert (
        status_of(reply)["message"]
        == "the name of the object (b) does not match the name on the URL (a)"
    )


def test_a_body_namespace_that_differs_from_the_url_is_400(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"metadata": {"name": "a", "namespace": "other"}},
    )
    assert reply.status == 400
    assert (
        status_of(reply)["message"]
        == "the namespace of the provided object does not match the namespace sent on the request"
    )


@pytest.mark.parametrize(
    ("precondition", "message_start"),
    [
        (
            {"uid": "00000000-0000-0000-0000-000000000000"},
            "Precondition failed: UID in precondition: 00000000",
        ),
        ({"resourceVersion": "1"}, "Precondition failed: ResourceVersion in precondition: 1"),
    ],
    ids=["uid", "resourceVersion"],
)
def test_delete_preconditions_that_do_not_hold_are_409(
    http: Http, namespace: str, precondition: dict[str, str], message_start: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    http.post(path, {"metadata": {"name": "pre"}})
    reply = http.delete(
        f"{path}/pre", {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": precondition}
    )
    body = status_of(reply)
    assert (reply.status, body["reason"]) == (409, "Conflict")
    assert body["message"].startswith(
        f'Operation cannot be fulfilled on configmaps "pre": {message_start}'
    )
    assert http.get(f"{path}/pre").status == 200


def test_protected_namespaces_cannot_be_deleted(http: Http) -> None:
    reply = http.delete("/api/v1/namespaces/default")
    assert reply.status == 403
    assert (
        status_of(reply)["message"]
        == 'namespaces "default" is forbidden: this namespace may not be deleted'
    )


def test_an_unparsable_label_selector_is_400(http: Http, namespace: str) -> None:
    reply = http.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=a%20in%20(")
    assert reply.status == 400


def test_an_unsupported_field_selector_is_400(http: Http, namespace: str) -> None:
    reply = http.get(f"/api/v1/namespaces/{namespace}/configmaps?fieldSelector=data.a%3Db")
    assert reply.status == 400
    assert status_of(reply)["message"] == (
        '"data.a" is not a known field selector: only "metadata.name", "metadata.namespace"'
    )


def test_a_resource_version_newer_than_the_server_is_a_504_timeout(
    http: Http, namespace: str
) -> None:
    reply = http.get(
        f"/api/v1/namespaces/{namespace}/pods?resourceVersion=999999999&resourceVersionMatch=NotOlderThan"
    )
    body = status_of(reply)
    assert (reply.status, body["reason"]) == (504, "Timeout")
    assert body["message"].startswith("Too large resource version: 999999999, current: ")


def test_the_python_client_raises_api_exceptions_with_the_status(
    cluster: Cluster, namespace: str
) -> None:
    from kubernetes import client

    with cluster.api_client() as api, pytest.raises(client.ApiException) as info:
        client.CoreV1Api(api).read_namespaced_pod("ghost", namespace)
    assert info.value.status == 404
    assert '"reason":"NotFound"' in info.value.body.replace(" ", "")


def test_verbs_a_resource_does_not_serve_are_405(http: Http) -> None:
    reply = http.get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
    assert reply.status == 405
    assert status_of(reply)["reason"] == "MethodNotAllowed"


def test_an_access_review_without_attributes_is_422(http: Http) -> None:
    reply = http.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {"spec": {}})
    assert reply.status == 422


def test_yaml_timestamps_stay_strings(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps",
        b"metadata:\n  name: stamped\n  annotations:\n    at: 2026-01-01T00:00:00Z\n",
        content_type="application/yaml",
    )
    assert reply.status == 201, reply.data
    assert reply.json()["metadata"]["annotations"] == {"at": "2026-01-01T00:00:00Z"}


def test_field_validation_warnings_travel_as_warning_headers(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps?fieldValidation=Warn",
        {"metadata": {"name": "warned"}, "data": {}, "bogus": 1},
    )
    assert reply.status == 201
    warnings = reply.headers.getlist("Warning")
    assert warnings and all(w.startswith('299 - "') and w.endswith('"') for w in warnings)
    assert any("bogus" in w for w in warnings)


def test_strict_field_validation_refuses_unknown_fields(http: Http, namespace: str) -> None:
    reply = http.post(
        f"/api/v1/namespaces/{namespace}/configmaps?fieldValidation=Strict",
        {"metadata": {"name": "strict"}, "bogus": 1},
    )
    assert reply.status in (400, 422)
    assert "bogus" in status_of(reply)["message"]


MALFORMED = {
    "metadata is a list": ({"metadata": []}, 400),
    "labels are a list": ({"metadata": {"name": "x", "labels": ["a"]}}, 400),
    "a label value is a number": ({"metadata": {"name": "x", "labels": {"a": 1}}}, 400),
    "finalizers are a string": ({"metadata": {"name": "x", "finalizers": "f"}}, 400),
    "owner references hold a number": ({"metadata": {"name": "x", "ownerReferences": [1]}}, 400),
    "the body is a list": ([], 400),
    "spec is a string": ({"metadata": {"name": "x"}, "spec": "s"}, None),
}


@pytest.mark.parametrize(("body", "code"), list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_objects_are_client_errors_never_500(
    http: Http, namespace: str, body: object, code: int | None
) -> None:
    reply = http.post(f"/api/v1/namespaces/{namespace}/pods", body)
    assert 400 <= reply.status < 500, reply.data
    if code is not None:
        assert reply.status == code
    assert status_of(reply)["status"] == "Failure"


def test_malformed_delete_options_are_400(http: Http, namespace: str) -> None:
    http.post(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": "d"}})
    reply = http.delete(f"/api/v1/namespaces/{namespace}/configmaps/d", {"preconditions": "x"})
    assert reply.status == 400


@pytest.mark.parametrize(
    "kind", ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
)
def test_webhook_configurations_the_real_server_refuses_are_422(http: Http, kind: str) -> None:
    reply = http.post(
        f"/apis/admissionregistration.k8s.io/v1/{kind}",
        {
            "metadata": {"name": "refused"},
            "webhooks": [
                {
                    "name": "refused.example.com",
                    "clientConfig": {"url": "http://127.0.0.1:8443/hook"},
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        },
    )
    assert reply.status == 422, reply.data
    assert status_of(reply)["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"http://127.0.0.1:8443/hook\": 'https' is the only allowed URL scheme",
            "field": "webhooks[0].clientConfig.url",
        }
    ]


def test_too_long_annotations_and_field_managers_use_their_kubernetes_wording(
    http: Http, namespace: str
) -> None:
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    big = http.post(path, {"metadata": {"name": "big", "annotations": {"a": "x" * 262144}}})
    assert big.status == 422
    assert status_of(big)["details"]["causes"] == [
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: may not be more than 262144 bytes",
            "field": "metadata.annotations",
        }
    ]
    manager = http.post(f"{path}?fieldManager={'m' * 129}", {"metadata": {"name": "m"}})
    assert manager.status == 422
    assert status_of(manager) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'CreateOptions.meta.k8s.io "" is invalid: '
        "fieldManager: Too long: may not be more than 128 bytes",
        "reason": "Invalid",
        "details": {
            "group": "meta.k8s.io",
            "kind": "CreateOptions",
            "causes": [
                {
                    "reason": "FieldValueTooLong",
                    "message": "Too long: may not be more than 128 bytes",
                    "field": "fieldManager",
                }
            ],
        },
        "code": 422,
    }


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        pytest.param(5, "Too long: may not be more than 5 bytes", id="maxLength"),
        pytest.param(1, "Too long: may not be more than 1 byte", id="one-byte"),
    ],
)
def test_too_long_is_worded_as_kubernetes_1_32_does(limit: int, text: str) -> None:
    assert too_long_detail(limit) == text


@pytest.mark.parametrize(
    ("sub", "start"),
    [
        # exec and port-forward go to the pod's kubelet: this pod has none yet.
        ("exec", "pod p does not have a host assigned"),
        ("attach", "attach is not supported: containers run as local processes"),
        ("portforward", "pod p does not have a host assigned"),
    ],
)
def test_streaming_pod_subresources_say_why_they_cannot_be_served(
    http: Http, namespace: str, sub: str, start: str
) -> None:
    pods = f"/api/v1/namespaces/{namespace}/pods"
    spec = {"containers": [{"name": "c", "image": "x"}]}
    assert http.post(pods, {"metadata": {"name": "p"}, "spec": spec}).status == 201
    reply = http.post(f"{pods}/p/{sub}?command=true&container=c", None)
    assert reply.status == 400
    assert status_of(reply)["reason"] == "BadRequest"
    assert status_of(reply)["message"].startswith(start)
    missing = http.post(f"{pods}/nope/{sub}", None)
    assert (missing.status, status_of(missing)["message"]) == (404, 'pods "nope" not found')
    listed = {r["name"] for r in http.get("/api/v1").json()["resources"]}
    assert f"pods/{sub}" in listed
