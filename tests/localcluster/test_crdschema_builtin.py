"""Built-in kinds: unknown fields and JSON type errors; CRDs the real server would refuse."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from localcluster.api.types import ApiError, ResourceInfo
from localcluster.schema import crdschema

DEPLOYMENT = ResourceInfo("apps", "v1", "Deployment", "deployments", "deployment", True)
CRD_INFO = ResourceInfo(
    "apiextensions.k8s.io", "v1", "CustomResourceDefinition",
    "customresourcedefinitions", "customresourcedefinition", False,
)  # fmt: skip
REPO = Path(__file__).resolve().parents[2]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def deployment() -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"a": "b"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "x", "ports": [
                    {"containerPort": 80}], "resources": {"limits": {"cpu": 1}}}]},
            },
        },
    }  # fmt: skip


def test_a_valid_built_in_object_passes_in_strict_mode() -> None:
    assert crdschema.validate_builtin(DEPLOYMENT, deployment(), field_validation="Strict") == []


def test_unknown_built_in_fields_are_warnings_or_a_strict_bad_request() -> None:
    obj = deployment()
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    warned = copy.deepcopy(obj)
    warnings = crdschema.validate_builtin(DEPLOYMENT, warned, field_validation="Warn")
    assert warnings == ['unknown field "spec.template.spec.containers[0].imagePullPolicyy"']
    assert warned == deployment(), "unknown fields are dropped, as a Go decoder drops them"
    assert (
        crdschema.validate_builtin(DEPLOYMENT, copy.deepcopy(obj), field_validation="Ignore") == []
    )
    with pytest.raises(ApiError) as err:
        crdschema.validate_builtin(DEPLOYMENT, obj, field_validation="Strict")
    assert (err.value.code, err.value.message) == (
        400,
        'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
        'unknown field "spec.template.spec.containers[0].imagePullPolicyy"',
    )


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(lambda o: o["spec"].update(replicas="3"),
                     "json: cannot unmarshal string into Go struct field DeploymentSpec"
                     ".spec.replicas of type int32", id="string-for-int"),
        pytest.param(lambda o: o["metadata"].update(labels=["a"]),
                     "json: cannot unmarshal array into Go struct field ObjectMeta"
                     ".metadata.labels of type map[string]string", id="array-for-map"),
        pytest.param(lambda o: o["spec"].update(replicas=True),
                     "json: cannot unmarshal bool into Go struct field DeploymentSpec"
                     ".spec.replicas of type int32", id="bool-for-int"),
        pytest.param(lambda o: o["spec"].update(paused=1),
                     "json: cannot unmarshal number into Go struct field DeploymentSpec"
                     ".spec.paused of type bool", id="number-for-bool"),
        pytest.param(lambda o: o["spec"].update(replicas=1.5),
                     "json: cannot unmarshal number into Go struct field DeploymentSpec"
                     ".spec.replicas of type int32", id="float-for-int"),
    ],
)  # fmt: skip
def test_json_type_errors_are_bad_requests_in_every_mode(mutate, message: str) -> None:
    obj = deployment()
    mutate(obj)
    with pytest.raises(ApiError) as err:
        crdschema.validate_builtin(DEPLOYMENT, obj, field_validation="Ignore")
    assert err.value.code == 400
    assert err.value.message.endswith(message)


def shipped_crds() -> list[dict]:
    return [
        doc
        for path in sorted((REPO / "deploy" / "crds").glob("*.yaml"))
        for doc in yaml.load_all(path.read_text(), Loader=LOADER)
        if doc
    ]


def test_shipped_crds_are_accepted_as_crds_and_as_objects() -> None:
    crds = shipped_crds()
    assert crds, "deploy/crds holds the project's CRDs"
    for crd in crds:
        crdschema.validate_crd(crd)
        assert crdschema.validate_builtin(CRD_INFO, crd, field_validation="Strict") == []


def minimal_crd(**schema_spec: object) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object", "properties": schema_spec}}}}}],
        },
    }  # fmt: skip


BASE = "spec.versions[0].schema.openAPIV3Schema.properties[spec]"


def with_column(column: dict) -> dict:
    crd = minimal_crd()
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = [column]
    return crd


@pytest.mark.parametrize(
    ("crd", "fragment"),
    [
        pytest.param(minimal_crd(a={"description": "no type"}),
                     f"{BASE}.properties[a].type: Required value: must not be empty for "
                     "specified object fields", id="missing-type"),
        pytest.param(minimal_crd(a={"type": "array", "x-kubernetes-list-type": "map",
                                    "items": {"type": "object", "properties": {
                                        "k": {"type": "string"}}}}),
                     "x-kubernetes-list-map-keys: Required value", id="map-list-without-keys"),
        pytest.param(minimal_crd(a={"type": "string",
                                    "x-kubernetes-validations": [{"rule": "self.("}]}),
                     f"{BASE}.properties[a].x-kubernetes-validations[0].rule: Invalid value: "
                     '"self.(": compilation failed', id="cel-does-not-compile"),
        pytest.param(minimal_crd(tags={"type": "array", "items": {
                         "type": "object", "properties": {"a": {"type": "string"}},
                         "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a"}]}}),
                     "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                     "spec.tags", id="transition-rule-under-atomic-list"),
        pytest.param(minimal_crd(a={"type": "object", "properties": {"b": {"type": "string"}},
                                    "x-kubernetes-validations": [
                                        {"rule": "true", "fieldPath": ".c"}]}),
                     f'{BASE}.properties[a].x-kubernetes-validations[0].fieldPath: Invalid '
                     'value: ".c": fieldPath must be a valid path', id="field-path"),
        pytest.param(minimal_crd(a={"type": "string", "x-kubernetes-validations": [
                         {"rule": "true", "reason": "Nope"}]}),
                     'reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate"',
                     id="rule-reason"),
        pytest.param(minimal_crd(a={"type": "string", "x-kubernetes-validations": [
                         {"rule": "true", "messageExpression": "'x' +"}]}),
                     "messageExpression compilation failed", id="message-expression"),
        pytest.param(with_column({"name": "Size", "type": "int", "jsonPath": ".spec.size"}),
                     'spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: '
                     '"int"', id="printer-column-type"),
        pytest.param(with_column({"name": "Size", "type": "integer", "jsonPath": "spec.size"}),
                     'additionalPrinterColumns[0].jsonPath: Invalid value: "spec.size": must be '
                     "a simple json path starting with .", id="printer-column-path"),
        pytest.param({**minimal_crd(), "metadata": {"name": "wrong"}},
                     'metadata.name: Invalid value: "wrong": must be spec.names.plural+"."'
                     "+spec.group", id="name-mismatch"),
    ],
)  # fmt: skip
def test_crds_the_real_server_refuses_are_422(crd: dict, fragment: str) -> None:
    with pytest.raises(ApiError) as err:
        crdschema.validate_crd(copy.deepcopy(crd))
    assert err.value.code == 422
    assert err.value.message.startswith(
        f'CustomResourceDefinition.apiextensions.k8s.io "{crd["metadata"]["name"]}" is invalid: '
    )
    assert fragment in err.value.message


def test_crd_rules_calling_unknown_functions_are_refused_like_the_type_checker_does() -> None:
    crd = minimal_crd(a={"type": "string", "x-kubernetes-validations": [
        {"rule": "self.lowerAscii() == self"}, {"rule": "self.shout() == self"}]})  # fmt: skip
    with pytest.raises(ApiError) as err:
        crdschema.validate_crd(crd)
    assert err.value.message.endswith(
        f"{BASE}.properties[a].x-kubernetes-validations[1].rule: Invalid value: "
        '"self.shout() == self": compilation failed: ERROR: <input>: undeclared reference to '
        "'shout' (in container '')"
    )
