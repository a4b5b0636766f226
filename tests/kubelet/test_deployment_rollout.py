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
    (rs,) = apps.list_namespaced_replica_set(namespace).items
    assert rs.metadata.owner_references[0].kind == "Deployment"
    assert rs.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert all(
        (p.metadata.owner_references[0].kind, p.metadata.owner_references[0].uid)
        == ("ReplicaSet", rs.metadata.uid)
        for p in pods
    )
    assert all(p.metadata.name.startswith(rs.metadata.name + "-") for p in pods)

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

    def replica_sets() -> dict[str, tuple[int, int]]:
        return {
            r.metadata.annotations["deployment.kubernetes.io/revision"]: (
                r.spec.replicas,
                r.status.replicas or 0,
            )
            for r in apps.list_namespaced_replica_set(namespace).items
        }

    # The old ReplicaSet stays, scaled to zero, as the rollout history.
    eventually(lambda: replica_sets() == {"1": (0, 0), "2": (1, 1)})

    # Deleting the Deployment deletes its ReplicaSets and, through them, the pods.
    apps.delete_namespaced_deployment("tb", namespace)
    eventually(lambda: not apps.list_namespaced_replica_set(namespace).items)
    eventually(lambda: not core.list_namespaced_pod(namespace, label_selector="app=tb").items)
