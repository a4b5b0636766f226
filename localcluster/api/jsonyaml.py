"""YAML request bodies read as Kubernetes reads them: into JSON values only.

PyYAML's safe loader turns unquoted timestamps into `datetime` objects, which are not JSON and
would fail deep inside storage. Kubernetes (sigs.k8s.io/yaml) converts YAML to JSON first, so
such values stay strings; this loader does the same.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

__all__ = ["YAMLError", "go_int", "load_json", "load_yaml"]

YAMLError = yaml.YAMLError


_INT64 = (-(2**63), 2**63 - 1)


def go_int(text: str) -> int | float:
    """A JSON integer as kube-apiserver decodes it: an int64 when it fits, else a float64 (Go's
    unstructured decoding), which the schema then refuses as `must be of type integer:
    "number"` — never an int too large for storage or CEL."""
    value = int(text)
    return value if _INT64[0] <= value <= _INT64[1] else float(value)


def load_json(data: str | bytes, **options: Any) -> Any:
    """`json.loads` with kube-apiserver's numbers (`go_int`)."""
    return json.loads(data, parse_int=go_int, **options)


class _JsonYamlLoader(yaml.SafeLoader):
    """YAML as Kubernetes reads it: timestamps and the like stay strings (JSON values only), and
    integers beyond int64 become floats (`go_int`)."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> Any:
        value = super().construct_yaml_int(node)
        return value if _INT64[0] <= value <= _INT64[1] else float(value)


_JsonYamlLoader.add_constructor("tag:yaml.org,2002:int", _JsonYamlLoader.construct_yaml_int)


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
            return load_json(text)
        except ValueError:
            pass
    return yaml.load(text, Loader=_JsonYamlLoader)
