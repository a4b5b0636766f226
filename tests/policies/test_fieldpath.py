"""Field paths render one way in every layer: `.name` for fields and plain map keys."""

from __future__ import annotations

import pytest

from policies.fieldpath import Path

CONTAINER = (
    Path.of("spec", "replicaSpecs").index(1).child("template", "spec", "containers").index(0)
)

RENDERED = {
    "fields and indexes": (
        CONTAINER.child("image"),
        "spec.replicaSpecs[1].template.spec.containers[0].image",
    ),
    "a plain resource name as a child": (
        CONTAINER.child("resources", "limits").key("cpu"),
        "spec.replicaSpecs[1].template.spec.containers[0].resources.limits.cpu",
    ),
    "a plain name with a dash and digits": (
        CONTAINER.child("resources", "limits").key("hugepages-2Mi"),
        "spec.replicaSpecs[1].template.spec.containers[0].resources.limits.hugepages-2Mi",
    ),
    "a domain-qualified resource name in brackets": (
        CONTAINER.child("resources", "limits").key("nvidia.com/gpu"),
        "spec.replicaSpecs[1].template.spec.containers[0].resources.limits[nvidia.com/gpu]",
    ),
    "a dotted label key in brackets": (
        Path.of("metadata", "labels").key("app.kubernetes.io/name"),
        "metadata.labels[app.kubernetes.io/name]",
    ),
    "a key starting with a digit in brackets": (
        Path.of("data").key("1st"),
        "data[1st]",
    ),
    "an empty key in brackets": (Path.of("data").key(""), "data[]"),
    "a map key at the root": (Path().key("cpu"), "cpu"),
    "the empty path": (Path(), ""),
}


@pytest.mark.parametrize(("path", "text"), RENDERED.values(), ids=RENDERED.keys())
def test_paths_render_map_keys_as_children_unless_they_need_brackets(path: Path, text: str) -> None:
    assert str(path) == text


def test_plain_parts_keep_map_keys_as_the_strings_to_follow_in_the_object() -> None:
    path = Path.of("limits").key("nvidia.com/gpu")
    assert path.plain_parts() == ("limits", "nvidia.com/gpu")
    assert [type(p) for p in path.plain_parts()] == [str, str]
