"""Deployments are rolled out to pods that the kubelet runs."""

from __future__ import annotations

from typing import Any

from tests.kubelet.conftest import eventually


def deployment(image: str, replicas: int) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "tb"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "tb"}},
            "template": {
                "metadata": {"labels": {"app": "tb"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "tb",
                            "image": image,
                            "command": ["sh", "-c", "while true; do sleep 0.1; done"],
                        }
                    ],
                },
            },
        },
    }


def _apps(core: Any) -> Any:
    from kubernetes import client

    return client.AppsV1Api(core.api_client)


def _running(core: Any, ns: str) -> list[Any]:
    return [
        p
        for p in core.list_namespaced_pod(ns, label_selector="app=tb").items
        if p.status.phase == "Running" and not p.metadata.deletion_timestamp
    ]


def test_a_deployment_rolls_out_scales_and_replaces_pods(core, namespace) -> None:
    apps = _apps(core)
    apps.create_namespaced_deployment(namespace, deployment("tb:1", 2))

    def rolled_out() -> bool:
        d = apps.read_namespaced_deployment("tb", namespace)
        s = d.status
        return (
            s.observed_generation == d.metadata.generation
            and s.updated_replicas == 2
            and s.available_replicas == 2
        )

    eventually(rolled_out)
    pods = _running(core, namespace)
    assert len(pods) == 2
    assert all(p.metadata.owner_references[0].kind == "Deployment" for p in pods)
    assert all(p.metadata.name.startswith("tb-") for p in pods)

    apps.patch_namespaced_deployment("tb", namespace, {"spec": {"replicas": 1}})
    eventually(lambda: len(core.list_namespaced_pod(namespace, label_selector="app=tb").items) == 1)

    apps.patch_namespaced_deployment(
        "tb",
        namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "tb", "image": "tb:2"}]}}}},
    )

    def updated() -> bool:
        pods = core.list_namespaced_pod(namespace, label_selector="app=tb").items
        return [p.spec.containers[0].image for p in pods] == ["tb:2"] and rolled_out_one()

    def rolled_out_one() -> bool:
        s = apps.read_namespaced_deployment("tb", namespace).status
        return s.updated_replicas == 1 and s.available_replicas == 1 and s.replicas == 1

    eventually(updated, timeout=20)
