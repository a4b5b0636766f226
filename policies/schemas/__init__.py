"""Schema data derived from Kubernetes' published definitions, committed as JSON.

`podtemplatespec.json` is the structural PodTemplateSpec schema produced by
`policies.schemas.derive` from the definitions shipped in the `kubernetes-validate` package
(Kubernetes `derive.KUBERNETES_VERSION`). It is committed rather than derived at import time so
admission never reads the 100 MB schema collection (deriving takes ~0.2 s; loading this file
takes a few ms, once per process). `python -m policies.schemas.derive` rewrites it, and
`tests/crds/test_crds_fresh.py` fails when it no longer matches a fresh derivation.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["POD_TEMPLATE_SPEC_FILE", "pod_template_spec"]

POD_TEMPLATE_SPEC_FILE = "podtemplatespec.json"


@cache
def pod_template_spec() -> dict[str, Any]:
    """The committed structural PodTemplateSpec schema (shared: never mutate it)."""
    text = resources.files(__name__).joinpath(POD_TEMPLATE_SPEC_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
