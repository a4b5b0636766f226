"""The generated CRDs: fresh, structural as apiextensions.k8s.io/v1 requires, and installable."""

from __future__ import annotations

import copy
import io
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from gitops.engine import crd as gitops_crd
from policies.schemas import derive, pod_template_spec
from trainops import cli
from trainops.commands import crds

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "crds"
CRDS = {crd["spec"]["names"]["kind"]: crd for crd in crds.build_crds()}

# The keywords of apiextensions.k8s.io/v1 JSONSchemaProps that our schemas may use.
ALLOWED_KEYS = {
    "description",
    "type",
    "format",
    "default",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "required",
    "items",
    "properties",
    "additionalProperties",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
}
TYPES = {"object", "array", "string", "integer", "number", "boolean"}
FORMATS = {"int32", "int64", "float", "double", "byte", "date", "date-time", "uuid"}


def structural_violations(node: dict[str, Any], path: str = "") -> list[str]:
    """What apiextensions' structural-schema validation would say about `node` and below."""
    out = [f"{path}: keyword {k} not allowed" for k in node if k not in ALLOWED_KEYS]
    if node.get("x-kubernetes-int-or-string"):
        if "type" in node:
            out.append(f"{path}: int-or-string node must not have a type")
    elif node.get("type") not in TYPES:
        out.append(f"{path}: every node needs a type, got {node.get('type')!r}")
    if "properties" in node and "additionalProperties" in node:
        out.append(f"{path}: additionalProperties and properties are mutually exclusive")
    if not isinstance(node.get("additionalProperties", {}), dict):
        out.append(f"{path}: additionalProperties must be a schema")
    if "format" in node and node["format"] not in FORMATS:
        out.append(f"{path}: unsupported format {node['format']}")
    if node.get("type") == "object" and not (
        "properties" in node
        or "additionalProperties" in node
        or node.get("x-kubernetes-preserve-unknown-fields")
        or path == ".properties[metadata]"
    ):
        out.append(f"{path}: object without fields would be pruned empty")
    for name in node.get("required", []):
        if name not in node.get("properties", {}):
            out.append(f"{path}: required {name} is not a property")
    if node.get("x-kubernetes-list-type") == "map":
        items = node["items"]
        for key in node.get("x-kubernetes-list-map-keys", []):
            prop = items.get("properties", {}).get(key)
            if prop is None or prop.get("type") not in ("string", "integer", "boolean"):
                out.append(f"{path}: list-map key {key} must be a scalar property")
            elif key not in items.get("required", []) and "default" not in prop:
                out.append(f"{path}: list-map key {key} must be required or defaulted")
    if node.get("x-kubernetes-list-type") == "set" and node["items"].get("type") not in (
        "string",
        "integer",
        "boolean",
        "number",
    ):
        out.append(f"{path}: set items must be scalars")
    if "default" in node and "enum" in node and node["default"] not in node["enum"]:
        out.append(f"{path}: default not in enum")
    for rule in node.get("x-kubernetes-validations", []):
        out.extend(rule_violations(node, rule, path))
    for name, sub in node.get("properties", {}).items():
        out.extend(structural_violations(sub, f"{path}.properties[{name}]"))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out.extend(structural_violations(node[key], f"{path}.{key}"))
    return out


def rule_violations(node: dict[str, Any], rule: dict[str, str], path: str) -> list[str]:
    out = [
        f"{path}: rule keyword {k}"
        for k in rule
        if k not in {"rule", "message", "messageExpression", "reason", "fieldPath"}
    ]
    if rule.get("reason") not in {
        "FieldValueInvalid",
        "FieldValueForbidden",
        "FieldValueRequired",
        "FieldValueDuplicate",
    }:
        # apiextensions accepts only these four reasons.
        out.append(f"{path}: unsupported reason {rule.get('reason')}")
    target = node
    for part in filter(None, rule.get("fieldPath", "").split(".")):
        target = target.get("properties", {}).get(part, {})
        if not target:
            out.append(f"{path}: fieldPath {rule['fieldPath']} names no field")
            break
    for key in ("rule", "messageExpression"):
        if key not in rule:
            continue
        try:
            env = celpy.Environment()
            env.program(env.compile(rule[key]))
        except Exception as e:
            out.append(f"{path}: {key} does not compile: {e}")
    return out


@pytest.mark.parametrize("kind", CRDS)
def test_the_crd_schema_is_structural(kind: str) -> None:
    schema = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert structural_violations(schema) == []


@pytest.mark.parametrize("kind", CRDS)
def test_the_root_metadata_is_only_typed_as_object(kind: str) -> None:
    schema = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize("kind", CRDS)
def test_lists_the_rules_iterate_are_bounded(kind: str) -> None:
    spec = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    types = spec["properties"]["replicaSpecs"]["items"]["properties"]["type"]["enum"]
    run_mode = spec["properties"]["runMode"]["properties"]
    for lst in (
        spec["properties"]["replicaSpecs"],
        run_mode["debug"]["properties"]["replicaSpecs"],
        run_mode["pause"]["properties"]["resumeSpecs"],
    ):
        assert lst["maxItems"] == len(types)
        assert lst["items"]["properties"]["type"]["maxLength"] > 0
    resume = run_mode["pause"]["properties"]["resumeSpecs"]["items"]["properties"]
    for name in ("command", "args"):
        assert resume[name]["maxItems"] > 0
        assert resume[name]["items"]["maxLength"] > 0


def test_the_replica_template_embeds_the_derived_pod_schema() -> None:
    schema = copy.deepcopy(
        CRDS["XGBoostTrainingJob"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    )
    template = schema["properties"]["spec"]["properties"]["replicaSpecs"]["items"]["properties"][
        "template"
    ]
    containers = template["properties"]["spec"]["properties"]["containers"]
    assert containers.pop("maxItems") == 64  # the one tightening: bounds the CEL rule's cost
    # ... and that rule itself, on `containers` (cheap there: policies/cel.py _main_container)
    (rule,) = containers.pop("x-kubernetes-validations")
    assert "xgboost" in rule["rule"]
    assert template["properties"] == pod_template_spec()["properties"]
    container = containers["items"]
    assert container["properties"]["resources"]["properties"]["limits"]["additionalProperties"] == {
        "x-kubernetes-int-or-string": True
    }
    assert container["properties"]["ports"]["items"]["properties"]["protocol"]["default"] == "TCP"


@pytest.mark.parametrize(
    ("kind", "short"), [("TensorFlowTrainingJob", "tfj"), ("XGBoostTrainingJob", "xgbj")]
)
def test_names_subresources_and_printer_columns(kind: str, short: str) -> None:
    spec = CRDS[kind]["spec"]
    assert CRDS[kind]["metadata"]["name"] == f"{kind.lower()}s.batch.tensorstack.dev"
    assert spec["names"]["shortNames"] == [short]
    assert spec["names"]["categories"] == ["all", "t9k", "trainingjobs"]
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1beta1", True, True)
    assert version["subresources"] == {"status": {}}
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Phase", ".status.phase"),
        ("Ready", ".status.readyReplicas"),
        ("Restarts", ".status.backoffCount"),
        ("Progress", ".status.progress.percent"),
        ("ETA", ".status.progress.eta"),
        ("Age", ".metadata.creationTimestamp"),
    ]


@pytest.mark.parametrize("kind", CRDS)
def test_a_crd_fits_in_etcd_but_needs_server_side_apply(kind: str) -> None:
    size = len(crds.render([CRDS[kind]]).encode())
    assert 262_144 < size < 1_500_000


def test_the_committed_crds_are_fresh() -> None:
    for crd in CRDS.values():
        committed = (DEPLOY / crds.file_name(crd)).read_text(encoding="utf-8")
        assert committed == crds.render([crd]), (
            f"deploy/crds/{crds.file_name(crd)} is stale: run `trainops crds --out deploy/crds`"
        )


def test_the_committed_pod_schema_matches_a_fresh_derivation() -> None:
    committed = (ROOT / "policies" / "schemas" / "podtemplatespec.json").read_text(encoding="utf-8")
    assert committed == derive.render(derive.derive_pod_template_spec()), (
        "policies/schemas/podtemplatespec.json is stale: run `python -m policies.schemas.derive`"
    )


def test_derivation_refuses_a_list_map_key_that_is_neither_required_nor_defaulted() -> None:
    defs = dict(derive.load_definitions())
    port = dict(defs["io.k8s.api.core.v1.ContainerPort"])
    port["required"] = []
    defs["io.k8s.api.core.v1.ContainerPort"] = port
    with pytest.raises(derive.DerivationError, match="containerPort"):
        derive.derive_pod_template_spec(defs)


def test_the_command_prints_both_crds_as_multi_document_yaml() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(["crds"]) == 0
    docs = [d for d in yaml.load_all(out.getvalue(), Loader=yaml.CSafeLoader) if d]
    assert [d["spec"]["names"]["kind"] for d in docs] == [
        "TensorFlowTrainingJob",
        "XGBoostTrainingJob",
        "JobRepository",
    ]


def test_the_command_writes_one_file_per_crd(tmp_path: Path) -> None:
    with redirect_stdout(io.StringIO()):
        assert cli.main(["crds", "--out", str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "batch.tensorstack.dev_tensorflowtrainingjobs.yaml",
        "batch.tensorstack.dev_xgboosttrainingjobs.yaml",
        "gitops.trainops.dev_jobrepositories.yaml",
    ]


def iterated_lists(rule: str) -> list[str]:
    """The receivers of `.exists(`/`.all(` macros in a rule, e.g. `self.replicaSpecs`."""
    return re.findall(r"([A-Za-z_][\w.]*)\.(?:exists|all|exists_one|map|filter)\(", rule)


def resolve(
    node: dict[str, Any], expression: str, variables: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    root, *fields = expression.split(".")
    target = variables[root]
    for name in fields:
        target = target["properties"][name]
    return target


def rules_with_nodes(schema: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    found = [(schema, r["rule"]) for r in schema.get("x-kubernetes-validations", [])]
    for sub in schema.get("properties", {}).values():
        found.extend(rules_with_nodes(sub))
    if "items" in schema:
        found.extend(rules_with_nodes(schema["items"]))
    return found


@pytest.mark.parametrize("kind", CRDS)
def test_every_list_a_rule_iterates_is_bounded_for_the_cost_estimator(kind: str) -> None:
    schema = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    checked = 0
    for node, rule in rules_with_nodes(schema):
        variables = {"self": node, "oldSelf": node}
        for receiver in iterated_lists(rule):
            lst = resolve(node, receiver, variables)
            assert lst["type"] == "array" and lst.get("maxItems"), (rule, receiver)
            # macro variables (`r`, `d`, `c`) range over the items of the list
            for var in re.findall(rf"{re.escape(receiver)}\.\w+\((\w+),", rule):
                variables[var] = lst["items"]
            checked += 1
        for left, right in re.findall(r"(\w+\.type) == (\w+\.type)", rule):
            for side in (left, right):
                assert resolve(node, side, variables).get("maxLength"), (rule, side)
    assert checked >= 4


JOBREPO = gitops_crd.build_crd()
JOBREPO_SCHEMA = JOBREPO["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_the_jobrepository_crd_is_structural_and_committed_fresh() -> None:
    assert structural_violations(JOBREPO_SCHEMA) == []
    committed = (DEPLOY / crds.file_name(JOBREPO)).read_text(encoding="utf-8")
    assert committed == crds.render([JOBREPO]), "stale: run `trainops crds --out deploy/crds`"


def test_the_jobrepository_crd_names_columns_and_status_subresource() -> None:
    version = JOBREPO["spec"]["versions"][0]
    assert JOBREPO["metadata"]["name"] == "jobrepositories.gitops.trainops.dev"
    assert JOBREPO["spec"]["names"]["shortNames"] == ["jobrepo"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Sync", ".status.sync.status"),
        ("Health", ".status.health.status"),
        ("Revision", ".status.sync.shortRevision"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_the_jobrepository_spec_requires_a_url_and_defaults_the_rest() -> None:
    spec = JOBREPO_SCHEMA["properties"]["spec"]
    assert spec["required"] == ["repoURL"]
    props = spec["properties"]
    assert (props["path"]["default"], props["recurse"]["default"]) == (".", True)
    assert props["interval"]["default"] == "3m"


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("30s", True),
        ("3m", True),
        ("1h30m", True),
        ("500ms", True),
        ("3", False),
        ("-1m", False),
        ("1d", False),
    ],
)
def test_the_interval_pattern_accepts_go_durations(text: str, ok: bool) -> None:
    pattern = JOBREPO_SCHEMA["properties"]["spec"]["properties"]["interval"]["pattern"]
    assert bool(re.fullmatch(pattern, text)) is ok


def _int32_nodes(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        if node.get("type") == "integer" and node.get("format") == "int32":
            found.append((path, node))
        for key, value in node.items():
            found.extend(_int32_nodes(value, f"{path}.{key}"))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found.extend(_int32_nodes(value, f"{path}[{i}]"))
    return found


@pytest.mark.parametrize("kind", ["TensorFlowTrainingJob", "XGBoostTrainingJob"])
def test_the_job_fields_trainops_declares_int32_carry_a_maximum(kind: str) -> None:
    """kube-apiserver does not enforce `format: int32` on custom resources (v1.32.13 stored
    `replicas: 2147483648`); the schema's maximum makes it refuse what the controller can't run."""
    schema = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    replica = schema["properties"]["spec"]["properties"]
    specs = replica["replicaSpecs"]
    assert specs["items"]["properties"]["replicas"]["maximum"] == 2**31 - 1
    ours = [(p, n) for p, n in _int32_nodes(schema["properties"]["status"]) if "maximum" not in n]
    assert ours == []
