"""How fast the process kubelet turns pods into processes (run by hand, not in CI).

Starts the embedded API server and a local node in-process, then creates N pods that each print
one line and exit, and measures: create → Running/Succeeded observed, and the whole batch.
Usage: .venv/bin/python benchmarks/kubelet_pods.py [N]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kube import resources
from localcluster.apiserver import ApiServerConfig, start_apiserver
from localcluster.kubelet.local import start_node


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        t0 = time.monotonic()
        api = await start_apiserver(ApiServerConfig(data_dir=data))
        node = await start_node(api.kubeconfig, data)
        print(f"API server + node started in {time.monotonic() - t0:.2f}s")
        kube = node.kube
        created: dict[str, float] = {}
        done: dict[str, float] = {}
        _items, rv = await kube.list_pods()

        async def watch() -> None:
            async for _kind, pod in kube.watch(resources.PODS, rv):
                name = pod["metadata"]["name"]
                if (pod.get("status") or {}).get("phase") == "Succeeded" and name not in done:
                    done[name] = time.monotonic()
                    if len(done) == n:
                        return

        watcher = asyncio.create_task(watch())
        start = time.monotonic()
        for i in range(n):
            name = f"bench-{i}"
            body = {
                "metadata": {"name": name},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["echo", name]}],
                },
            }
            created[name] = time.monotonic()
            await kube.create_pod("default", body)
        await asyncio.wait_for(watcher, 120)
        total = time.monotonic() - start
        lat = sorted(done[k] - created[k] for k in created)
        print(
            f"{n} pods: all Succeeded after {total:.2f}s; create→Succeeded median "
            f"{statistics.median(lat) * 1000:.0f} ms, p90 {lat[int(0.9 * (n - 1))] * 1000:.0f} ms, "
            f"max {lat[-1] * 1000:.0f} ms"
        )
        t1 = time.monotonic()
        await node.stop()
        t2 = time.monotonic()
        await api.stop()
        print(f"node stopped in {t2 - t1:.2f}s, API server in {time.monotonic() - t2:.2f}s")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 20))
