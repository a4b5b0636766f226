"""Names shared by every GitOps part: the API group, tracking keys, the field manager.

One place, like gitops-engine's `pkg/sync/common/types.go`, so the sync engine, the diff's
normalization and the reconciler can never disagree on a label or annotation key.
"""

from __future__ import annotations

__all__ = [
    "API_VERSION",
    "FIELD_MANAGER",
    "GROUP",
    "HELD_FIELDS_ANNOTATION",
    "KIND",
    "MANAGED_LABEL",
    "REPOSITORY_ANNOTATION",
    "REPOSITORY_UID_ANNOTATION",
    "REPOSITORY_UID_LABEL",
    "SYNC_OPTIONS_ANNOTATION",
    "VERSION",
]

GROUP = "gitops.trainops.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "JobRepository"

MANAGED_LABEL = f"{GROUP}/managed"
"""Label `gitops.trainops.dev/managed: "true"` on everything the sync engine applies (kept for
readers and for objects applied before `REPOSITORY_UID_LABEL`; live state is read by the uid
label)."""
REPOSITORY_UID_LABEL = f"{GROUP}/repository-uid"
"""Label: the uid of the JobRepository that applied the object (its tracking id, as the
annotation of the same name). Live state is selected by it — a list by this label, or the
informer cache's tracking index (`gitops.runtime.livecache`) — never by a label every repository
shares."""
REPOSITORY_ANNOTATION = f"{GROUP}/repository"
"""Annotation `<namespace>/<name>` of the JobRepository that applied the object; prune deletes
only objects carrying this repository's value."""
REPOSITORY_UID_ANNOTATION = f"{GROUP}/repository-uid"
"""Annotation: the uid of the JobRepository that applied the object, its tracking id. Prune
deletes only objects carrying this repository's uid (a repository deleted and recreated under
the same name, or repointed elsewhere by name, is another repository)."""
HELD_FIELDS_ANNOTATION = f"{GROUP}/held-fields"
"""Annotation on a live object: comma-separated JSON pointers (`/spec/runMode/pause/enabled`)
that a person set by hand and that Git does not manage while it is there — no drift, never
applied. The dashboard and the API's pause and resume set it (gitops/engine/handheld.py)."""
SYNC_OPTIONS_ANNOTATION = f"{GROUP}/sync-options"
"""Per-resource sync options, e.g. `Replace=true`."""
FIELD_MANAGER = "trainops-gitops"
