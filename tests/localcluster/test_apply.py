"""Server-side apply and managedFields: ownership, conflicts, force, removal, update tracking."""

from __future__ import annotations

import copy
import json

import pytest

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.write import fieldsets, patching

DEPLOYMENT = ResourceInfo(
    "apps", "v1", "Deployment", "deployments", "deployment", True, subresources=("status",)
)
WIDGET = ResourceInfo(
    "example.com", "v1", "Widget", "widgets", "widget", True, crd={},
    crd_version={"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer"}}}}}}}}}},
)  # fmt: skip
T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"


def deployment(replicas: int | None = 2, image: str = "busybox", **meta: object) -> dict:
    spec: dict = {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {"containers": [{"name": "a", "image": image}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", **meta},
        "spec": spec,
    }


def owners(obj: dict) -> dict[tuple[str, str], set[str]]:
    return {
        (e["manager"], e["operation"]): {
            fieldsets.path_string(p) for p in fieldsets.decode(e["fieldsV1"])
        }
        for e in obj["metadata"].get("managedFields", [])
    }


def ssa(live: dict | None, applied: dict, manager: str = "kubectl", force: bool = False) -> dict:
    return patching.server_side_apply(
        DEPLOYMENT, live, applied, manager=manager, force=force, now=T2
    )


def test_create_on_apply_records_the_appliers_fields_in_fieldsv1() -> None:
    obj = ssa(None, deployment())
    entry = obj["metadata"]["managedFields"][0]
    assert {k: entry[k] for k in ("manager", "operation", "apiVersion", "time", "fieldsType")} == {
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": T2,
        "fieldsType": "FieldsV1",
    }  # fmt: skip
    assert entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"] == {
        'k:{"name":"a"}': {".": {}, "f:image": {}, "f:name": {}}
    }
    assert entry["fieldsV1"]["f:spec"]["f:selector"] == {}, "LabelSelector is an atomic map"
    assert "f:name" not in entry["fieldsV1"].get("f:metadata", {}), "identity is owned by nobody"


def test_update_owns_what_it_changed_and_takes_it_from_others() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    scaled = copy.deepcopy(created)
    scaled["spec"]["replicas"] = 5
    after = patching.track_update(DEPLOYMENT, created, scaled, manager="scaler", now=T2)
    got = owners(after)
    assert got[("scaler", "Update")] == {".spec.replicas"}
    assert ".spec.replicas" not in got[("kubectl-create", "Update")]
    assert '.spec.template.spec.containers[name="a"].image' in got[("kubectl-create", "Update")]


def test_update_tracking_leaves_its_inputs_untouched() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    scaled = copy.deepcopy(created)
    scaled["spec"]["replicas"] = 5
    before = (copy.deepcopy(created), copy.deepcopy(scaled))
    after = patching.track_update(DEPLOYMENT, created, scaled, manager="scaler", now=T2)
    assert (created, scaled) == before
    assert after["metadata"]["managedFields"] != scaled["metadata"]["managedFields"]


def test_conflict_with_an_update_manager_is_409_with_the_real_message_and_causes() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    with pytest.raises(ApiError) as err:
        ssa(created, deployment(replicas=3))
    assert (err.value.code, err.value.reason) == (409, "Conflict")
    assert err.value.message == (
        'Apply failed with 1 conflict: conflict with "kubectl-create" using apps/v1: .spec.replicas'
    )
    assert err.value.details == {
        "causes": [{"reason": "FieldManagerConflict",
                    "message": 'conflict with "kubectl-create" using apps/v1',
                    "field": ".spec.replicas"}]
    }  # fmt: skip


def test_several_conflicts_are_grouped_by_manager() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    with pytest.raises(ApiError) as err:
        ssa(created, deployment(replicas=3, image="nginx"))
    assert err.value.message == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using apps/v1:\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="a"].image'
    )


def test_applying_the_same_value_shares_ownership_without_conflict() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    obj = ssa(created, deployment())
    got = owners(obj)
    assert ".spec.replicas" in got[("kubectl", "Apply")]
    assert ".spec.replicas" in got[("kubectl-create", "Update")]


def test_force_takes_ownership_away_from_the_other_manager() -> None:
    created = patching.track_update(
        DEPLOYMENT, None, deployment(), manager="kubectl-create", now=T1
    )
    obj = ssa(created, deployment(replicas=7), force=True)
    assert obj["spec"]["replicas"] == 7
    got = owners(obj)
    assert ".spec.replicas" in got[("kubectl", "Apply")]
    assert ".spec.replicas" not in got[("kubectl-create", "Update")]


def test_fields_a_manager_stops_applying_are_removed_unless_someone_else_owns_them() -> None:
    first = ssa(None, deployment(labels={"team": "a", "tier": "web"}))
    shared = ssa(first, {"apiVersion": "apps/v1", "kind": "Deployment",
                         "metadata": {"name": "d", "labels": {"tier": "web"}}}, manager="other")  # fmt: skip
    second = ssa(shared, deployment(replicas=None))
    assert "replicas" not in second["spec"]
    assert second["metadata"]["labels"] == {"tier": "web"}, "team removed, tier kept by other"


def test_removing_list_items_leaves_no_empty_husks() -> None:
    applied = deployment()
    applied["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "X", "value": "1"}]
    first = ssa(None, applied)
    second = ssa(first, deployment())
    assert "env" not in second["spec"]["template"]["spec"]["containers"][0]


def test_apply_to_the_main_endpoint_does_not_own_status() -> None:
    applied = deployment()
    applied["status"] = {"replicas": 1}
    obj = ssa(None, applied)
    assert "f:status" not in obj["metadata"]["managedFields"][0]["fieldsV1"]


def test_custom_resource_lists_merge_by_declared_keys_and_are_otherwise_atomic() -> None:
    def widget(spec: dict) -> dict:
        return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": spec}  # fmt: skip

    live = patching.server_side_apply(
        WIDGET, None, widget({"tags": ["a"], "ports": [{"name": "http", "port": 80}]}),
        manager="one", force=False, now=T1,
    )  # fmt: skip
    merged = patching.server_side_apply(
        WIDGET, live, widget({"ports": [{"name": "grpc", "port": 90}]}),
        manager="two", force=False, now=T2,
    )  # fmt: skip
    assert [p["name"] for p in merged["spec"]["ports"]] == ["http", "grpc"]
    with pytest.raises(ApiError) as err:
        patching.server_side_apply(
            WIDGET, merged, widget({"tags": ["b"]}), manager="two", force=False, now=T2
        )
    assert err.value.message.endswith('conflict with "one": .spec.tags')


@pytest.mark.parametrize(
    ("applied", "manager", "message"),
    [
        pytest.param(deployment(), "", "require fieldManager", id="no-manager"),
        pytest.param({**deployment(), "kind": "Pod"}, "m", "the kind in the data (Pod)",
                     id="wrong-kind"),
    ],
)  # fmt: skip
def test_bad_apply_requests_are_400(applied: dict, manager: str, message: str) -> None:
    with pytest.raises(ApiError) as err:
        ssa(None, applied, manager=manager)
    assert err.value.code == 400
    assert message in err.value.message


def test_fieldsv1_round_trips() -> None:
    obj = ssa(None, deployment(labels={"a": "b"}))
    fields = obj["metadata"]["managedFields"][0]["fieldsV1"]
    assert fieldsets.encode(fieldsets.decode(fields)) == fields


def test_a_no_op_apply_leaves_managed_fields_untouched() -> None:
    first = ssa(None, deployment())
    again = patching.server_side_apply(
        DEPLOYMENT, first, deployment(), manager="kubectl", force=False, now="2027-01-01T00:00:00Z"
    )
    assert again == first


def test_kubectl_may_take_over_fields_it_applied_client_side() -> None:
    last = deployment(replicas=1)
    live = deployment(replicas=1)
    live["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps(last)
    }
    live = patching.track_update(
        DEPLOYMENT, None, live, manager="kubectl-client-side-apply", now=T1
    )
    obj = ssa(live, deployment(replicas=4))
    assert obj["spec"]["replicas"] == 4
    with pytest.raises(ApiError):
        ssa(live, deployment(replicas=4), manager="someone-else")
    drifted = copy.deepcopy(live)
    drifted["spec"]["replicas"] = 2  # changed since the client-side apply: a real conflict
    with pytest.raises(ApiError):
        ssa(drifted, deployment(replicas=4))


@pytest.mark.parametrize(
    ("live", "applied", "expected"),
    [
        pytest.param(["a", "b"], ["c", "a"], ["c", "a", "b"], id="new-item-placed-as-applied"),
        pytest.param(["a", "b", "c"], ["c", "a"], ["b", "c", "a"], id="shared-in-applied-order"),
        pytest.param(["a"], ["a", "b"], ["a", "b"], id="append"),
    ],
)
def test_merged_lists_are_ordered_like_structured_merge_diff(
    live: list[str], applied: list[str], expected: list[str]
) -> None:
    def with_containers(names: list[str]) -> dict:
        obj = deployment()
        obj["spec"]["template"]["spec"]["containers"] = [{"name": n, "image": "x"} for n in names]
        return obj

    first = ssa(None, with_containers(live), manager="other")
    merged = ssa(first, with_containers(applied))
    got = [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]]
    assert got == expected


def test_entries_are_ordered_apply_first_then_by_time_and_manager() -> None:
    obj = patching.track_update(DEPLOYMENT, None, deployment(), manager="zeta", now=T1)
    obj = ssa(obj, {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": "d", "labels": {"x": "y"}}}, manager="alpha")  # fmt: skip
    assert [(e["manager"], e["operation"]) for e in obj["metadata"]["managedFields"]] == [
        ("alpha", "Apply"),
        ("zeta", "Update"),
    ]


def test_port_keys_default_their_protocol_so_omitting_it_matches_the_live_item() -> None:
    applied = deployment()
    applied["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    live = copy.deepcopy(applied)
    live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    live = patching.track_update(DEPLOYMENT, None, live, manager="kubectl-create", now=T1)
    merged = ssa(live, applied)
    assert merged["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}
    ]
    fields = merged["metadata"]["managedFields"][0]["fieldsV1"]
    ports = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"a"}']["f:ports"]
    assert list(ports) == ['k:{"containerPort":80,"protocol":"TCP"}']


def test_a_port_applied_without_protocol_is_removed_when_no_longer_applied() -> None:
    with_port = deployment()
    with_port["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 80}]
    first = ssa(None, with_port)
    first["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"  # defaulted
    second = ssa(first, deployment())
    assert "ports" not in second["spec"]["template"]["spec"]["containers"][0]


def test_nulls_are_owned_by_nobody() -> None:
    obj = deployment()
    obj["spec"]["template"]["metadata"]["creationTimestamp"] = None
    tracked = patching.track_update(DEPLOYMENT, None, obj, manager="kubectl-create", now=T1)
    template = tracked["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:template"]
    assert template["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
