"""Large Tables are encoded row by row around cached object encodings: the bytes must say
exactly what `tables.to_table` says."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from localcluster.api.registry import BUILTINS
from localcluster.http.handlers import table_bytes
from localcluster.http.tables import to_table
from localcluster.store.records import Record, dumps

POD = next(i for i in BUILTINS if i.kind == "Pod")
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _pod(name: str, **status: object) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsV1": {}}],
        },
        "spec": {"containers": [{"name": "c", "image": "i"}], "nodeName": "n"},
        "status": {"phase": "Running", **status},
    }


@pytest.mark.parametrize("include", ["Metadata", "Object", "None", ""])
@pytest.mark.parametrize("count", [0, 1, 3])
def test_row_by_row_encoding_equals_to_table(include: str, count: int) -> None:
    objs = [_pod(f"p{i}", podIP=f"10.0.0.{i}") for i in range(count)]
    records = [Record(o, dumps(o)) for o in objs]
    meta = {"resourceVersion": "7"}
    encoded = json.loads(table_bytes(POD, records, include, meta, NOW))
    expected = to_table(POD, objs, include_object=include or "Metadata", list_meta=meta, now=NOW)
    assert encoded == expected
