"""A raw HTTPS client for asserting exact status codes, headers and Status bodies."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import urllib3

from tests.support.cluster import Cluster


@dataclass
class Reply:
    status: int
    headers: Any
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.data.splitlines() if line.strip()]


class Http:
    """`Http(cluster).get("/api/v1/namespaces")` → Reply; token sent unless `token=None`."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(cluster.ca_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        token: str | bool | None = True,
        headers: dict[str, str] | None = None,
        timeout: float = 30.0,
    ) -> Reply:
        hdrs = dict(headers or {})
        if token is True:
            hdrs["Authorization"] = f"Bearer {self.cluster.token}"
        elif isinstance(token, str):
            hdrs["Authorization"] = f"Bearer {token}"
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            hdrs["Content-Type"] = content_type
        resp = self.pool.request(
            method, self.cluster.url + path, body=data, headers=hdrs, timeout=timeout, retries=False
        )
        return Reply(resp.status, resp.headers, resp.data)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)

    def put(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.request("PUT", path, body, **kw)

    def patch(
        self, path: str, body: Any, content_type: str = "application/merge-patch+json", **kw: Any
    ) -> Reply:
        return self.request("PATCH", path, body, content_type=content_type, **kw)

    def delete(self, path: str, body: Any = None, **kw: Any) -> Reply:
        return self.request("DELETE", path, body, **kw)


def status_of(reply: Reply) -> dict[str, Any]:
    """The Status body of an error reply, checked to be a well-formed Status."""
    body = reply.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1", body
    assert body["code"] == reply.status, body
    return body
