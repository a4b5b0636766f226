"""Custom resources through the schema step: pruning, defaults, OpenAPI keywords, CEL rules."""

from __future__ import annotations

import copy

import pytest

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema import crdschema, structural

SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["replicas"],
            "x-kubernetes-validations": [
                {"rule": "self.replicas <= self.maxReplicas",
                 "message": "replicas must not exceed maxReplicas", "fieldPath": ".replicas"},
                {"rule": "self.mode == oldSelf.mode", "message": "mode is immutable",
                 "reason": "FieldValueForbidden"},
            ],
            "properties": {
                "replicas": {"type": "integer", "minimum": 1},
                "maxReplicas": {"type": "integer", "default": 4},
                "shards": {"type": "integer", "format": "int32"},
                "mode": {"type": "string", "enum": ["fast", "slow"], "default": "fast"},
                "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": True},
                "when": {"type": "string", "format": "date-time"},
                "note": {"type": "string", "nullable": True},
                "tags": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set",
                         "items": {"type": "string"}},
                "workers": {
                    "type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "items": {"type": "object", "required": ["type"], "properties": {
                        "type": {"type": "string"}, "count": {"type": "integer"}},
                        "x-kubernetes-validations": [
                            {"rule": "self.count == oldSelf.count",
                             "messageExpression": "'count of ' + self.type + ' is immutable'"}]},
                },
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}  # fmt: skip
CRD = {"metadata": {"name": "widgets.example.com", "uid": "u", "resourceVersion": "1"}}
WIDGET = ResourceInfo(
    "example.com", "v1", "Widget", "widgets", "widget", True,
    crd=CRD, crd_version={"name": "v1", "schema": {"openAPIV3Schema": SCHEMA}},
)  # fmt: skip


def widget(**spec: object) -> dict:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"replicas": 1, **spec},
    }


def prepare(obj: dict, old: dict | None = None, mode: str = "Strict") -> tuple[dict, list[str]]:
    return crdschema.prepare_custom_object(WIDGET, obj, old, field_validation=mode)


def causes(obj: dict, old: dict | None = None) -> list[tuple[str, str, str]]:
    with pytest.raises(ApiError) as err:
        prepare(obj, old)
    assert (err.value.code, err.value.reason) == (422, "Invalid")
    assert err.value.details is not None
    assert (err.value.details["kind"], err.value.details["group"]) == ("Widget", "example.com")
    return [(c["reason"], c["field"], c["message"]) for c in err.value.details["causes"]]


def test_defaults_are_applied_and_the_input_is_not_mutated() -> None:
    obj = widget()
    result, warnings = prepare(obj)
    assert result["spec"] == {"replicas": 1, "maxReplicas": 4, "mode": "fast"}
    assert warnings == []
    assert obj["spec"] == {"replicas": 1}


@pytest.mark.parametrize(
    ("mode", "warnings"),
    [
        pytest.param("Warn", ['unknown field "spec.foo"', 'unknown field "metadata.bogus"'],
                     id="warn"),
        pytest.param("Ignore", [], id="ignore"),
        pytest.param("", ['unknown field "spec.foo"', 'unknown field "metadata.bogus"'],
                     id="default-is-warn"),
    ],
)  # fmt: skip
def test_unknown_fields_are_pruned_and_reported_per_field_validation(
    mode: str, warnings: list[str]
) -> None:
    obj = widget(foo=1, extra={"anything": {"goes": True}})
    obj["metadata"]["bogus"] = 1
    result, got = prepare(obj, mode=mode)
    assert "foo" not in result["spec"] and "bogus" not in result["metadata"]
    assert result["spec"]["extra"] == {"anything": {"goes": True}}, "preserve-unknown-fields"
    assert sorted(got) == sorted(warnings)


def test_strict_rejects_unknown_fields_with_the_decoder_message() -> None:
    with pytest.raises(ApiError) as err:
        prepare(widget(foo=1, labels={"a": "b"}))
    assert (err.value.code, err.value.reason) == (400, "BadRequest")
    assert err.value.message == (
        'Widget in version "v1" cannot be handled as a Widget: '
        'strict decoding error: unknown field "spec.foo"'
    )


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({"replicas": "two"}, ("FieldValueTypeInvalid", "spec.replicas",
            'Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
            id="type"),
        pytest.param({"replicas": 0}, ("FieldValueInvalid", "spec.replicas",
            "Invalid value: 0: spec.replicas in body should be greater than or equal to 1"),
            id="minimum"),
        # kube-apiserver v1.32 does not enforce `format: int32` on custom resources (2**31 is
        # stored); an integer beyond int64 is decoded as a float, and refused as "number".
        pytest.param({"replicas": 1e23}, ("FieldValueTypeInvalid", "spec.replicas",
            'Invalid value: "number": spec.replicas in body must be of type integer: "number"'),
            id="beyond-int64"),
        pytest.param({"mode": "warp"}, ("FieldValueNotSupported", "spec.mode",
            'Unsupported value: "warp": supported values: "fast", "slow"'), id="enum"),
        pytest.param({"name": "abcdef"}, ("FieldValueTooLong", "spec.name",
            "Too long: may not be more than 5 bytes"), id="max-length"),
        pytest.param({"name": "AB"}, ("FieldValueInvalid", "spec.name",
            "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"), id="pattern"),
        pytest.param({"when": "yesterday"}, ("FieldValueInvalid", "spec.when",
            'Invalid value: "yesterday": spec.when in body must be of type date-time: '
            '"yesterday"'), id="format"),
        pytest.param({"port": True}, ("FieldValueTypeInvalid", "spec.port",
            'Invalid value: "boolean": spec.port in body must be of type integer,string: '
            '"boolean"'), id="int-or-string"),
        pytest.param({"tags": ["a", "b", "c"]}, ("FieldValueTooMany", "spec.tags",
            "Too many: 3: must have at most 2 items"), id="max-items"),
        pytest.param({"tags": ["a", "a"]}, ("FieldValueDuplicate", "spec.tags[1]",
            'Duplicate value: "a"'), id="set-duplicate"),
        pytest.param({"workers": [{"type": "x"}, {"type": "x"}]}, ("FieldValueDuplicate",
            "spec.workers[1]", 'Duplicate value: map[string]interface {}{"type":"x"}'),
            id="map-list-duplicate"),
        pytest.param({"labels": {"a": 1}}, ("FieldValueTypeInvalid", "spec.labels.a",
            'Invalid value: "integer": spec.labels.a in body must be of type string: '
            '"integer"'), id="map-value"),  # kube-openapi joins a map key with a dot
        pytest.param({"replicas": 9}, ("FieldValueInvalid", "spec.replicas",
            'Invalid value: "object": replicas must not exceed maxReplicas'), id="cel-rule"),
    ],
)  # fmt: skip
def test_schema_and_cel_violations_are_422_with_a_cause_per_field(
    spec: dict, expected: tuple[str, str, str]
) -> None:
    assert expected in causes(widget(**spec))


def test_a_number_beyond_its_format_is_still_checked_against_its_bounds() -> None:
    # As kube-apiserver v1.32.13 answers `replicas: 5e19` with `maximum: 2147483647`: the type
    # error, then the bound as Go prints a float64.
    found = causes(widget(replicas=-1e23))
    assert found[:2] == [
        ("FieldValueTypeInvalid", "spec.replicas",
         'Invalid value: "number": spec.replicas in body must be of type integer: "number"'),
        ("FieldValueInvalid", "spec.replicas",
         "Invalid value: -1e+23: spec.replicas in body should be greater than or equal to 1"),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("value", "shown"),
    [(1.0, "1"), (2147483647.0, "2.147483647e+09"), (100000.0, "100000"), (1e6, "1e+06"),
     (0.5, "0.5"), (0.0001, "0.0001"), (0.00001, "1e-05"), (-2.5e-7, "-2.5e-07"), (0.0, "0")],
)  # fmt: skip
def test_bounds_of_a_float_are_printed_as_go_prints_a_float64(value: float, shown: str) -> None:
    assert structural._go_float(value) == shown


def test_integers_at_the_edge_of_their_format_are_accepted() -> None:
    for shards in (2**31 - 1, -(2**31)):
        result, _ = prepare(widget(shards=shards, maxReplicas=2**63 - 1))
        assert result["spec"]["shards"] == shards


def test_required_fields_and_the_aggregate_message() -> None:
    """Required members come after the object's property errors, as kube-openapi checks
    them (seen on kube-apiserver v1.32.13)."""
    obj = widget(mode="warp")
    del obj["spec"]["replicas"]
    with pytest.raises(ApiError) as err:
        prepare(obj)
    assert err.value.message == (
        'Widget.example.com "w" is invalid: ['
        'spec.mode: Unsupported value: "warp": supported values: "fast", "slow", '
        "spec.replicas: Required value, "
        '<nil>: Invalid value: "null": some validation rules were not checked because the '
        "object was invalid; correct the existing errors to complete validation]"
    )


def test_nulls_in_non_nullable_fields_are_dropped_and_kept_where_nullable() -> None:
    result, _ = prepare(widget(name=None, note=None))
    assert "name" not in result["spec"]
    assert result["spec"]["note"] is None


def test_type_errors_block_cel_rules_as_on_a_real_server() -> None:
    got = causes(widget(replicas="9"))
    assert ("FieldValueInvalid", "<nil>") in [(r, f) for r, f, _ in got]
    assert all("maxReplicas" not in m for _, _, m in got)


def test_transition_rules_run_only_on_update_against_the_correlated_old_node() -> None:
    old, _ = prepare(widget(mode="slow", workers=[{"type": "a", "count": 1}]))
    changed = copy.deepcopy(old)
    changed["spec"]["mode"] = "fast"
    changed["spec"]["workers"] = [{"type": "a", "count": 2}, {"type": "b", "count": 5}]
    got = causes(changed, old)
    assert ("FieldValueForbidden", "spec", "Forbidden: mode is immutable") in got
    assert ("FieldValueInvalid", "spec.workers[0]",
            'Invalid value: "object": count of a is immutable') in got  # fmt: skip
    assert not [f for _, f, _ in got if f == "spec.workers[1]"], "new items have no oldSelf"


def test_cel_evaluation_errors_fail_the_rule() -> None:
    info = ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True, crd=CRD,
        crd_version={"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object", "properties": {"spec": {
                "type": "object", "x-kubernetes-validations": [{"rule": "self.missing > 1"}],
                "properties": {"a": {"type": "integer"}}}}}}},
    )  # fmt: skip
    with pytest.raises(ApiError) as err:
        obj = widget(a=1)
        del obj["spec"]["replicas"]
        crdschema.prepare_custom_object(info, obj, None, field_validation="Strict")
    assert 'spec: Invalid value: "object": no such key: missing' in err.value.message


def test_duplicate_fields_are_found_in_the_raw_body() -> None:
    body = b'{"metadata": {"name": "a", "name": "b"}, "spec": [{"x": 1, "x": 2}]}'
    assert crdschema.find_duplicate_fields(body) == ["metadata.name", "spec[0].x"]
    with pytest.raises(ApiError) as err:
        crdschema.prepare_custom_object(
            WIDGET, widget(), None, field_validation="Strict", duplicates=["metadata.name"]
        )
    assert 'strict decoding error: duplicate field "metadata.name"' in err.value.message


def test_bad_field_validation_value_is_a_bad_request() -> None:
    with pytest.raises(ApiError) as err:
        prepare(widget(), mode="Loose")
    assert err.value.code == 400


def test_updates_ratchet_errors_on_unchanged_fields_but_not_on_changed_ones() -> None:
    # Stored before the schema was tightened: replicas 0 breaks `minimum: 1` and the CEL rule
    # on spec (replicas <= maxReplicas) is fine; name breaks the pattern.
    stored = widget(replicas=0, name="AB", mode="fast", maxReplicas=4)
    status_only = copy.deepcopy(stored)
    status_only["status"] = {"phase": "Running"}
    result, _ = prepare(status_only, stored)
    assert result["status"] == {"phase": "Running"}
    renamed = copy.deepcopy(stored)
    renamed["spec"]["name"] = "CD"
    got = causes(renamed, stored)
    assert [f for _, f, _ in got] == ["spec.name"], "only the changed field is reported"


def test_transition_rules_are_never_ratcheted() -> None:
    stored, _ = prepare(widget(mode="slow"))
    changed = copy.deepcopy(stored)
    changed["spec"]["mode"] = "fast"
    changed["spec"]["replicas"] = 1
    assert ("FieldValueForbidden", "spec", "Forbidden: mode is immutable") in causes(
        changed, stored
    )
