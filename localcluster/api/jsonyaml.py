"""YAML request bodies read as Kubernetes reads them: into JSON values only.

PyYAML's safe loader turns unquoted timestamps into `datetime` objects, which are not JSON and
would fail deep inside storage. Kubernetes (sigs.k8s.io/yaml) converts YAML to JSON first, so
such values stay strings; this loader does the same.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["YAMLError", "load_yaml"]

YAMLError = yaml.YAMLError


class _JsonYamlLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps and the like stay strings (JSON values only)."""


_JsonYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml(text: str) -> Any:
    """Parse YAML into JSON values (no datetime objects).

    JSON is valid YAML and is what kubectl sends (`apply --server-side`), so it takes the fast
    path; PyYAML's pure-Python parser needs seconds for a large CRD.
    """
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return yaml.load(text, Loader=_JsonYamlLoader)
