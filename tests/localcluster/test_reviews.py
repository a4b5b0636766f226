"""TokenReview and SubjectAccessReview, as trainops' HTTP API posts them (gitops/api/reviews.py):
the embedded server answers both as kube-apiserver does, from the tokens it accepts; it does no
RBAC, so every SubjectAccessReview is allowed (tests/gitops/test_api_access_cluster.py has what
a real server's RBAC refuses)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.localcluster._http import Http
from tests.support.cluster import Cluster

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def token_review(token: str) -> dict[str, Any]:
    return {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    }


def access_review(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


@pytest.fixture
def http(cluster: Cluster) -> Http:
    return Http(cluster)


def test_a_token_review_names_the_admin_of_the_kubeconfig_token(
    http: Http, cluster: Cluster
) -> None:
    reply = http.post(TOKEN_REVIEWS, token_review(cluster.token))
    assert reply.status == 201, reply.data
    status = reply.json()["status"]
    assert status["authenticated"] is True
    assert status["user"]["username"] == "admin"
    assert "system:masters" in status["user"]["groups"]


def test_a_token_the_server_does_not_know_is_not_authenticated(http: Http) -> None:
    reply = http.post(TOKEN_REVIEWS, token_review("not-a-token"))
    assert reply.status == 201, reply.data
    status = reply.json()["status"]
    assert not status.get("authenticated")
    assert not status.get("user", {}).get("username")


def test_an_access_review_for_the_admin_is_allowed_and_one_without_a_subject_is_422(
    http: Http,
) -> None:
    attributes = {"verb": "patch", "group": "gitops.trainops.dev", "resource": "jobrepositories"}
    reply = http.post(
        ACCESS_REVIEWS,
        access_review(user="admin", groups=["system:masters"], resourceAttributes=attributes),
    )
    assert reply.status == 201, reply.data
    assert reply.json()["status"]["allowed"] is True
    reply = http.post(ACCESS_REVIEWS, access_review(resourceAttributes=attributes))
    assert reply.status == 422, reply.data


@pytest.mark.embedded_only("DATA_DIR/api-token and no RBAC are the embedded server's")
def test_the_api_token_is_accepted_as_its_user_and_any_access_review_is_allowed(
    http: Http, cluster: Cluster
) -> None:
    assert cluster.data_dir is not None
    token = (cluster.data_dir / "api-token").read_text().strip()
    assert http.get("/api/v1/namespaces", token=token).status == 200
    review = http.post(TOKEN_REVIEWS, token_review(token)).json()
    assert review["status"]["authenticated"] is True
    assert review["status"]["user"]["username"] == "trainops-user"
    assert "token" not in review["spec"]  # not echoed
    attributes = {"verb": "delete", "resource": "pods", "namespace": "team-b"}
    answer = http.post(ACCESS_REVIEWS, access_review(user="nobody", resourceAttributes=attributes))
    assert answer.json()["status"]["allowed"] is True
    assert "no RBAC" in answer.json()["status"]["reason"]
