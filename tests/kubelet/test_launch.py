"""A container's process: argv, environment layering, working directory (pure)."""

from __future__ import annotations

from localcluster.kubelet.expansion import NodeFacts
from localcluster.kubelet.launch import NO_COMMAND, Launch, LaunchError, plan_launch, references

POD = {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": {}}
INHERITED = {"PATH": "/usr/bin", "HOME": "/home/me"}


def plan(container: dict, mounts: list[str] | None = None) -> Launch | LaunchError:
    return plan_launch(
        POD,
        container,
        config_maps={},
        secrets={},
        node=NodeFacts(),
        root="/data/pods/u/root",
        mount_paths=mounts or [],
        inherited_env=INHERITED,
    )


def test_command_args_env_and_directory() -> None:
    result = plan(
        {
            "name": "c",
            "command": ["python", "/scripts/train.py"],
            "args": ["--lr=$(LR)", "/scripts"],
            "env": [{"name": "LR", "value": "0.1"}, {"name": "HOME", "value": "/root"}],
            "workingDir": "/workspace/",
        },
        mounts=["/scripts"],
    )
    assert result == Launch(
        argv=[
            "python",
            "/data/pods/u/root/scripts/train.py",
            "--lr=0.1",
            "/data/pods/u/root/scripts",
        ],
        env={
            "PATH": "/usr/bin",
            "HOME": "/root",
            "HOSTNAME": "p",
            "TRAINOPS_POD_ROOT": "/data/pods/u/root",
            "TMPDIR": "/data/pods/u/root/tmp",
            "LR": "0.1",
        },
        cwd="/data/pods/u/root/workspace",
        termination_path="/data/pods/u/root/dev/termination-log",
    )


def test_args_alone_are_the_command_line() -> None:
    result = plan({"name": "c", "args": ["sh", "-c", "echo hi"]})
    assert isinstance(result, Launch) and result.argv == ["sh", "-c", "echo hi"]
    assert result.cwd == "/data/pods/u/root"


def test_neither_command_nor_args_cannot_start() -> None:
    assert plan({"name": "c", "image": "nginx"}) == LaunchError("CreateContainerError", NO_COMMAND)


def test_references_name_what_volumes_and_env_read() -> None:
    pod = {
        "spec": {
            "volumes": [
                {"name": "a", "configMap": {"name": "cm1"}},
                {"name": "b", "secret": {"secretName": "s1"}},
            ]
        }
    }
    container = {
        "envFrom": [{"configMapRef": {"name": "cm2"}}],
        "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s2", "key": "k"}}}],
    }
    assert references(pod) == ({"cm1"}, {"s1"})
    assert references(pod, container) == ({"cm2"}, {"s2"})
