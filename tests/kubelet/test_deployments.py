"""The Deployment controller's plan: pods to create and delete, and the rollout status."""

from __future__ import annotations

import itertools

from localcluster.kubelet.deployments import plan_deployment, template_hash

NOW = "2026-01-01T00:00:00Z"
TEMPLATE = {
    "metadata": {"labels": {"app": "tb"}},
    "spec": {"containers": [{"name": "tb", "image": "tb"}]},
}


def deploy(
    replicas: int = 2, template: dict | None = None, strategy: str = "RollingUpdate"
) -> dict:
    return {
        "metadata": {"name": "tb", "namespace": "ns", "uid": "d-uid", "generation": 3},
        "spec": {
            "replicas": replicas,
            "template": template or TEMPLATE,
            "strategy": {"type": strategy},
        },
    }


def pod(name: str, h: str, ready: bool = True, phase: str = "Running") -> dict:
    return {
        "metadata": {"name": name, "labels": {"pod-template-hash": h}, "creationTimestamp": NOW},
        "status": {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def names():
    counter = itertools.count()
    return lambda: f"s{next(counter)}"


def test_a_new_deployment_creates_owned_pods_named_like_replica_set_pods() -> None:
    plan = plan_deployment(deploy(), [], now=NOW, suffix=names())
    h = template_hash(TEMPLATE)
    assert [p["metadata"]["name"] for p in plan.create] == [f"tb-{h}-s0", f"tb-{h}-s1"]
    first = plan.create[0]["metadata"]
    assert first["labels"] == {"app": "tb", "pod-template-hash": h}
    assert first["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "tb",
            "uid": "d-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert plan.status["observedGeneration"] == 3
    assert plan.status["unavailableReplicas"] == 2


def test_scaling_down_removes_unready_pods_first() -> None:
    h = template_hash(TEMPLATE)
    pods = [pod("a", h), pod("b", h, ready=False), pod("c", h)]
    plan = plan_deployment(deploy(replicas=2), pods, now=NOW)
    assert (plan.create, plan.delete) == ([], ["b"])


def test_a_template_change_keeps_old_pods_until_new_ones_are_ready() -> None:
    new_template = {**TEMPLATE, "spec": {"containers": [{"name": "tb", "image": "tb:2"}]}}
    old_h, new_h = template_hash(TEMPLATE), template_hash(new_template)
    olds = [pod("o1", old_h), pod("o2", old_h)]
    first = plan_deployment(deploy(template=new_template), olds, now=NOW, suffix=names())
    assert len(first.create) == 2 and first.delete == []
    assert first.status["updatedReplicas"] == 0
    news = [pod("n1", new_h), pod("n2", new_h)]
    second = plan_deployment(deploy(template=new_template), olds + news, now=NOW)
    assert sorted(second.delete) == ["o1", "o2"]


def test_recreate_deletes_old_pods_before_creating() -> None:
    new_template = {**TEMPLATE, "spec": {"containers": [{"name": "tb", "image": "tb:2"}]}}
    plan = plan_deployment(
        deploy(template=new_template, strategy="Recreate"),
        [pod("o1", template_hash(TEMPLATE))],
        now=NOW,
    )
    assert (plan.create, plan.delete) == ([], ["o1"])


def test_a_complete_rollout_reports_what_kubectl_rollout_status_reads() -> None:
    h = template_hash(TEMPLATE)
    plan = plan_deployment(deploy(), [pod("a", h), pod("b", h)], now=NOW)
    assert plan.status["updatedReplicas"] == plan.status["availableReplicas"] == 2
    assert plan.status["replicas"] == plan.status["readyReplicas"] == 2
    conds = {c["type"]: c for c in plan.status["conditions"]}
    assert conds["Available"]["status"] == "True"
    assert conds["Progressing"]["reason"] == "NewReplicaSetAvailable"


def test_ended_pods_are_replaced() -> None:
    h = template_hash(TEMPLATE)
    plan = plan_deployment(
        deploy(replicas=1), [pod("a", h, phase="Failed")], now=NOW, suffix=names()
    )
    assert plan.delete == ["a"] and len(plan.create) == 1
