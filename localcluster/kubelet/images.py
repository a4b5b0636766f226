"""Which Python environment a container's image stands for (pure).

Images are never pulled: a container runs as a local process. `trainops up --image
PATTERN=ENV_DIR` (repeatable) says which local environment (a virtualenv, a conda env: any
directory with a `bin/`) plays an image: the first pattern (shell-style glob, `fnmatch`, matched
against the whole image reference) that matches wins, and the container's process then finds
that environment's `bin/` first on its PATH (`python`, `pip`, the env's scripts), with
`VIRTUAL_ENV` set, as if the image's own PATH. The container's own `env` still wins. An image
no pattern matches runs with `trainops up`'s PATH. The `Pulled` event says which one ran.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["ImageEnv", "environment", "match", "parse", "pulled_message"]


@dataclass(frozen=True)
class ImageEnv:
    pattern: str  # e.g. `tensorflow/tensorflow:*`
    env_dir: str  # absolute path of the environment (has bin/)


def parse(text: str) -> ImageEnv | str:
    """`PATTERN=ENV_DIR` (the directory is not checked here), or what is wrong with it."""
    pattern, sep, env_dir = text.partition("=")
    if not sep or not pattern.strip() or not env_dir.strip():
        return f"{text!r} is not IMAGE=ENV_DIR (e.g. 'tensorflow/tensorflow:*=~/venvs/tf')"
    return ImageEnv(pattern.strip(), env_dir.strip())


def match(image: str, mappings: Sequence[ImageEnv]) -> ImageEnv | None:
    """The first mapping whose pattern matches `image` (case-sensitive), or None."""
    return next((m for m in mappings if fnmatch.fnmatchcase(image, m.pattern)), None)


def environment(inherited: Mapping[str, str], mapping: ImageEnv | None) -> dict[str, str]:
    """The inherited environment with the mapped environment's bin/ first on PATH."""
    env = dict(inherited)
    if mapping is None:
        return env
    bin_dir = mapping.env_dir.rstrip("/") + "/bin"
    env["PATH"] = bin_dir + (":" + env["PATH"] if env.get("PATH") else "")
    env["VIRTUAL_ENV"] = mapping.env_dir
    env.pop("PYTHONHOME", None)  # would point the env's python at another installation
    return env


def pulled_message(image: str, mapping: ImageEnv | None) -> str:
    """The `Pulled` event: the image is not pulled, and what runs instead."""
    if mapping is None:
        return (
            f'Container image "{image}" is not pulled: containers run as local processes '
            "(with trainops up's PATH; map images with --image IMAGE=ENV_DIR)"
        )
    return (
        f'Container image "{image}" is not pulled: runs with the Python environment '
        f"{mapping.env_dir} (--image {mapping.pattern}={mapping.env_dir})"
    )
