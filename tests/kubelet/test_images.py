"""Images stand for local Python environments (`trainops up --image IMAGE=ENV_DIR`)."""

from __future__ import annotations

import asyncio
import stat
import time
from pathlib import Path

import pytest

from kube import resources
from localcluster.apiserver import ApiServerConfig, start_apiserver
from localcluster.kubelet import images
from localcluster.kubelet.images import ImageEnv
from localcluster.kubelet.local import start_node
from tests.kubelet.conftest import kill_strays

TF = ImageEnv("tensorflow/tensorflow:*", "/envs/tf")
ANY_PY = ImageEnv("python*", "/envs/py")

PARSED = {
    "pattern and directory": ("tensorflow/*=/envs/tf", ImageEnv("tensorflow/*", "/envs/tf")),
    "an = in the directory": ("x=/a=b", ImageEnv("x", "/a=b")),
    "no =": ("python", "'python' is not IMAGE=ENV_DIR"),
    "no directory": ("python=", "'python=' is not IMAGE=ENV_DIR"),
    "no pattern": ("=/envs/py", "'=/envs/py' is not IMAGE=ENV_DIR"),
}


@pytest.mark.parametrize(("text", "expected"), PARSED.values(), ids=PARSED.keys())
def test_an_image_mapping_is_parsed_or_refused(text, expected) -> None:
    got = images.parse(text)
    if isinstance(expected, str):
        assert isinstance(got, str) and got.startswith(expected)
    else:
        assert got == expected


MATCHES = {
    "a glob on the tag": ("tensorflow/tensorflow:2.11.0", TF),
    "the first match wins": ("python:3.11", ANY_PY),
    "no match": ("busybox", None),
    "whole reference, case-sensitive": ("docker.io/tensorflow/tensorflow:2", None),
}


@pytest.mark.parametrize(("image", "expected"), MATCHES.values(), ids=MATCHES.keys())
def test_the_first_matching_pattern_picks_the_environment(image, expected) -> None:
    later = ImageEnv("python:3*", "/envs/py3")  # matches too, but comes after ANY_PY
    assert images.match(image, [TF, ANY_PY, later]) == expected


def test_the_environment_comes_first_on_path() -> None:
    env = images.environment({"PATH": "/usr/bin", "PYTHONHOME": "/x", "HOME": "/h"}, TF)
    assert env == {"PATH": "/envs/tf/bin:/usr/bin", "VIRTUAL_ENV": "/envs/tf", "HOME": "/h"}
    assert images.environment({"PATH": "/usr/bin"}, None) == {"PATH": "/usr/bin"}
    assert images.environment({}, TF)["PATH"] == "/envs/tf/bin"


def test_the_pulled_event_says_what_ran() -> None:
    assert "Python environment /envs/tf" in images.pulled_message("tensorflow/tensorflow:2", TF)
    assert "with trainops up's PATH" in images.pulled_message("busybox", None)


async def test_a_mapped_image_runs_with_its_environment(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    (env_dir / "bin").mkdir(parents=True)
    tool = env_dir / "bin" / "which-env"
    tool.write_text('#!/bin/sh\necho "ran from $VIRTUAL_ENV"\n')
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    data = tmp_path / "data"
    data.mkdir()
    api = await start_apiserver(ApiServerConfig(data_dir=data))
    node = await start_node(
        api.kubeconfig, data, images=(ImageEnv("train/*", str(env_dir)),), pod_network=False
    )
    kube = node.kube
    try:
        pod = {
            "metadata": {"name": "mapped"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "train/gpu:1", "command": ["which-env"]}],
            },
        }
        created = await kube.create_pod("default", pod)
        uid = created["metadata"]["uid"]
        deadline = time.monotonic() + 20
        while True:
            got = await kube.get_pod("default", "mapped")
            if (got or {}).get("status", {}).get("phase") == "Succeeded":
                break
            assert time.monotonic() < deadline, got
            await asyncio.sleep(0.05)
        log = node.kubelet.runtime.log_path(uid, "c", 0).read_text()
        assert f"stdout F ran from {env_dir}" in log
        while True:  # events are recorded in the background, in order
            events = await kube.client.list(resources.EVENTS, namespace="default")
            pulled = [e["message"] for e in events["items"] if e["reason"] == "Pulled"]
            if pulled or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert len(pulled) == 1
        (pulled,) = pulled
        assert pulled == (
            f'Container image "train/gpu:1" is not pulled: runs with the Python environment '
            f"{env_dir} (--image train/*={env_dir})"
        )
    finally:
        await node.stop()
        await api.stop()
        kill_strays(data)
