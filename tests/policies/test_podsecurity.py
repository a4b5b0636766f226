"""Pod Security Standards on a job's replica templates (policies/podsecurity.py).

Each case changes one template of a valid job and lists what each level refuses, as
(reason, field under the first replica's template); the same job passes `privileged`.
tests/reference/test_pod_security_reference.py replays the table's pods against a real
kube-apiserver's Pod Security admission.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import policies
from policies import podsecurity
from tests.support.jobs import container, replica, tf_job

Pod = dict[str, Any]
T = "spec.replicaSpecs[0].template"
S = f"{T}.spec"
C0 = f"{S}.containers[0]"
SC = f"{C0}.securityContext"

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
    "capabilities": {"drop": ["ALL"]},
}
# What a container with no securityContext lacks under `restricted`.
BARE = {
    ("Required", f"{SC}.runAsNonRoot"),
    ("Required", f"{SC}.allowPrivilegeEscalation"),
    ("Required", f"{SC}.seccompProfile.type"),
    ("Required", f"{SC}.capabilities.drop"),
}


def hardened(pod: Pod) -> Pod:
    """A pod spec that `restricted` accepts."""
    pod["containers"][0]["securityContext"] = copy.deepcopy(RESTRICTED_CONTAINER)
    return pod


def sc(**fields: Any) -> Callable[[Pod], Pod]:
    """The first container's securityContext, hardened, with `fields` changed."""

    def change(pod: Pod) -> Pod:
        hardened(pod)["containers"][0]["securityContext"].update(fields)
        return pod

    return change


def pod_sc(**fields: Any) -> Callable[[Pod], Pod]:
    def change(pod: Pod) -> Pod:
        hardened(pod).setdefault("securityContext", {}).update(fields)
        return pod

    return change


def spec(**fields: Any) -> Callable[[Pod], Pod]:
    def change(pod: Pod) -> Pod:
        hardened(pod).update(fields)
        return pod

    return change


def job_with(change: Callable[[Pod], Pod]) -> dict[str, Any]:
    job = tf_job(replica("worker", 2))
    change(job["spec"]["replicaSpecs"][0]["template"]["spec"])
    return job


Expected = set[tuple[str, str]]
# name: (change, baseline refuses, restricted refuses beyond what baseline refuses)
CASES: dict[str, tuple[Callable[[Pod], Pod], Expected, Expected]] = {
    "a hardened pod": (hardened, set(), set()),
    "a pod as most people write it": (lambda p: p, set(), BARE),
    "hostNetwork": (spec(hostNetwork=True), {("Forbidden", f"{S}.hostNetwork")}, set()),
    "hostPID": (spec(hostPID=True), {("Forbidden", f"{S}.hostPID")}, set()),
    "hostIPC": (spec(hostIPC=True), {("Forbidden", f"{S}.hostIPC")}, set()),
    "hostNetwork false": (spec(hostNetwork=False), set(), set()),
    "privileged": (  # (a real API server refuses privileged with allowPrivilegeEscalation false)
        sc(privileged=True, allowPrivilegeEscalation=None),
        {("Forbidden", f"{SC}.privileged")},
        {("Required", f"{SC}.allowPrivilegeEscalation")},
    ),
    "privileged false": (sc(privileged=False), set(), set()),
    "a baseline capability added": (
        sc(capabilities={"drop": ["ALL"], "add": ["CHOWN"]}),
        set(),
        {("Forbidden", f"{SC}.capabilities.add[0]")},
    ),
    "NET_BIND_SERVICE added": (
        sc(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}),
        set(),
        set(),
    ),
    "SYS_ADMIN added": (
        sc(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "SYS_ADMIN"]}),
        {("Forbidden", f"{SC}.capabilities.add[1]")},
        set(),
    ),
    "capabilities not dropped": (
        sc(capabilities={"drop": ["NET_RAW"]}),
        set(),
        {("Required", f"{SC}.capabilities.drop")},
    ),
    "a hostPath volume": (
        spec(volumes=[{"name": "data", "emptyDir": {}}, {"name": "h", "hostPath": {"path": "/"}}]),
        {("Forbidden", f"{S}.volumes[1].hostPath")},
        set(),
    ),
    "an nfs volume": (
        spec(volumes=[{"name": "n", "nfs": {"server": "s", "path": "/"}}]),
        set(),
        {("Forbidden", f"{S}.volumes[0].nfs")},
    ),
    "the volumes restricted allows": (
        spec(
            volumes=[
                {"name": "a", "configMap": {"name": "c"}},
                {"name": "b", "secret": {"secretName": "s"}},
                {"name": "c", "emptyDir": {}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "p"}},
                {"name": "e", "projected": {"sources": []}},
                {"name": "f", "downwardAPI": {"items": []}},
            ]
        ),
        set(),
        set(),
    ),
    "a host port": (
        lambda p: (
            hardened(p)["containers"][0].update(
                ports=[{"containerPort": 2222}, {"containerPort": 80, "hostPort": 80}]
            )
            or p
        ),
        {("Forbidden", f"{C0}.ports[1].hostPort")},
        set(),
    ),
    "hostPort 0": (
        lambda p: (
            hardened(p)["containers"][0].update(ports=[{"containerPort": 1, "hostPort": 0}]) or p
        ),
        set(),
        set(),
    ),
    "AppArmor Unconfined": (
        sc(appArmorProfile={"type": "Unconfined"}),
        {("Forbidden", f"{SC}.appArmorProfile.type")},
        set(),
    ),
    "SELinux type spc_t": (
        pod_sc(seLinuxOptions={"type": "spc_t"}),
        {("Forbidden", f"{S}.securityContext.seLinuxOptions.type")},
        set(),
    ),
    "SELinux type container_t": (pod_sc(seLinuxOptions={"type": "container_t"}), set(), set()),
    "SELinux user": (
        sc(seLinuxOptions={"user": "system_u"}),
        {("Forbidden", f"{SC}.seLinuxOptions.user")},
        set(),
    ),
    "procMount Unmasked": (sc(procMount="Unmasked"), {("Forbidden", f"{SC}.procMount")}, set()),
    "seccomp Unconfined on the pod": (
        pod_sc(seccompProfile={"type": "Unconfined"}),
        {("Forbidden", f"{S}.securityContext.seccompProfile.type")},
        set(),
    ),
    "seccomp Unconfined on a container": (
        sc(seccompProfile={"type": "Unconfined"}),
        {("Forbidden", f"{SC}.seccompProfile.type")},
        set(),
    ),
    "seccomp on the pod only": (
        lambda p: (
            pod_sc(seccompProfile={"type": "RuntimeDefault"}, runAsNonRoot=True)(p)
            and p["containers"][0]["securityContext"].pop("seccompProfile")
            and p["containers"][0]["securityContext"].pop("runAsNonRoot")
            and p
        ),
        set(),
        set(),
    ),
    "an unsafe sysctl": (
        pod_sc(
            sysctls=[
                {"name": "net.ipv4.tcp_syncookies", "value": "1"},
                {"name": "kernel.msgmax", "value": "1"},
            ]
        ),
        {("Forbidden", f"{S}.securityContext.sysctls[1].name")},
        set(),
    ),
    "hostProcess": (  # (host process pods must use the host's network)
        spec(hostNetwork=True, securityContext={"windowsOptions": {"hostProcess": True}}),
        {
            ("Forbidden", f"{S}.hostNetwork"),
            ("Forbidden", f"{S}.securityContext.windowsOptions.hostProcess"),
        },
        set(),
    ),
    "allowPrivilegeEscalation true": (
        sc(allowPrivilegeEscalation=True),
        set(),
        {("Forbidden", f"{SC}.allowPrivilegeEscalation")},
    ),
    "runAsNonRoot false": (
        sc(runAsNonRoot=False),
        set(),
        {("Forbidden", f"{SC}.runAsNonRoot")},
    ),
    "runAsNonRoot false on the pod": (
        pod_sc(runAsNonRoot=False),
        set(),
        {("Forbidden", f"{S}.securityContext.runAsNonRoot")},
    ),
    "runAsUser 0": (sc(runAsUser=0), set(), {("Forbidden", f"{SC}.runAsUser")}),
    "runAsUser 1000": (sc(runAsUser=1000), set(), set()),
    "an init container is checked too": (
        lambda p: (
            hardened(p).update(
                initContainers=[container("init", securityContext={"privileged": True})]
            )
            or p
        ),
        {("Forbidden", f"{S}.initContainers[0].securityContext.privileged")},
        {
            ("Required", f"{S}.initContainers[0].securityContext.{f}")
            for f in ("allowPrivilegeEscalation", "seccompProfile.type", "capabilities.drop")
        }
        | {("Required", f"{S}.initContainers[0].securityContext.runAsNonRoot")},
    ),
    "a Windows pod needs no seccomp, escalation or capability settings": (
        lambda p: p.update(os={"name": "windows"}, securityContext={"runAsNonRoot": True}) or p,
        set(),
        set(),
    ),
}


def refused(job: dict[str, Any], level: str) -> Expected:
    return {(e.type.value, e.field) for e in podsecurity.check(job, level)}


@pytest.mark.parametrize("name", list(CASES))
def test_each_control_at_each_level(name: str) -> None:
    change, baseline, restricted = CASES[name]
    job = job_with(change)
    assert refused(job, "privileged") == set()
    assert refused(job, "baseline") == baseline
    assert refused(job, "restricted") == baseline | restricted


def test_every_replica_template_is_checked() -> None:
    job = tf_job(replica("chief"), replica("worker", 2))
    job["spec"]["replicaSpecs"][1]["template"]["spec"]["hostPID"] = True
    assert refused(job, "baseline") == {("Forbidden", "spec.replicaSpecs[1].template.spec.hostPID")}


def test_apparmor_annotations_on_the_template() -> None:
    job = job_with(hardened)
    template = job["spec"]["replicaSpecs"][0]["template"]
    key = "container.apparmor.security.beta.kubernetes.io/tensorflow"
    template["metadata"] = {"annotations": {key: "unconfined"}}
    assert refused(job, "baseline") == {("Forbidden", f"{T}.metadata.annotations[{key}]")}
    for allowed in ("runtime/default", "localhost/my-profile"):
        template["metadata"]["annotations"][key] = allowed
        assert refused(job, "restricted") == set()


def test_the_message_names_the_field_the_level_and_the_label() -> None:
    (error,) = podsecurity.check(job_with(sc(privileged=True)), "baseline")
    assert str(error) == (
        f"{SC}.privileged: Forbidden: privileged containers: the namespace enforces Pod "
        'Security "baseline" (pod-security.kubernetes.io/enforce); unset it'
    )
    (error,) = podsecurity.check(job_with(sc(allowPrivilegeEscalation=None)), "restricted")
    assert str(error) == (
        f"{SC}.allowPrivilegeEscalation: Required value: the namespace enforces Pod Security "
        '"restricted" (pod-security.kubernetes.io/enforce) requires false'
    )


@pytest.mark.parametrize(
    ("labels", "level"),
    [
        (None, "privileged"),
        ({}, "privileged"),
        ({"pod-security.kubernetes.io/warn": "restricted"}, "privileged"),
        ({"pod-security.kubernetes.io/enforce": "baseline"}, "baseline"),
        ({"pod-security.kubernetes.io/enforce": "restricted"}, "restricted"),
        ({"pod-security.kubernetes.io/enforce": "privileged"}, "privileged"),
        ({"pod-security.kubernetes.io/enforce": "Baseline"}, "restricted"),
    ],
)
def test_the_enforced_level_comes_from_the_namespace_label(labels: Any, level: str) -> None:
    assert podsecurity.enforced_level(labels) == level


def test_validate_checks_the_level_on_create_only() -> None:
    job, _ = policies.default(job_with(sc(privileged=True)))
    errors, _ = policies.validate(job, pod_security="baseline")
    assert [e.field for e in errors] == [f"{SC}.privileged"]
    assert policies.validate(job)[0] == []
    # An UPDATE (pausing a job stored before the namespace was labelled) is not refused.
    paused = copy.deepcopy(job)
    paused["spec"]["runMode"] = {"pause": {"enabled": True}}
    assert policies.validate(paused, job, pod_security="restricted")[0] == []
    assert not policies.admit(job_with(lambda p: p), pod_security="restricted").allowed
    assert policies.admit(job_with(hardened), pod_security="restricted").allowed


def test_ill_typed_templates_are_left_to_the_other_rules() -> None:
    job = job_with(hardened)
    pod = job["spec"]["replicaSpecs"][0]["template"]["spec"]
    pod.update(volumes="x", securityContext=[], hostNetwork="yes")
    pod["containers"][0]["securityContext"]["capabilities"] = {"add": "ALL", "drop": ["ALL"]}
    pod["containers"].append("not a container")
    assert refused(job, "restricted") == set()
    assert podsecurity.check("not a job", "restricted") == []
