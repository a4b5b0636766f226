"""Kubernetes CEL library functions in CRD rules (strings, lists, regex, quantity)."""

from __future__ import annotations

import pytest

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema import crdschema


def info_with_rule(rule: str) -> ResourceInfo:
    schema = {
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": rule, "message": "rule failed"}],
            "properties": {
                "name": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "sizes": {"type": "array", "items": {"type": "integer"}},
                "request": {"x-kubernetes-int-or-string": True},
                "limit": {"x-kubernetes-int-or-string": True},
            },
        }},
    }  # fmt: skip
    return ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True,
        crd={"metadata": {"uid": "u"}}, crd_version={"name": "v1", "schema": {"openAPIV3Schema": schema}},
    )  # fmt: skip


SPEC = {
    "name": "  Web-Server ",
    "tags": ["a", "b", "c"],
    "sizes": [1, 2, 5],
    "request": "500m",
    "limit": "1.5",
}


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param("self.name.trim().lowerAscii() == 'web-server'", id="trim-lower"),
        pytest.param("self.name.upperAscii().contains('WEB')", id="upper"),
        pytest.param("self.name.trim().split('-') == ['Web', 'Server']", id="split"),
        pytest.param("self.tags.join(',') == 'a,b,c'", id="join"),
        pytest.param("self.name.indexOf('Web') == 2 && self.tags.indexOf('b') == 1", id="index-of"),
        pytest.param("self.name.trim().substring(0, 3) == 'Web'", id="substring"),
        pytest.param("self.name.replace('-', '_').contains('Web_Server')", id="replace"),
        pytest.param("self.sizes.isSorted() && self.sizes.sum() == 8", id="sorted-sum"),
        pytest.param("self.sizes.min() == 1 && self.sizes.max() == 5", id="min-max"),
        pytest.param("self.name.find('[A-Z][a-z]+') == 'Web'", id="find"),
        pytest.param("self.name.findAll('[A-Z]') == ['W', 'S']", id="find-all"),
        pytest.param("quantity(self.limit).isGreaterThan(quantity(self.request))",
                     id="quantity-compare"),
        pytest.param("quantity('1Gi').compareTo(quantity('1024Mi')) == 0", id="quantity-binary"),
        pytest.param("quantity('1k') == quantity('1000')", id="quantity-equality"),
        pytest.param("quantity(self.request).add(quantity('500m')).asInteger() == 1",
                     id="quantity-add"),
        pytest.param("isQuantity('2Gi') && !isQuantity('2 Gi')", id="is-quantity"),
    ],
)  # fmt: skip
def test_library_functions_evaluate_like_the_api_server(rule: str) -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": dict(SPEC)}  # fmt: skip
    crdschema.prepare_custom_object(info_with_rule(rule), obj, None, field_validation="Strict")


def test_a_failing_library_rule_is_reported() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
           "spec": {"request": "2", "limit": "1"}}  # fmt: skip
    rule = "quantity(self.limit).isGreaterThan(quantity(self.request))"
    with pytest.raises(ApiError) as err:
        crdschema.prepare_custom_object(info_with_rule(rule), obj, None, field_validation="Strict")
    assert 'spec: Invalid value: "object": rule failed' in err.value.message


def test_optional_old_self_rules_run_on_create_and_update() -> None:
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"name": {"type": "string"}},
        "x-kubernetes-validations": [{
            "rule": "!oldSelf.hasValue() || self.name == oldSelf.value().name",
            "optionalOldSelf": True, "message": "name is immutable"},
            {"rule": "oldSelf.orValue(self).name.startsWith('n')", "optionalOldSelf": True,
             "message": "the first name starts with n"}]}}}  # fmt: skip
    info = ResourceInfo(
        "example.com", "v1", "Widget", "widgets", "widget", True,
        crd={"metadata": {"uid": "u"}}, crd_version={"name": "v1", "schema": {"openAPIV3Schema": schema}},
    )  # fmt: skip

    def obj(name: str) -> dict:
        return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"name": name}}  # fmt: skip

    with pytest.raises(ApiError) as err:
        crdschema.prepare_custom_object(info, obj("x"), None, field_validation="Strict")
    assert "the first name starts with n" in err.value.message, "runs on create"
    created, _ = crdschema.prepare_custom_object(info, obj("n1"), None, field_validation="Strict")
    with pytest.raises(ApiError) as err:
        crdschema.prepare_custom_object(info, obj("n2"), created, field_validation="Strict")
    assert "name is immutable" in err.value.message
