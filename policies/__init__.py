"""The one definition of a valid training job: defaults, rules and field errors.

Pure functions over plain dicts: no I/O, no clock, no Kubernetes client. The webhook,
`trainops check`, the GitOps pre-flight and the CRDs' CEL rules all come from here.

Contract (stable; other packages code against it):

- `default(obj) -> (defaulted_copy, json_patch_ops)`: never mutates `obj`; idempotent.
- `default_patch(obj) -> json_patch_ops`: the same patch without the copy (for the webhook).
- `validate(obj, old=None, *, schema_checked=False, pod_security=None) -> (errors, warnings)`:
  `obj` is the defaulted object; `old` is the stored object on UPDATE; `schema_checked=True`
  skips the structural layer for an object an API server has already checked against the CRD
  schema; `pod_security` is the Pod Security level the namespace enforces (checked on CREATE,
  `podsecurity`). Never raises, whatever the input.
- `admit(obj, old=None, *, pod_security=None) -> Admission`: default, then validate.
- `podsecurity.enforced_level(namespace_labels)`, `podsecurity.LEVELS`.
- `is_training_job(obj)`, `GROUP`, `VERSION`, `KINDS`.

Layout: `job` dispatches on the kind; `tensorflow` and `xgboost` hold the per-kind facts
(`kinds.KindSpec`); `defaults` fills in defaults; `rules_common`, `resources` (with `quantity`)
and `update` hold the rules; `advice` the warnings; `structural` the strict schema decoding.
"""

from __future__ import annotations

from policies import podsecurity
from policies.fieldpath import FieldError
from policies.job import (
    API_VERSION,
    GROUP,
    KINDS,
    MUTATING_WEBHOOK,
    VALIDATING_WEBHOOK,
    VERSION,
    Admission,
    admit,
    default,
    default_patch,
    is_training_job,
    validate,
)

__all__ = [
    "API_VERSION",
    "GROUP",
    "KINDS",
    "MUTATING_WEBHOOK",
    "VALIDATING_WEBHOOK",
    "VERSION",
    "Admission",
    "FieldError",
    "admit",
    "default",
    "default_patch",
    "is_training_job",
    "podsecurity",
    "validate",
]
