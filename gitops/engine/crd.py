"""The JobRepository CustomResourceDefinition, as data (pure).

A JobRepository says "keep the manifests under `path` of `repoURL` at `targetRevision` applied
in `destination.namespace`" — an Argo CD Application reduced to what trainops needs. The
schema is structural (every node typed, as apiextensions.k8s.io/v1 requires), carries
descriptions for `kubectl explain`, validates enums and duration patterns, and defaults what
the API server can default (`path`, `recurse`, `interval`, the retry back-off). Defaults that
depend on other objects (`targetRevision` → the remote HEAD, `destination.namespace` → the
JobRepository's own namespace) are applied by the reconciler, so the fields stay unset.

Printer columns: `kubectl get jobrepo` shows Sync, Health, a short revision and the age. A
JSONPath cannot slice a string, so the reconciler also writes `status.sync.shortRevision`.
"""

from __future__ import annotations

from typing import Any

from gitops.engine import names
from kube.resources import Resource

__all__ = [
    "DURATION_PATTERN",
    "HEALTH_STATUSES",
    "JOB_REPOSITORIES",
    "SYNC_STATUSES",
    "build_crd",
    "file_name",
]

JOB_REPOSITORIES = Resource(names.GROUP, names.VERSION, "jobrepositories", names.KIND, True)
"""The JobRepository resource (`gitops.runtime.reconciler` re-exports it, as its users import it)."""

DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
"""A Go-style duration of positive parts: `30s`, `3m`, `1h30m`, `500ms`."""
SYNC_STATUSES = ("Synced", "OutOfSync", "Unknown")
HEALTH_STATUSES = ("Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown")
OPERATION_PHASES = ("Running", "Succeeded", "Failed", "Error")
_PLURAL = "jobrepositories"


def build_crd() -> dict[str, Any]:
    """The apiextensions.k8s.io/v1 CRD of JobRepository."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{_PLURAL}.{names.GROUP}",
            "labels": {"app.kubernetes.io/part-of": "trainops"},
        },
        "spec": {
            "group": names.GROUP,
            "names": {
                "kind": names.KIND,
                "listKind": names.KIND + "List",
                "plural": _PLURAL,
                "singular": names.KIND.lower(),
                "shortNames": ["jobrepo"],
                "categories": ["trainops"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": names.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        _column("Sync", ".status.sync.status", "Synced, OutOfSync or Unknown."),
                        _column("Health", ".status.health.status", "The worst resource health."),
                        _column("Revision", ".status.sync.shortRevision", "The synced commit."),
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {"openAPIV3Schema": _schema()},
                }
            ],
        },
    }


def file_name(crd: dict[str, Any]) -> str:
    """`<group>_<plural>.yaml`, the kubebuilder convention."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


# --- schema -----------------------------------------------------------------------------------


def _column(name: str, path: str, description: str) -> dict[str, Any]:
    return {"name": name, "type": "string", "description": description, "jsonPath": path}


def _str(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _obj(description: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": properties, **extra}


def _arr(description: str, items: dict[str, Any], max_items: int, **extra: Any) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "items": items,
        "maxItems": max_items,
        **extra,
    }


def _counts(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": {"type": "integer"},
    }


def _duration(description: str, default: str | None = None) -> dict[str, Any]:
    node = _str(description, pattern=DURATION_PATTERN, maxLength=32)
    if default is not None:
        node["default"] = default
    return node


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "description": "A Git repository of training jobs (and their supporting objects) kept "
        "applied in a namespace.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _spec(),
            "status": _status(),
        },
    }


def _spec() -> dict[str, Any]:
    return _obj(
        "Where the manifests are and how to keep them applied.",
        {
            "repoURL": _str(
                "The repository: https://, http://, ssh://, scp-like git@host:org/repo.git, "
                "or file://. Credentials never go in the URL: use secretRef.",
                minLength=1,
                maxLength=2048,
                pattern=r"^[^-\s][^\s]*$",
            ),
            "targetRevision": _str(
                "A branch, a tag or a commit sha. Unset: the remote HEAD (the default branch).",
                maxLength=255,
            ),
            "path": _str(
                "The directory in the repository holding the manifests (*.yaml, *.yml, *.json).",
                default=".",
                maxLength=1024,
            ),
            "recurse": {
                "type": "boolean",
                "description": "Whether subdirectories of path are read too.",
                "default": True,
            },
            "destination": _obj(
                "Where namespaced objects without a namespace go.",
                {
                    "namespace": _str(
                        "Unset: the JobRepository's own namespace.",
                        maxLength=63,
                        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
                    )
                },
            ),
            "syncPolicy": _sync_policy(),
            "ignoreDifferences": _arr(
                "Fields whose differences do not make the repository OutOfSync.",
                _obj(
                    "The objects and the fields (RFC 6901 JSON pointers) to ignore.",
                    {
                        "group": _str("API group; empty for the core group.", maxLength=253),
                        "kind": _str("Kind.", minLength=1, maxLength=63),
                        "name": _str("Only the object of this name.", maxLength=253),
                        "namespace": _str("Only objects in this namespace.", maxLength=63),
                        "jsonPointers": _arr(
                            "Fields, e.g. /spec/replicas.",
                            _str("A JSON pointer.", pattern=r"^(/.*)?$", maxLength=1024),
                            64,
                        ),
                    },
                    required=["kind", "jsonPointers"],
                ),
                64,
            ),
            "interval": _duration("How often the repository is polled, e.g. 30s, 3m, 1h.", "3m"),
            "serviceAccountName": _str(
                "The ServiceAccount of this namespace the reconciler acts as (impersonates) for "
                "every read, apply and prune of this repository and to read secretRef. Unset: "
                "the reconciler's --default-service-account; with neither the repository is "
                "refused (except under embedded `trainops up`).",
                minLength=1,
                maxLength=253,
                pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
            ),
            "secretRef": _obj(
                "A Secret in the JobRepository's namespace with sshPrivateKey, or username "
                "and password, or token; and url: the repository URL (or a prefix of it) the "
                "credentials are for, else they are sent nowhere.",
                {"name": _str("The Secret's name.", minLength=1, maxLength=253)},
                required=["name"],
            ),
            "push": _obj(
                "Push webhooks for this repository.",
                {
                    "secretRef": _obj(
                        "A Secret in the JobRepository's namespace whose key token is this "
                        "repository's own push secret (read as serviceAccountName): a push "
                        "triggers it only when signed with it (GitHub, Gitea/Forgejo, "
                        "X-Hub-Signature-256) or carrying it (GitLab, X-Trainops-Token); the "
                        "service's shared webhook secret then does not.",
                        {"name": _str("The Secret's name.", minLength=1, maxLength=253)},
                        required=["name"],
                    )
                },
            ),
        },
        required=["repoURL"],
    )


def _sync_policy() -> dict[str, Any]:
    return _obj(
        "When and how to sync.",
        {
            "automated": _obj(
                "Sync on every new revision. Unset: sync only when asked.",
                {
                    "prune": {
                        "type": "boolean",
                        "description": "Delete objects this repository applied that are no "
                        "longer in it.",
                        "default": False,
                    },
                    "selfHeal": {
                        "type": "boolean",
                        "description": "Re-apply when the live objects drift from Git.",
                        "default": False,
                    },
                },
            ),
            "allowAnyRevision": {
                "type": "boolean",
                "description": "Let a requested sync to a revision (the annotation "
                "gitops.trainops.dev/sync-revision, which only patch allows) apply a commit "
                "outside targetRevision's history (another branch, a pull request's head). "
                "Unset or false: such a request is refused; a commit targetRevision's history "
                "holds (an earlier commit of the branch, a tag on it) is synced. Without "
                "automated sync only.",
                "default": False,
            },
            "rerunFinishedJobs": {
                "type": "boolean",
                "description": "Create a training job again when it finished (Succeeded or "
                "Failed) and was deleted, though its manifest did not change. Unset or false: "
                "a finished job deleted by hand stays deleted until its manifest changes "
                "(status.finishedJobs remembers it).",
                "default": False,
            },
            "adoptExisting": {
                "type": "boolean",
                "description": "Take over an object that already exists and was not created "
                "by a JobRepository (no tracking annotation: made by kubectl, a script, another "
                "tool). Unset or false: such an object is left alone and its manifest is an "
                "error at its file:line.",
                "default": False,
            },
            "allowEmpty": {
                "type": "boolean",
                "description": "Let a sync whose manifests define no object at all prune "
                "everything this repository applied. Unset or false: such a sync (a commit "
                "that leaves only a README, a path emptied) prunes nothing and says so.",
                "default": False,
            },
            "retry": _obj(
                "Retries of a failed sync.",
                {
                    "limit": {
                        "type": "integer",
                        "description": "Retries before giving up; 0 means none.",
                        "minimum": 0,
                        "maximum": 100,
                        "default": 5,
                    },
                    "backoff": _obj(
                        "Wait between retries: duration × factor^n, capped at maxDuration.",
                        {
                            "duration": _duration("The first wait.", "5s"),
                            "factor": {
                                "type": "integer",
                                "description": "Growth of the wait per retry.",
                                "minimum": 1,
                                "maximum": 10,
                                "default": 2,
                            },
                            "maxDuration": _duration("The longest wait.", "3m"),
                        },
                    ),
                },
            ),
            "syncOptions": _arr(
                "Options such as Replace=true, PruneLast=true, CreateNamespace=true.",
                _str("KEY=VALUE.", pattern=r"^[A-Za-z][A-Za-z0-9]*=[^\s]+$", maxLength=128),
                32,
            ),
        },
    )


def _condition() -> dict[str, Any]:
    return _obj(
        "A condition, e.g. ComparisonError or SyncError.",
        {
            "type": _str("The condition's type.", maxLength=64),
            "status": _str("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": _str("A CamelCase reason.", maxLength=128),
            "message": _str("What happened, for humans."),
            "lastTransitionTime": _str("When status last changed.", format="date-time"),
        },
        required=["type", "status"],
    )


def _resource_ref(description: str, **more: Any) -> dict[str, Any]:
    return _obj(
        description,
        {
            "group": _str("API group; empty for the core group."),
            "kind": _str("Kind."),
            "namespace": _str("Namespace; empty for cluster-scoped objects."),
            "name": _str("Name."),
            **more,
        },
    )


def _status() -> dict[str, Any]:
    return _obj(
        "What the reconciler last saw and did; written only by it.",
        {
            "sync": _obj(
                "Whether the live objects match Git at the target revision.",
                {
                    "status": _str("Synced, OutOfSync or Unknown.", enum=list(SYNC_STATUSES)),
                    "revision": _str("The commit sha compared."),
                    "shortRevision": _str("The first 7 characters of revision (for kubectl)."),
                },
            ),
            "health": _obj(
                "The worst health of the repository's resources.",
                {
                    "status": _str("A health status.", enum=list(HEALTH_STATUSES)),
                    "message": _str("Why, when not Healthy."),
                },
            ),
            "operationState": _obj(
                "The last (or current) sync operation.",
                {
                    "phase": _str("The operation's phase.", enum=list(OPERATION_PHASES)),
                    "message": _str("What happened."),
                    "startedAt": _str("Start time.", format="date-time"),
                    "finishedAt": _str("End time.", format="date-time"),
                    "syncResult": _obj(
                        "The outcome per resource.",
                        {
                            "revision": _str("The commit sha applied."),
                            "resources": _arr(
                                "One result per resource.",
                                _resource_ref(
                                    "A resource's outcome.",
                                    status=_str("Synced, SyncFailed, Pruned, PruneSkipped, …"),
                                    message=_str("What the API server said."),
                                ),
                                10000,
                            ),
                            "total": {
                                "type": "integer",
                                "description": "Results in all; `resources` lists at most 500 "
                                "(only failures) when there are more.",
                            },
                        },
                    ),
                },
            ),
            "resources": _arr(
                "The resources of the repository, desired or live: all of them up to 500; "
                "above that, those not Synced and Healthy (summary counts them all; the HTTP "
                "API lists them all).",
                _resource_ref(
                    "A resource's state.",
                    status=_str("Its sync status.", enum=list(SYNC_STATUSES)),
                    health=_str("Its health status.", enum=list(HEALTH_STATUSES)),
                    message=_str("Why it is not Synced/Healthy, or its pre-flight error."),
                    file=_str("The file in the repository that defines it."),
                    line={"type": "integer", "description": "The line in file (1-based)."},
                ),
                10000,
            ),
            "summary": _obj(
                "How many resources the repository has, per sync and per health status.",
                {
                    "total": {"type": "integer", "description": "Resources in all."},
                    "listed": {"type": "integer", "description": "Entries in `resources`."},
                    "sync": _counts("Resources per sync status."),
                    "health": _counts("Resources per health status."),
                },
            ),
            "appliedKinds": _arr(
                "The kinds of the objects this repository has in Git or applied: searched for "
                "prune candidates, also after a restart.",
                _obj(
                    "A kind.",
                    {"apiVersion": _str("Its apiVersion."), "kind": _str("Its kind.")},
                    required=["apiVersion", "kind"],
                ),
                256,
            ),
            "finishedJobs": _arr(
                "Training jobs that finished (Succeeded or Failed) in sync with Git, with a "
                "digest of the manifest they ran: one deleted since is not created again while "
                "its manifest is unchanged (unless syncPolicy.rerunFinishedJobs). Deleted jobs "
                "first; at most 1000.",
                _obj(
                    "A finished training job.",
                    {
                        "kind": _str("TensorFlowTrainingJob or XGBoostTrainingJob."),
                        "namespace": _str("Its namespace."),
                        "name": _str("Its name."),
                        "phase": _str("How it finished.", enum=["Succeeded", "Failed"]),
                        "manifest": _str("A digest of the object applied when it finished."),
                    },
                    required=["kind", "namespace", "name", "phase", "manifest"],
                ),
                1000,
            ),
            "history": _arr(
                "The last 10 syncs, newest last.",
                _obj(
                    "One sync.",
                    {
                        "revision": _str("The commit sha."),
                        "author": _str("The commit's author."),
                        "message": _str("The commit's subject."),
                        "deployedAt": _str("When the sync finished.", format="date-time"),
                        "result": _str("Succeeded, Failed or Error."),
                    },
                ),
                10,
            ),
            "conditions": _arr(
                "Conditions, e.g. ComparisonError when Git or a manifest cannot be read.",
                _condition(),
                32,
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
            ),
            "reconciledAt": _str(
                "When a comparison last changed the status, or was asked for (refresh, sync).",
                format="date-time",
            ),
            "lastHandledRequest": _obj(
                "The sync and refresh requests (annotations gitops.trainops.dev/"
                "sync-requested-at and refresh-requested-at) the reconciler has carried out: "
                "a request is pending while its annotation differs from the value here.",
                {
                    "refreshRequestedAt": _str("The last refresh request handled."),
                    "syncRequestedAt": _str("The last sync request handled."),
                },
            ),
        },
    )
