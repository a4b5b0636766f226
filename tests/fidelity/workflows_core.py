"""Workflows over built-in kinds: CRUD and printing, patches, apply (client- and server-side),
selectors, dry-run, field validation, generation, owner references and garbage collection,
Pod validation, explain, wait, raw HTTP and errors."""

from __future__ import annotations

from tests.fidelity.model import Workflow, kc, patch

__all__ = ["WORKFLOWS"]

# Known differences that stay (docs/LOCALCLUSTER-FIDELITY.md lists them with the fixed ones).
NO_DEPLOYMENT_CONTROLLER = (
    "the bare embedded API server runs no Deployment controller (`trainops up` runs one with "
    "the process node): no status and no deployment.kubernetes.io/revision annotation"
)
GO_DECODE = (
    "kube-apiserver quotes the whole patched object (resourceVersion, ReplicaSet hash and all) "
    "in this decoding error; the embedded server gives the decoding error alone"
)
LIST_ITEM_KIND = (
    "kube-apiserver leaves kind and apiVersion out of the items of a built-in kind's list "
    "(the list names them); the embedded server keeps them in every item"
)
POD_ADMISSION = (
    "kube-apiserver's ServiceAccount, DefaultTolerationSeconds and Priority admission plugins "
    "add a token volume, two tolerations and priority fields; the embedded server's pods run "
    "as local processes without service-account credentials"
)
EXPLAIN_SCHEMA = (
    "the embedded OpenAPI comes from kubernetes-validate's JSON schemas, which carry no enum "
    "for fields such as DeploymentStrategy.type (kube-apiserver's own documents do)"
)

CM = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: web, tier: front}
data: {color: blue, size: "3"}
"""
CM_CHANGED = CM.replace("blue", "red")

DEPLOY = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        image: registry.example/web:1
        ports: [{containerPort: 8080, name: http}]
      - name: side
        image: registry.example/side:1
"""
DEPLOY_SCALED = DEPLOY.replace("replicas: 0", "replicas: 2")


def _cm(name: str, labels: str, owner: str = "") -> str:
    meta = f"{{name: {name}, labels: {{{labels}}}{owner}}}"
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {meta}\ndata: {{k: v}}\n"


def _child(name: str, parent: str) -> str:
    owner = (
        ", ownerReferences: [{apiVersion: v1, kind: ConfigMap, "
        f"name: {parent}, uid: '$UID{{configmap/{parent}}}'}}]"
    )
    return _cm(name, "role: child", owner)


def _pod(name: str, resources: str, extra: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  {extra}containers:
  - name: main
    image: registry.example/app:1
    resources: {resources}
"""


ROOT_CA = "configmap kube-root-ca.crt"

WORKFLOWS: tuple[Workflow, ...] = (
    Workflow(
        "root-ca-publisher",
        "kube-root-ca.crt in every namespace: published, recreated when deleted, put back",
        (
            kc("get configmaps"),
            kc(f"get {ROOT_CA} -o yaml --show-managed-fields"),
            kc(f"get {ROOT_CA} -o json"),
            kc(f"delete {ROOT_CA}"),
            kc(f"get {ROOT_CA} -o name", until="configmap/kube-root-ca.crt"),
            patch(
                f"{ROOT_CA} --type=merge",
                '{"data":{"ca.crt":"tampered","extra":"x"},"metadata":{"labels":{"kept":"yes"},'
                '"annotations":{"kubernetes.io/description":null}}}',
            ),
            kc(f"get {ROOT_CA} -o jsonpath={{.data}}", until="BEGIN CERTIFICATE"),
            kc(f"get {ROOT_CA} -o yaml --show-managed-fields"),
            kc(f"get {ROOT_CA} --show-labels"),
            kc(f"label {ROOT_CA} kept-"),
            kc(f"get {ROOT_CA} -o yaml --show-managed-fields"),
        ),
    ),
    Workflow(
        "configmap-crud",
        "create, every get output format, replace, delete, get after delete",
        (
            kc("create -f -", CM),
            kc("get configmap settings -o yaml"),
            kc("get configmap settings -o json"),
            kc("get configmap settings -o name"),
            kc("get configmap settings"),
            kc("get configmap settings -o wide"),
            kc("get configmaps -l app --show-labels"),
            kc("get configmap settings -o custom-columns=NAME:.metadata.name,COLOR:.data.color"),
            kc("get configmap settings -o jsonpath={.data.color}"),
            kc("replace -f -", CM_CHANGED),
            kc("get configmap settings -o jsonpath={.data.color}"),
            kc("delete configmap settings"),
            kc("get configmap settings"),
            kc("get configmaps -l app"),
            kc("get configmaps"),
        ),
    ),
    Workflow(
        "errors",
        "exit codes and stderr of the usual mistakes",
        (
            kc("create -f -", CM),
            kc("create -f -", CM),
            kc("create configmap Bad_Name --from-literal=a=b"),
            kc("get nosuchkind"),
            kc("get configmap missing"),
            kc("delete configmap missing"),
            kc("delete configmap missing --ignore-not-found"),
            kc("get pods,configmaps missing"),
            kc("create -f -", CM.replace("kind: ConfigMap", "kind: Nonsense")),
            kc("create -f -", CM.replace("apiVersion: v1", "apiVersion: nosuch.example/v1")),
            kc("create configmap x --from-literal=a=b --namespace nosuch-namespace-zz"),
            kc("create -f -", CM.replace("name: settings", "name: ''")),
        ),
    ),
    Workflow(
        "client-side-apply",
        "kubectl apply creates, is a no-op when nothing changed, then updates; generation",
        (
            kc("apply -f -", DEPLOY),
            kc("get deployment web -o jsonpath={.metadata.generation}"),
            kc("apply -f -", DEPLOY),
            kc("get deployment web -o jsonpath={.metadata.generation}"),
            kc("apply -f -", DEPLOY_SCALED),
            kc('get deployment web "-o=jsonpath={.metadata.generation} {.spec.replicas}"'),
            kc("label deployment web extra=1"),
            kc("get deployment web -o jsonpath={.metadata.generation}"),
            kc("annotate deployment web note=hello"),
            kc("get deployment web -o yaml", accept=NO_DEPLOYMENT_CONTROLLER),
            kc("apply view-last-applied deployment web"),
            kc("diff -f -", DEPLOY_SCALED),
            kc("diff -f -", DEPLOY, accept=NO_DEPLOYMENT_CONTROLLER),
        ),
    ),
    Workflow(
        "patch-types",
        "merge, JSON and strategic-merge patches, and their errors",
        (
            kc("create -f -", DEPLOY),
            patch("deployment web --type=merge", '{"spec":{"replicas":1}}'),
            patch(
                "deployment web --type=json", '[{"op":"replace","path":"/spec/replicas","value":2}]'
            ),
            patch(
                "deployment web --type=json", '[{"op":"test","path":"/spec/replicas","value":9}]'
            ),
            patch("deployment web --type=json", '[{"op":"remove","path":"/spec/nosuch"}]'),
            patch(
                "deployment web",
                '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.example/web:2"}]}}}}',
            ),
            kc("get deployment web -o jsonpath={.spec.template.spec.containers[*].image}"),
            patch(
                "deployment web --type=merge",
                '{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.example/web:3"}]}}}}',
            ),
            kc("get deployment web -o jsonpath={.spec.template.spec.containers[*].name}"),
            patch("deployment web --type=merge", '{"spec":{"replicas":"many"}}', accept=GO_DECODE),
            patch("deployment web", '{"metadata":{"labels":{"$patch":"delete"}}}'),
            kc("get deployment web -o jsonpath={.metadata.generation}"),
            patch("configmap missing --type=merge", '{"data":{"a":"b"}}'),
        ),
    ),
    Workflow(
        "server-side-apply",
        "ownership, conflicts, --force-conflicts, managed fields, no-op apply",
        (
            kc("apply --server-side --field-manager=alice -f -", CM),
            kc("apply --server-side --field-manager=alice -f -", CM),
            kc("apply --server-side --field-manager=bob -f -", CM_CHANGED),
            kc("apply --server-side --field-manager=bob --force-conflicts -f -", CM_CHANGED),
            kc("get configmap settings -o jsonpath={.metadata.managedFields[*].manager}"),
            kc("get configmap settings -o yaml --show-managed-fields"),
            kc("apply --server-side --field-manager=alice -f -", CM.replace('size: "3"', "")),
            kc("get configmap settings -o jsonpath={.data}"),
            kc("apply --server-side --field-manager=carol -f -", DEPLOY),
            kc("apply --server-side --field-manager=carol -f -", DEPLOY),
            kc("get deployment web -o jsonpath={.metadata.generation}"),
            kc("scale deployment web --replicas=3"),
            kc("apply --server-side --field-manager=carol -f -", DEPLOY),
        ),
    ),
    Workflow(
        "selectors",
        "label and field selectors, labelling",
        (
            kc("create -f -", _cm("a1", "app: a, env: x")),
            kc("create -f -", _cm("a2", "app: a, env: y")),
            kc("create -f -", _cm("b1", "app: b")),
            kc("get configmaps -l app=a -o name"),
            kc("get configmaps -l 'env in (x,y)' -o name"),
            kc("get configmaps -l '!env' -o name"),
            kc("get configmaps -l app!=a,app -o name"),
            kc("get configmaps --field-selector metadata.name=a2 -o name"),
            kc("get configmaps --field-selector metadata.name!=a2 -l app -o name"),
            kc("get configmaps --field-selector spec.nosuch=1"),
            kc("get configmaps -l 'app in (a'"),
            kc("label configmap b1 env=z"),
            kc("label configmap b1 env=w"),
            kc("label configmap b1 env=w --overwrite"),
            kc("label configmap b1 env-"),
            kc("delete configmaps -l app=a"),
            kc("get configmaps -l app -o name"),
        ),
    ),
    Workflow(
        "dry-run",
        "--dry-run=server writes nothing and prints what would be stored",
        (
            kc("create --dry-run=server -f - -o yaml", CM),
            kc("get configmap settings"),
            kc("apply --server-side --dry-run=server -f -", CM),
            kc("create -f -", CM),
            kc("apply --dry-run=server -f - -o jsonpath={.data.color}", CM_CHANGED),
            kc("delete configmap settings --dry-run=server"),
            kc("get configmap settings -o jsonpath={.data.color}"),
            kc("create --dry-run=server -f -", CM),
        ),
    ),
    Workflow(
        "field-validation",
        "unknown and duplicate fields under Strict (default), Warn and Ignore",
        (
            kc("create -f -", CM.replace("\ndata:", "\nbogus: 1\ndata:")),
            kc("create --validate=warn -f -", CM.replace("\ndata:", "\nbogus: 1\ndata:")),
            kc("delete configmap settings"),
            kc("create --validate=false -f -", CM.replace("\ndata:", "\nbogus: 1\ndata:")),
            kc("delete configmap settings"),
            kc("create -f -", CM.replace("labels:", "nosuch: 1\n  labels:")),
            kc("create -f -", CM + "data: {again: x}\n"),
            kc(
                "create -f -",
                DEPLOY.replace(
                    "image: registry.example/web:1", "image: x\n        imagePullPolice: Always"
                ),
            ),
            kc("apply --server-side -f -", CM.replace("\ndata:", "\nbogus: 1\ndata:")),
            kc(
                "apply --server-side --validate=warn -f -",
                CM.replace("\ndata:", "\nbogus: 1\ndata:"),
            ),
        ),
    ),
    Workflow(
        "owner-gc-background",
        "deleting an owner deletes its dependents in the background",
        (
            kc("create -f -", _cm("parent", "role: parent")),
            kc("create -f -", _child("child", "parent")),
            kc("get configmap child -o jsonpath={.metadata.ownerReferences[0].name}"),
            kc("delete configmap parent"),
            kc("wait --for=delete configmap/child --timeout=40s"),
            kc("get configmaps -l role"),
        ),
    ),
    Workflow(
        "owner-gc-foreground",
        "foreground deletion: the owner waits (foregroundDeletion finalizer) for its dependents",
        (
            kc("create -f -", _cm("parent", "role: parent")),
            kc("create -f -", _child("child", "parent")),
            kc("delete configmap parent --cascade=foreground"),
            kc("get configmaps -l role", until="No resources"),
        ),
    ),
    Workflow(
        "owner-gc-orphan",
        "orphan deletion keeps dependents and strips their owner references",
        (
            kc("create -f -", _cm("parent", "role: parent")),
            kc("create -f -", _child("child", "parent")),
            kc("delete configmap parent --cascade=orphan"),
            kc("get configmaps -l role -o name"),
            kc('get configmap child "-o=jsonpath={.metadata.ownerReferences}done"', until="done"),
        ),
    ),
    Workflow(
        "pod-validation",
        "Pod resources (request above limit, map-key field paths), required fields, defaults",
        (
            kc("create -f -", _pod("over", "{requests: {cpu: '2'}, limits: {cpu: '1'}}")),
            kc("create -f -", _pod("over-mem", "{requests: {memory: 2Gi}, limits: {memory: 1Gi}}")),
            kc("create -f -", _pod("badq", "{requests: {cpu: lots}}")),
            kc("create -f -", _pod("badname", "{requests: {'nosuch': '1'}}")),
            kc("create -f -", _pod("norestart", "{}", "restartPolicy: Sometimes\n  ")),
            kc(
                "create -f -",
                _pod("noimage", "{}").replace("image: registry.example/app:1", "image: ''"),
            ),
            kc("create -f -", _pod("fine", "{requests: {cpu: 500m}, limits: {cpu: '1'}}")),
            kc("get pod fine -o jsonpath={.spec.containers[0].resources}"),
            kc("get pod fine -o jsonpath={.status.qosClass}"),
            kc("get pod fine -o yaml", accept=POD_ADMISSION),
            kc("get pod fine -o wide"),
            kc("create -f -", _pod("nosa", "{}", "serviceAccountName: nosuch\n  ")),
            kc("logs pod-that-does-not-exist"),
            kc("delete pod fine --grace-period=0 --force"),
        ),
    ),
    Workflow(
        "explain",
        "kubectl explain over the served OpenAPI (built-in kinds)",
        (
            kc("explain configmap"),
            kc("explain pod.spec.containers.resources"),
            kc("explain deployment.spec.strategy --recursive", accept=EXPLAIN_SCHEMA),
            kc("explain nosuchkind"),
            kc("explain pod.spec.nosuchfield"),
        ),
    ),
    Workflow(
        "wait-and-raw",
        "kubectl wait on jsonpath and conditions; raw HTTP through kubectl --raw",
        (
            kc("create -f -", CM),
            kc("wait --for=jsonpath={.data.color}=blue configmap/settings --timeout=10s"),
            kc("wait --for=jsonpath={.data.color}=green configmap/settings --timeout=2s"),
            kc("wait --for=condition=Ready configmap/settings --timeout=2s"),
            kc("get --raw /api/v1/namespaces/$NS/configmaps/settings"),
            kc("get --raw /api/v1/namespaces/$NS/configmaps/missing"),
            kc(
                "get --raw /api/v1/namespaces/$NS/configmaps?labelSelector=app%3Dweb&limit=1",
                accept=LIST_ITEM_KIND,
            ),
            kc("get --raw /apis/nosuch.example/v1"),
            kc("get --raw /api/v1/namespaces/$NS/nosuchresource"),
            kc(
                "create --raw /api/v1/namespaces/$NS/configmaps -f -",
                '{"metadata":{"generateName":"gen-"}}',
            ),
            kc("delete --raw /api/v1/namespaces/$NS/configmaps/settings"),
            kc("get --raw /api/v1/namespaces/$NS/configmaps/settings"),
        ),
    ),
)
