"""`$(VAR)` expansion and environment resolution follow the kubelet's rules."""

from __future__ import annotations

import base64

import pytest

from localcluster.kubelet.expansion import EnvError, NodeFacts, expand, expand_command, resolve_env

ENV = {"NAME": "world", "EMPTY": "", "A": "$(B)"}

EXPANSIONS = {
    "plain text is unchanged": ("hello", "hello"),
    "a defined reference is replaced": ("hello $(NAME)", "hello world"),
    "an undefined reference stays verbatim": ("$(MISSING) x", "$(MISSING) x"),
    "a double dollar escapes the reference": ("$$(NAME)", "$(NAME)"),
    "a double dollar alone is one dollar": ("cost $$5", "cost $5"),
    "a lone trailing dollar is kept": ("5$", "5$"),
    "a dollar before another char is kept": ("$NAME", "$NAME"),
    "an unterminated reference is kept": ("$(NAME", "$(NAME"),
    "an empty reference is undefined": ("$()", "$()"),
    "an empty value replaces": ("[$(EMPTY)]", "[]"),
    "values are not expanded again": ("$(A)", "$(B)"),
    "three dollars escape then keep": ("$$$(NAME)", "$world"),
    "adjacent references": ("$(NAME)$(NAME)", "worldworld"),
}


@pytest.mark.parametrize(("text", "want"), EXPANSIONS.values(), ids=EXPANSIONS.keys())
def test_expansion_matches_kubernetes(text: str, want: str) -> None:
    assert expand(text, ENV.get) == want


def _pod(containers: list[dict], **meta: object) -> dict:
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u-1",
            "labels": {"app": "x", "tier": "db"},
            "annotations": {"note": "hi"},
            **meta,
        },
        "spec": {"nodeName": "trainops", "serviceAccountName": "sa", "containers": containers},
    }


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


CMS = {"cm": {"data": {"color": "red", "size": "L", "bad key": "x"}}}
SECRETS = {"s": {"data": {"password": _b64("hunter2")}}}


def _resolve(container: dict) -> tuple[dict, list] | EnvError:
    return resolve_env(
        _pod([container]), container, config_maps=CMS, secrets=SECRETS, node=NodeFacts()
    )


def test_env_comes_after_env_from_and_later_definitions_win() -> None:
    c = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "cm"}}, {"prefix": "S_", "secretRef": {"name": "s"}}],
        "env": [
            {"name": "color", "value": "blue"},
            {"name": "X", "value": "1"},
            {"name": "X", "value": "2"},
        ],
    }
    result = _resolve(c)
    assert not isinstance(result, EnvError)
    env, warnings = result
    assert env == {"color": "blue", "size": "L", "S_password": "hunter2", "X": "2"}
    assert warnings == [
        "Keys [bad key] from the EnvFrom configmap ns/cm were skipped since they are "
        "considered invalid environment variable names."
    ]


def test_env_values_expand_only_earlier_variables() -> None:
    c = {
        "name": "c",
        "env": [
            {"name": "A", "value": "a-$(B)"},
            {"name": "B", "value": "b"},
            {"name": "C", "value": "c-$(B)-$$(B)"},
            {"name": "D", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
    }
    env, _ = _resolve(c)  # type: ignore[misc]
    assert env == {"A": "a-$(B)", "B": "b", "C": "c-b-$(B)", "D": "p"}


FIELD_REFS = {
    "pod name": ("metadata.name", "p"),
    "namespace": ("metadata.namespace", "ns"),
    "uid": ("metadata.uid", "u-1"),
    "one label": ("metadata.labels['tier']", "db"),
    "a missing label is empty": ("metadata.labels['nope']", ""),
    "one annotation": ("metadata.annotations['note']", "hi"),
    "all labels": ("metadata.labels", 'app="x"\ntier="db"'),
    "pod IP": ("status.podIP", "127.0.0.1"),
    "host IP": ("status.hostIP", "127.0.0.1"),
    "node name": ("spec.nodeName", "trainops"),
    "service account": ("spec.serviceAccountName", "sa"),
}


@pytest.mark.parametrize(("path", "want"), FIELD_REFS.values(), ids=FIELD_REFS.keys())
def test_field_refs_read_the_pod(path: str, want: str) -> None:
    c = {"name": "c", "env": [{"name": "V", "valueFrom": {"fieldRef": {"fieldPath": path}}}]}
    env, _ = _resolve(c)  # type: ignore[misc]
    assert env["V"] == want


REFS = {
    "secret key": ({"secretKeyRef": {"name": "s", "key": "password"}}, "hunter2"),
    "configmap key": ({"configMapKeyRef": {"name": "cm", "key": "size"}}, "L"),
    "optional missing secret leaves the variable unset": (
        {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}},
        None,
    ),
    "optional missing key leaves the variable unset": (
        {"configMapKeyRef": {"name": "cm", "key": "nope", "optional": True}},
        None,
    ),
    "cpu limit rounds up in cores": (
        {"resourceFieldRef": {"resource": "limits.cpu"}},
        "2",
    ),
    "memory request in Mi": (
        {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}},
        "256",
    ),
    "unset memory limit is the node's allocatable": (
        {"resourceFieldRef": {"resource": "limits.memory"}},
        str(2**30),
    ),
}


@pytest.mark.parametrize(("source", "want"), REFS.values(), ids=REFS.keys())
def test_value_from_sources(source: dict, want: str | None) -> None:
    c = {
        "name": "c",
        "resources": {"limits": {"cpu": "1500m"}, "requests": {"memory": "256Mi"}},
        "env": [{"name": "V", "valueFrom": source}],
    }
    env, _ = _resolve(c)  # type: ignore[misc]
    assert env.get("V") == want


ERRORS = {
    "missing secret": ({"secretKeyRef": {"name": "nope", "key": "k"}}, 'secret "nope" not found'),
    "missing configmap": (
        {"configMapKeyRef": {"name": "nope", "key": "k"}},
        'configmap "nope" not found',
    ),
    "missing key": (
        {"secretKeyRef": {"name": "s", "key": "k"}},
        "couldn't find key k in Secret ns/s",
    ),
}


@pytest.mark.parametrize(("source", "message"), ERRORS.values(), ids=ERRORS.keys())
def test_unresolvable_references_are_config_errors(source: dict, message: str) -> None:
    result = _resolve({"name": "c", "env": [{"name": "V", "valueFrom": source}]})
    assert result == EnvError(message, "CreateContainerConfigError")


def test_command_and_args_expand_against_the_final_environment() -> None:
    c = {"command": ["echo", "$(A)"], "args": ["$(B)", "$$(A)", "$(NOPE)"]}
    assert expand_command(c, {"A": "1", "B": "2"}) == (["echo", "1"], ["2", "$(A)", "$(NOPE)"])
