"""The Deployment controller's plan: pods to create and delete, and the rollout status."""

from __future__ import annotations

import itertools

from localcluster.controllers.deployments import plan_deployment, template_hash

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


def replica_set(h: str, name: str | None = None, replicas: int = 2, revision: str = "1") -> dict:
    return {
        "metadata": {
            "name": name or f"tb-{h}",
            "uid": f"rs-{h}",
            "generation": 1,
            "labels": {"app": "tb", "pod-template-hash": h},
            "annotations": {"deployment.kubernetes.io/revision": revision},
        },
        "spec": {"replicas": replicas},
    }


def test_with_replica_sets_a_new_template_first_gets_its_replica_set() -> None:
    plan = plan_deployment(deploy(), [], now=NOW, suffix=names(), replica_sets=[])
    h = template_hash(TEMPLATE)
    rs = plan.create_replica_set
    assert rs is not None and plan.create == []
    assert rs["metadata"]["name"] == f"tb-{h}"
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    assert rs["spec"]["replicas"] == 2
    assert rs["spec"]["selector"]["matchLabels"]["pod-template-hash"] == h
    assert rs["spec"]["template"]["metadata"]["labels"] == {"app": "tb", "pod-template-hash": h}


def test_with_replica_sets_pods_are_owned_by_the_replica_set_of_their_template() -> None:
    h = template_hash(TEMPLATE)
    plan = plan_deployment(
        deploy(), [], now=NOW, suffix=names(), replica_sets=[replica_set(h, replicas=2)]
    )
    assert [p["metadata"]["name"] for p in plan.create] == [f"tb-{h}-s0", f"tb-{h}-s1"]
    owner = plan.create[0]["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owner] == [
        ("ReplicaSet", f"tb-{h}", f"rs-{h}")
    ]
    (update,) = plan.replica_sets
    assert (update.name, update.replicas, update.status["replicas"]) == (f"tb-{h}", 2, 0)


def test_a_rollout_scales_the_old_replica_set_to_zero_when_the_new_pods_are_ready() -> None:
    new_template = {**TEMPLATE, "spec": {"containers": [{"name": "tb", "image": "tb:2"}]}}
    old_h, new_h = template_hash(TEMPLATE), template_hash(new_template)
    sets = [replica_set(old_h), replica_set(new_h, revision="2")]
    olds = [pod("o1", old_h), pod("o2", old_h)]
    news = [pod("n1", new_h), pod("n2", new_h)]
    plan = plan_deployment(deploy(template=new_template), olds + news, now=NOW, replica_sets=sets)
    assert sorted(plan.delete) == ["o1", "o2"]
    replicas = {u.name: (u.replicas, u.status["readyReplicas"]) for u in plan.replica_sets}
    assert replicas == {f"tb-{old_h}": (0, 2), f"tb-{new_h}": (2, 2)}


def test_a_new_template_after_two_revisions_gets_revision_three() -> None:
    sets = [replica_set("aaa", revision="1"), replica_set("bbb", revision="2")]
    plan = plan_deployment(deploy(), [], now=NOW, replica_sets=sets)
    assert plan.create_replica_set is not None
    assert (
        plan.create_replica_set["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
        == "3"
    )


def test_a_rolled_back_template_hashes_like_the_original() -> None:
    # kubectl rollout undo sends the old ReplicaSet's template without its hash label and with
    # `metadata.creationTimestamp: null`: the same template, so the same ReplicaSet.
    undone = {
        "metadata": {"labels": {"app": "tb"}, "creationTimestamp": None},
        "spec": TEMPLATE["spec"],
    }
    labelled = {
        "metadata": {"labels": {"app": "tb", "pod-template-hash": "x"}},
        **{"spec": TEMPLATE["spec"]},
    }
    assert template_hash(undone) == template_hash(labelled) == template_hash(TEMPLATE)


def test_rolling_back_reuses_the_old_replica_set_as_the_newest_revision() -> None:
    old_template = {**TEMPLATE, "spec": {"containers": [{"name": "tb", "image": "tb:2"}]}}
    h, old_h = template_hash(TEMPLATE), template_hash(old_template)
    sets = [replica_set(h, revision="1", replicas=0), replica_set(old_h, revision="2")]
    plan = plan_deployment(
        deploy(), [pod("o1", old_h), pod("o2", old_h)], now=NOW, replica_sets=sets
    )
    assert plan.create_replica_set is None
    revisions = {u.name: u.revision for u in plan.replica_sets}
    assert revisions == {f"tb-{h}": "3", f"tb-{old_h}": ""}
    assert plan.revision == "3"
