"""A Git host inside the kind cluster, for the GitOps scenarios of tests/e2e.

Runs in a pod of the product image (its Python has aiohttp, and git is there for GitOps), from
a ConfigMap holding this file and tests/support/githttp.py side by side: no other image, no
registry. Every directory under SEED (one mounted ConfigMap each) becomes the bare repository
GIT_ROOT/<directory>.git with one commit of its files; then `git http-backend` serves them all
over smart HTTP on PORT (`http://<service>:<port>/<directory>.git`).

    python3 gitserver.py SEED GIT_ROOT PORT
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from githttp import serve_git_http  # beside this file in the pod

GIT = [
    "git",
    "-c",
    "user.name=trainops e2e",
    "-c",
    "user.email=e2e@trainops.invalid",
    "-c",
    "init.defaultBranch=main",
]


def seed(seed_root: Path, git_root: Path) -> list[str]:
    made = []
    for source in sorted(seed_root.iterdir()):
        # A mounted ConfigMap's own entries (..data, ..2026_…) start with dots.
        if source.name.startswith(".") or not source.is_dir():
            continue
        bare = git_root / f"{source.name}.git"
        if bare.exists():
            # The container restarted (its node did, in the lost-node test): the emptyDir kept
            # the repository and what the tests pushed to it since.
            continue
        work = Path(tempfile.mkdtemp())
        for item in source.iterdir():
            if not item.name.startswith(".") and item.is_file():
                shutil.copyfile(item, work / item.name)
        for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", f"seed {source.name}"]):
            subprocess.run([*GIT, "-C", str(work), *args], check=True, timeout=60)
        subprocess.run(
            [*GIT, "clone", "-q", "--bare", str(work), str(bare)], check=True, timeout=60
        )
        shutil.rmtree(work)
        made.append(bare.name)
    return made


async def serve(git_root: Path, port: int) -> None:
    async with serve_git_http(git_root, host="0.0.0.0", port=port) as server:
        print(f"serving {server.base}", flush=True)
        await asyncio.Event().wait()


def main() -> None:
    seed_root, git_root, port = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    print("seeded", " ".join(seed(seed_root, git_root)), flush=True)
    asyncio.run(serve(git_root, port))


if __name__ == "__main__":
    main()
