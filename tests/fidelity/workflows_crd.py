"""Workflows over trainops' own CRDs (installed from `trainops crds`): schema validation, CEL
messages, transition rules, the status subresource, generation, printer columns, explain,
wait on a condition; and the RBAC/policy kinds `deploy/` uses."""

from __future__ import annotations

from tests.fidelity.model import Workflow, kc, patch

__all__ = ["WORKFLOWS"]


def _job(name: str, replicas: str, extra_spec: str = "") -> str:
    """A TensorFlowTrainingJob with `replicas` as the replicaSpecs YAML list body (none at all
    when empty)."""
    specs = f"  replicaSpecs:\n{replicas}" if replicas else ""
    return f"""
apiVersion: batch.tensorstack.dev/v1beta1
kind: TensorFlowTrainingJob
metadata: {{name: {name}}}
spec:
{extra_spec}{specs}"""


def _replica(
    kind: str,
    count: int | None = None,
    *,
    container: str = "tensorflow",
    resources: str = "{}",
    image: str = "tensorflow/tensorflow:2.11.0",
) -> str:
    replicas = "" if count is None else f"    replicas: {count}\n"
    return f"""  - type: {kind}
{replicas}    template:
      spec:
        containers:
        - name: {container}
          image: '{image}'
          command: [python3, train.py]
          resources: {resources}
"""


VALID = _job("mnist", _replica("chief", 1) + _replica("worker", 2))
MAP_ORDER = (
    "kube-apiserver lists the schema errors of sibling fields in Go map order, which changes "
    "from request to request (the embedded server lists them in the object's order)"
)
_BARE = "    template: {spec: {containers: [{name: tensorflow, image: 'x:1'}]}}\n"

WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "crd-validation",
        "invalid TensorFlowTrainingJobs: OpenAPI schema errors and CEL messages",
        (
            kc("create -f -", _job("no-master", _replica("ps", 1))),
            kc("create -f -", _job("two-chiefs", _replica("chief", 2))),
            kc("create -f -", _job("no-main", _replica("worker", 1, container="other"))),
            kc("create -f -", _job("no-image", _replica("worker", 1, image=""))),
            kc("create -f -", _job("bad-type", _replica("boss", 1))),
            kc("create -f -", _job("neg", _replica("worker", -1))),
            kc(
                "create -f -",
                _job("cpu-float", _replica("worker", 1, resources="{requests: {cpu: 0.5}}")),
            ),
            kc(
                "create -f -",
                _job(
                    "over",
                    _replica("worker", 1, resources="{requests: {cpu: '2'}, limits: {cpu: '1'}}"),
                ),
            ),
            kc("create -f -", _job("unknown", _replica("worker", 1), "  nosuch: 1\n")),
            kc(
                "create --validate=warn -f -",
                _job("unknown", _replica("worker", 1), "  nosuch: 1\n"),
            ),
            kc('get tensorflowtrainingjob unknown "-o=jsonpath={.spec.nosuch}|{.metadata.name}"'),
            kc(
                "create -f -",
                _job("dup", _replica("worker", 1) + _replica("worker", 1)),
            ),
            kc(
                "create -f -",
                _job(
                    "many",
                    "".join(
                        _replica(t, 1) for t in ("chief", "worker", "ps", "evaluator", "worker")
                    ),
                ),
            ),
        ),
    ),
    Workflow(
        "crd-cause-order",
        "several errors in one TensorFlowTrainingJob: the order of the causes",
        (
            kc("create -f -", _job("req-after", "  - replicas: -1\n" + _BARE)),
            kc("create -f -", _job("items", "  - replicas: 1\n" + _replica("boss", 1))),
            kc("create -f -", _job("Bad_Name", _replica("boss", 1))),
            kc("create -f -", _job("no-specs", "", "  runPolicy: {backoffLimit: -1}\n")),
            kc("create -f -", _job("cel-too", _replica("chief", 2) + _replica("worker", -1))),
            kc(
                "create -f -",
                _job(
                    "cel-only",
                    _replica("chief", 3, container="x") + _replica("evaluator", 2, image=""),
                ),
            ),
            kc(
                "create -f -",
                _job(
                    "siblings",
                    _replica("chief", 2)
                    + _replica("boss", -1, resources="{requests: {cpu: 0.5, memory: true}}"),
                    "  runPolicy: {cleanUpPolicy: Sometimes, backoffLimit: -1}\n",
                ),
                unordered=MAP_ORDER,
            ),
        ),
    ),
    Workflow(
        "crd-lifecycle",
        "a valid job: printing, no-op apply, transition rules, status subresource, wait, explain",
        (
            kc("apply -f -", VALID),
            kc("get tensorflowtrainingjobs"),
            kc("get tensorflowtrainingjob mnist -o wide"),
            kc("get tensorflowtrainingjob mnist -o jsonpath={.metadata.generation}"),
            kc("apply -f -", VALID),
            kc("apply --server-side --force-conflicts -f -", VALID),
            kc("get tensorflowtrainingjob mnist -o jsonpath={.metadata.generation}"),
            kc("apply -f -", VALID.replace("replicas: 2", "replicas: 3")),
            kc("apply -f -", VALID.replace("train.py", "train2.py")),
            kc("get tensorflowtrainingjob mnist -o jsonpath={.metadata.generation}"),
            patch(
                "tensorflowtrainingjob mnist --subresource=status --type=merge",
                '{"status":{"phase":"Running","conditions":[{"type":"Running","status":"True",'
                '"lastTransitionTime":"2026-01-01T00:00:00Z","reason":"Started","message":"up"}]}}',
            ),
            kc(
                'get tensorflowtrainingjob mnist "-o=jsonpath={.metadata.generation} {.status.phase}"'
            ),
            kc("wait --for=condition=Running tensorflowtrainingjob/mnist --timeout=10s"),
            kc("wait --for=condition=Succeeded tensorflowtrainingjob/mnist --timeout=2s"),
            patch("tensorflowtrainingjob mnist --type=merge", '{"status":{"phase":"Nope"}}'),
            kc("get tensorflowtrainingjob mnist -o jsonpath={.status.phase}"),
            kc("explain tensorflowtrainingjob.spec.replicaSpecs.replicas"),
            kc("delete tensorflowtrainingjob mnist"),
        ),
    ),
    Workflow(
        "rbac-and-policy",
        "the kinds deploy/ applies besides Deployments: Roles, bindings, PodDisruptionBudgets",
        (
            kc(
                "create -f -",
                """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
""",
            ),
            kc(
                "create -f -",
                """
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
- {kind: ServiceAccount, name: default, namespace: $NS}
""",
            ),
            kc(
                "create -f -",
                """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
""",
            ),
            kc("get roles,rolebindings,poddisruptionbudgets -o name"),
            kc("get role reader -o jsonpath={.rules[0].verbs}"),
            kc("get rolebinding reader -o wide"),
            kc("get pdb web -o jsonpath={.spec.maxUnavailable}"),
            kc(
                "create -f -",
                """
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: broken}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role}
subjects: []
""",
            ),
            kc("delete role reader"),
        ),
    ),
    Workflow(
        "network-policy",
        "the NetworkPolicy deploy/gitops applies: stored, printed, its generation, unknown fields",
        (
            kc(
                "apply --server-side -f -",
                """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: api}
spec:
  podSelector: {matchLabels: {app: api}}
  policyTypes: [Ingress]
  ingress:
  - ports: [{port: http, protocol: TCP}]
""",
            ),
            kc("get networkpolicies -o name"),
            kc("get netpol"),
            kc(
                "apply --server-side -f -",
                """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: all}
spec:
  podSelector:
    matchExpressions: [{key: tier, operator: In, values: [a, b]}]
""",
            ),
            kc("get netpol all -o wide"),
            kc("delete netpol all"),
            kc(
                "get netpol api -o jsonpath={.metadata.generation}/{.spec.ingress[0].ports[0].port}"
            ),
            patch(
                "networkpolicy api --type=merge", '{"spec":{"policyTypes":["Ingress","Egress"]}}'
            ),
            kc("get netpol api -o jsonpath={.metadata.generation}/{.spec.policyTypes}"),
            patch("networkpolicy api --type=merge", '{"metadata":{"labels":{"team":"a"}}}'),
            kc("get netpol api -o jsonpath={.metadata.generation}"),
            kc(
                "apply --server-side -f -",
                """
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: typo}
spec:
  podSelector: {}
  ingres: []
""",
            ),
            kc("delete netpol api"),
        ),
    ),
)
