"""The real kubectl against the embedded server: what depends on OpenAPI, server-side printing,
patch semantics, server-side apply ownership, CRD schemas and CEL.

(Skipped, with the reason, only when kubectl is not installed.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid

import pytest

from tests.support.cluster import Cluster

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl binary not installed")

GROUP = "fidelity.example.com"
WIDGET_CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.{GROUP}}}
spec:
  group: {GROUP}
  scope: Namespaced
  names: {{kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Size, type: integer, jsonPath: .spec.size}}
    - {{name: Color, type: string, jsonPath: .spec.color}}
    - {{name: Age, type: date, jsonPath: .metadata.creationTimestamp}}
    - {{name: Note, type: string, jsonPath: .spec.note, priority: 1}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [size]
            x-kubernetes-validations:
            - rule: self.size <= self.maxSize
              message: size must not exceed maxSize
              fieldPath: .size
            properties:
              size: {{type: integer, minimum: 1}}
              maxSize: {{type: integer, default: 10}}
              color: {{type: string, default: blue, enum: [blue, red]}}
              note: {{type: string}}
          status:
            type: object
            properties:
              phase: {{type: string}}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers:
  - name: main
    image: busybox
    {extra}
"""

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - {{name: main, image: nginx}}
"""


def kubectl(
    cluster: Cluster, namespace: str, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("-n", namespace, *args, stdin=stdin, check=check)


def widget(name: str, **spec: object) -> str:
    return json.dumps(
        {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
    )


@pytest.fixture(scope="module")
def widgets(cluster: Cluster) -> str:
    """The Widget CRD, installed once for this module."""
    kubectl(cluster, "default", "apply", "-f", "-", stdin=WIDGET_CRD)
    kubectl(cluster, "default", "wait", "--for=condition=Established",
            f"crd/widgets.{GROUP}", "--timeout=20s")  # fmt: skip
    return f"widgets.{GROUP}"


def header(table: str) -> list[str]:
    return re.split(r"\s{2,}", table.splitlines()[0].strip())


# --------------------------------------------------------------------------- validation


def test_unknown_fields_are_rejected_by_the_server_with_kubectls_default_validation(
    cluster: Cluster, namespace: str
) -> None:
    out = kubectl(cluster, namespace, "apply", "-f", "-", check=False,
                  stdin=POD.format(name="typo", extra="imagePullPolicyy: Always"))  # fmt: skip
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" cannot '
        "be handled as a Pod: strict decoding error: unknown field "
        '"spec.containers[0].imagePullPolicyy"'
    )


def test_validate_warn_creates_the_object_and_prints_the_servers_warning(
    cluster: Cluster, namespace: str
) -> None:
    out = kubectl(cluster, namespace, "create", "--validate=warn", "-f", "-",
                  stdin=POD.format(name="warned", extra="imagePullPolicyy: Always"))  # fmt: skip
    assert 'Warning: unknown field "spec.containers[0].imagePullPolicyy"' in out.stderr
    got = json.loads(kubectl(cluster, namespace, "get", "pod", "warned", "-o", "json").stdout)
    assert "imagePullPolicyy" not in got["spec"]["containers"][0]


def test_custom_resources_get_strict_decoding_defaults_and_cel(
    cluster: Cluster, namespace: str, widgets: str
) -> None:
    unknown = kubectl(cluster, namespace, "create", "-f", "-", check=False,
                      stdin=widget("w0", size=1, sizee=2))  # fmt: skip
    assert unknown.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Widget in version "v1" '
        'cannot be handled as a Widget: strict decoding error: unknown field "spec.sizee"'
    )
    too_big = kubectl(cluster, namespace, "create", "-f", "-", check=False,
                      stdin=widget("w1", size=11))  # fmt: skip
    assert too_big.returncode == 1
    assert (
        'The Widget "w1" is invalid: spec.size: Invalid value: "object": '
        "size must not exceed maxSize"
    ) in too_big.stderr
    bad_enum = kubectl(cluster, namespace, "create", "-f", "-", check=False,
                       stdin=widget("w2", size=1, color="green"))  # fmt: skip
    assert 'spec.color: Unsupported value: "green": supported values: "blue", "red"' in (
        bad_enum.stderr
    )
    kubectl(cluster, namespace, "create", "-f", "-", stdin=widget("w3", size=3))
    spec = json.loads(kubectl(cluster, namespace, "get", widgets, "w3", "-o", "json").stdout)[
        "spec"
    ]
    assert spec == {"size": 3, "maxSize": 10, "color": "blue"}


# --------------------------------------------------------------------------- printing


def test_get_prints_the_built_in_columns_and_wide_adds_the_priority_ones(
    cluster: Cluster, namespace: str
) -> None:
    kubectl(cluster, namespace, "create", "-f", "-", stdin=POD.format(name="p", extra=""))
    plain = kubectl(cluster, namespace, "get", "pods").stdout
    assert header(plain) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert plain.splitlines()[1].split()[:4] == ["p", "0/1", "Pending", "0"]
    wide = kubectl(cluster, namespace, "get", "pods", "-o", "wide").stdout
    assert header(wide) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                            "NOMINATED NODE", "READINESS GATES"]  # fmt: skip


def test_custom_resources_print_their_additional_printer_columns(
    cluster: Cluster, namespace: str, widgets: str
) -> None:
    kubectl(cluster, namespace, "create", "-f", "-", stdin=widget("small", size=2, note="hi"))
    plain = kubectl(cluster, namespace, "get", widgets).stdout
    assert header(plain) == ["NAME", "SIZE", "COLOR", "AGE"]
    name, size, color, age = plain.splitlines()[1].split()
    assert (name, size, color) == ("small", "2", "blue")
    assert age.endswith("s"), "AGE is an age such as 3s, not a timestamp"
    wide = kubectl(cluster, namespace, "get", widgets, "-o", "wide").stdout
    assert header(wide)[-1] == "NOTE" and wide.splitlines()[1].split()[-1] == "hi"


# --------------------------------------------------------------------------- patching


def test_strategic_merge_patch_merges_containers_by_name_and_merge_patch_replaces(
    cluster: Cluster, namespace: str
) -> None:
    kubectl(cluster, namespace, "apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    sidecar = '{"spec":{"template":{"spec":{"containers":[{"name":"side","image":"busybox"}]}}}}'
    kubectl(cluster, namespace, "patch", "deployment", "web", "--type", "strategic", "-p", sidecar)
    names = kubectl(cluster, namespace, "get", "deployment", "web", "-o",
                    "jsonpath={.spec.template.spec.containers[*].name}").stdout  # fmt: skip
    assert names == "main side"
    kubectl(cluster, namespace, "patch", "deployment", "web", "--type", "merge", "-p", sidecar)
    names = kubectl(cluster, namespace, "get", "deployment", "web", "-o",
                    "jsonpath={.spec.template.spec.containers[*].name}").stdout  # fmt: skip
    assert names == "side"


def test_client_side_apply_removes_fields_dropped_from_the_manifest(
    cluster: Cluster, namespace: str, widgets: str
) -> None:
    kubectl(cluster, namespace, "apply", "-f", "-", stdin=widget("cs", size=2, note="first"))
    kubectl(cluster, namespace, "apply", "-f", "-", stdin=widget("cs", size=4))
    spec = json.loads(kubectl(cluster, namespace, "get", widgets, "cs", "-o", "json").stdout)[
        "spec"
    ]
    assert spec["size"] == 4 and "note" not in spec


def test_server_side_apply_reports_conflicts_and_force_takes_ownership(
    cluster: Cluster, namespace: str
) -> None:
    kubectl(cluster, namespace, "apply", "--server-side", "-f", "-",
            stdin=DEPLOYMENT.format(replicas=2))  # fmt: skip
    kubectl(cluster, namespace, "patch", "deployment", "web", "--type", "merge",
            "-p", '{"spec":{"replicas":5}}')  # fmt: skip
    conflict = kubectl(cluster, namespace, "apply", "--server-side", "-f", "-", check=False,
                       stdin=DEPLOYMENT.format(replicas=3))  # fmt: skip
    assert conflict.returncode == 1
    assert (
        'Apply failed with 1 conflict: conflict with "kubectl-patch" using apps/v1: '
        ".spec.replicas" in conflict.stderr
    )
    kubectl(cluster, namespace, "apply", "--server-side", "--force-conflicts", "-f", "-",
            stdin=DEPLOYMENT.format(replicas=3))  # fmt: skip
    got = json.loads(kubectl(cluster, namespace, "get", "deployment", "web", "-o", "json",
                             "--show-managed-fields").stdout)  # fmt: skip
    assert got["spec"]["replicas"] == 3
    owners = {e["manager"]: e for e in got["metadata"]["managedFields"]}
    assert "f:replicas" in owners["kubectl"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in owners.get("kubectl-patch", {}).get("fieldsV1", {}).get("f:spec", {})


def test_server_side_apply_drops_fields_the_manager_no_longer_applies(
    cluster: Cluster, namespace: str, widgets: str
) -> None:
    name = f"ssa-{uuid.uuid4().hex[:5]}"
    kubectl(cluster, namespace, "apply", "--server-side", "-f", "-",
            stdin=widget(name, size=2, note="x"))  # fmt: skip
    kubectl(cluster, namespace, "apply", "--server-side", "-f", "-", stdin=widget(name, size=2))
    spec = json.loads(kubectl(cluster, namespace, "get", widgets, name, "-o", "json").stdout)[
        "spec"
    ]
    assert "note" not in spec and spec["size"] == 2


def test_explain_reads_the_openapi_v3_documents(cluster: Cluster, namespace: str) -> None:
    out = kubectl(cluster, namespace, "explain", "deployment.spec.replicas").stdout
    assert "replicas" in out and "integer" in out


def test_switching_from_client_side_to_server_side_apply_keeps_ownership(
    cluster: Cluster, namespace: str
) -> None:
    kubectl(cluster, namespace, "apply", "-f", "-", stdin=DEPLOYMENT.format(replicas=1))
    # kubectl upgrades the client-side-apply manager to its server-side one (a JSON patch of
    # managedFields), so changing a field it applied before is not a conflict.
    kubectl(cluster, namespace, "apply", "--server-side", "-f", "-",
            stdin=DEPLOYMENT.format(replicas=4))  # fmt: skip
    got = json.loads(kubectl(cluster, namespace, "get", "deployment", "web", "-o", "json",
                             "--show-managed-fields").stdout)  # fmt: skip
    assert got["spec"]["replicas"] == 4
    owners = {(e["manager"], e["operation"]): e for e in got["metadata"]["managedFields"]}
    assert "f:replicas" in owners[("kubectl", "Apply")]["fieldsV1"]["f:spec"]


def test_every_kubectl_verb_on_a_custom_resource(
    cluster: Cluster, namespace: str, widgets: str
) -> None:
    watch = subprocess.Popen(
        [KUBECTL or "kubectl", "-n", namespace, "get", widgets, "-w", "--output-watch-events",
         "--request-timeout=20s"],
        env=cluster.kubectl_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert kubectl(cluster, namespace, "apply", "-f", "-",
                       stdin=widget("w", size=1)).stdout.strip() == (
            f"widget.{GROUP}/w created"
        )  # fmt: skip
        as_yaml = kubectl(cluster, namespace, "get", widgets, "w", "-o", "yaml").stdout
        assert "size: 1" in as_yaml and "color: blue" in as_yaml
        kubectl(cluster, namespace, "patch", widgets, "w", "--type", "merge",
                "-p", '{"spec":{"size":2}}')  # fmt: skip
        kubectl(cluster, namespace, "patch", widgets, "w", "--type", "json",
                "-p", '[{"op":"replace","path":"/spec/color","value":"red"}]')  # fmt: skip
        strategic = kubectl(cluster, namespace, "patch", widgets, "w", "--type", "strategic",
                            "-p", '{"spec":{"size":3}}', check=False)  # fmt: skip
        assert strategic.stderr.strip() == (
            "error: application/strategic-merge-patch+json is not supported by "
            f"{GROUP}/v1, Kind=Widget: the body of the request was in an unknown format - "
            "accepted media types include: application/json-patch+json, "
            "application/merge-patch+json, application/apply-patch+yaml"
        )
        kubectl(cluster, namespace, "patch", widgets, "w", "--subresource=status",
                "--type", "merge", "-p", '{"status":{"phase":"Ready"}}')  # fmt: skip
        waited = kubectl(cluster, namespace, "wait", "--for=jsonpath={.status.phase}=Ready",
                         f"{widgets}/w", "--timeout=10s")  # fmt: skip
        assert "condition met" in waited.stdout
        kubectl(cluster, namespace, "label", widgets, "w", "tier=gold")
        current = json.loads(kubectl(cluster, namespace, "get", widgets, "w", "-o", "json").stdout)
        assert current["spec"] == {"size": 2, "maxSize": 10, "color": "red"}
        assert current["metadata"]["labels"] == {"tier": "gold"}
        current["spec"]["note"] = "replaced"
        kubectl(cluster, namespace, "replace", "-f", "-", stdin=json.dumps(current))
        shown = kubectl(cluster, namespace, "get", widgets, "-L", "tier", "-o", "wide").stdout
        assert shown.splitlines()[1].split()[-2:] == ["replaced", "gold"]
        assert kubectl(cluster, namespace, "delete", widgets, "w").stdout.strip() == (
            f'widget.{GROUP} "w" deleted'
        )
        assert watch.stdout is not None
        events = []
        for line in watch.stdout:
            events.append(line.split()[:2])
            if events[-1] == ["DELETED", "w"]:
                break
        assert ["ADDED", "w"] in events and ["MODIFIED", "w"] in events
    finally:
        watch.kill()
        watch.wait()


@pytest.mark.skipif(shutil.which("diff") is None, reason="kubectl diff needs the diff binary")
@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_diff_shows_only_the_change_a_dry_run_apply_would_make(
    cluster: Cluster, namespace: str, server_side: bool
) -> None:
    manifest = DEPLOYMENT.replace(
        "{{name: main, image: nginx}}",
        "{{name: main, image: nginx, ports: [{{containerPort: 80}}]}}",
    )
    kubectl(cluster, namespace, "apply", "-f", "-", stdin=manifest.format(replicas=1))
    flags = ["--server-side"] if server_side else []
    same = kubectl(cluster, namespace, "diff", *flags, "-f", "-", check=False,
                   stdin=manifest.format(replicas=1))  # fmt: skip
    assert (same.returncode, same.stdout) == (0, "")
    changed = kubectl(cluster, namespace, "diff", *flags, "-f", "-", check=False,
                      stdin=manifest.format(replicas=4))  # fmt: skip
    assert changed.returncode == 1, changed.stderr
    # (client-side apply also rewrites its last-applied-configuration annotation)
    edits = [
        line for line in changed.stdout.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
        and not line[1:].strip().startswith('{"apiVersion"')
    ]  # fmt: skip
    assert sorted(e[0] + e[1:].strip() for e in edits) == sorted(
        ["-generation: 1", "+generation: 2", "-replicas: 1", "+replicas: 4"]
    ), changed.stdout


SERVICE = """
apiVersion: v1
kind: Service
metadata: {{name: svc}}
spec:
  selector: {{app: web}}
  ports: [{{name: http, port: 80, targetPort: {target}}}]
"""


def test_client_side_apply_computes_its_patch_from_the_openapi_v3_schema_silently(
    cluster: Cluster, namespace: str
) -> None:
    # kubectl prints "warning: error calculating patch from openapi v3 spec" when the
    # document lacks the kind or its patch metadata; a real server never makes it fall back.
    for manifest, before, after in [
        (SERVICE, {"target": 8080}, {"target": 9090}),
        (DEPLOYMENT, {"replicas": 1}, {"replicas": 2}),
    ]:
        kubectl(cluster, namespace, "apply", "-f", "-", stdin=manifest.format(**before))
        updated = kubectl(cluster, namespace, "apply", "-f", "-", stdin=manifest.format(**after))
        assert updated.stdout.strip().endswith("configured")
        assert updated.stderr == ""
    ports = json.loads(kubectl(cluster, namespace, "get", "service", "svc", "-o",
                               "jsonpath={.spec.ports}").stdout)  # fmt: skip
    assert [(p["port"], p["targetPort"]) for p in ports] == [(80, 9090)]
