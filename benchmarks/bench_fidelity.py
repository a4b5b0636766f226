"""Timings of the API server's fidelity modules (run by hand: `python benchmarks/bench_fidelity.py`).

Measures what a large `kubectl get`, the first `kubectl apply`, a CRD install and a custom
resource write cost on this machine: Table rendering of 10k pods, OpenAPI documents (cold and
cached), server-side apply of the TensorFlowTrainingJob CRD, CRD validation, and preparing a CR
with CEL rules. Results are recorded in docs/LOCALCLUSTER-FIDELITY.md.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from localcluster.api.types import ResourceInfo
from localcluster.http import tables
from localcluster.schema import crdschema, openapi
from localcluster.write import patching

REPO = Path(__file__).resolve().parents[1]
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def timed(label: str, fn: Callable[[], Any], repeat: int = 5) -> None:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    print(
        f"{label:<48} first {runs[0] * 1000:8.1f} ms   median {statistics.median(runs) * 1000:8.1f} ms"
    )


def main() -> None:
    pod = ResourceInfo("", "v1", "Pod", "pods", "pod", True, "PodList", subresources=("status",))
    pods = [
        {
            "metadata": {"name": f"p{i}", "namespace": "d",
                         "creationTimestamp": f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}Z"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": "n"},
            "status": {"phase": "Running", "podIP": "127.0.0.1", "containerStatuses": [
                {"ready": True, "restartCount": 0, "state": {"running": {}}}]},
        }
        for i in range(10_000)
    ]  # fmt: skip
    timed("Table of 10k pods", lambda: tables.to_table(pod, pods))

    crd_path = REPO / "deploy" / "crds" / "batch.tensorstack.dev_tensorflowtrainingjobs.yaml"
    crd = next(d for d in yaml.load_all(crd_path.read_text(), Loader=LOADER) if d)
    version = crd["spec"]["versions"][0]
    crd["metadata"].update(uid="u", resourceVersion="1")
    job = ResourceInfo(
        crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"],
        crd["spec"]["names"]["plural"], crd["spec"]["names"]["singular"], True,
        crd=crd, crd_version=version, subresources=("status",),
    )  # fmt: skip
    crd_info = ResourceInfo(
        "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions",
        "customresourcedefinition", False, subresources=("status",),
    )  # fmt: skip
    served = [pod, job, crd_info]
    timed(
        "OpenAPI v3 index (first call builds documents)", lambda: openapi.openapi_v3_index(served)
    )
    timed("OpenAPI v3 document for the job group (cached)",
          lambda: openapi.openapi_v3_document("batch.tensorstack.dev/v1beta1", served))  # fmt: skip

    applied = next(d for d in yaml.load_all(crd_path.read_text(), Loader=LOADER) if d)
    live = patching.server_side_apply(crd_info, None, applied, manager="kubectl", force=False,
                                      now="2026-01-01T00:00:00Z")  # fmt: skip
    timed(
        "server-side apply of the CRD (create)",
        lambda: patching.server_side_apply(
            crd_info, None, applied, manager="kubectl", force=False, now="2026-01-01T00:00:00Z"
        ),
    )
    timed(
        "server-side apply of the CRD (no-op re-apply)",
        lambda: patching.server_side_apply(
            crd_info, live, applied, manager="kubectl", force=False, now="2026-01-01T00:00:01Z"
        ),
    )
    timed("validate_crd (CEL compiled on first call)", lambda: crdschema.validate_crd(applied))

    example = next(
        d for d in yaml.load_all((REPO / "examples" / "tensorflow-mnist.yaml").read_text(),
                                 Loader=LOADER) if d
    )  # fmt: skip
    timed(
        "prepare a TensorFlowTrainingJob (schema + CEL)",
        lambda: crdschema.prepare_custom_object(job, example, None, field_validation="Strict"),
    )


if __name__ == "__main__":
    main()
