"""Storage: durability across restarts, the resourceVersion sequence, concurrent writers."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest

from localcluster.store import storage
from localcluster.store.storage import Storage
from tests.localcluster._http import Http
from tests.support.cluster import BackgroundApiServer, Cluster, eventually


def _cluster(embedded: BackgroundApiServer, data_dir: Path) -> Cluster:
    srv = embedded.server
    return Cluster(srv.kubeconfig, srv.url, srv.token, srv.ca_file, data_dir, embedded)


def test_a_restart_keeps_objects_versions_credentials_and_port(tmp_path: Path) -> None:
    first = BackgroundApiServer(tmp_path)
    try:
        http = Http(_cluster(first, tmp_path))
        # The root CA's publisher writes in the background; let it, before "kept", so that the
        # watch below from kept's version sees only what this test wrote after it.
        eventually(
            lambda: http.get("/api/v1/namespaces/default/configmaps/kube-root-ca.crt").status == 200
        )
        created = http.post(
            "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "kept"}, "data": {"a": "1"}},
        ).json()
        kubeconfig = (tmp_path / "kubeconfig").read_text()
        url, token = first.server.url, first.server.token
    finally:
        first.stop()
    second = BackgroundApiServer(tmp_path)
    try:
        assert (second.server.url, second.server.token) == (url, token)
        assert (tmp_path / "kubeconfig").read_text() == kubeconfig
        http = Http(_cluster(second, tmp_path))
        kept = http.get("/api/v1/namespaces/default/configmaps/kept").json()
        assert kept == created
        later = http.post(
            "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "later"}}
        ).json()
        assert int(later["metadata"]["resourceVersion"]) > int(
            created["metadata"]["resourceVersion"]
        )
        rv = created["metadata"]["resourceVersion"]
        events = http.get(
            f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        ).lines()
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
            ("ADDED", "later")
        ]
        if shutil.which("kubectl"):
            out = subprocess.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(tmp_path / "kubeconfig"),
                    "get",
                    "configmap",
                    "kept",
                    "-o",
                    "name",
                ],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.stdout.strip() == "configmap/kept", out.stderr
    finally:
        second.stop()


async def test_concurrent_compare_and_swap_updates_let_exactly_one_win(tmp_path: Path) -> None:
    store = await Storage.open(tmp_path / "db")
    try:
        base = await store.create("/configmaps", {"metadata": {"name": "c", "namespace": "n"}})
        rv = base["metadata"]["resourceVersion"]

        async def attempt(i: int) -> bool:
            try:
                await store.update("/configmaps", {**base, "data": {"i": str(i)}}, expect_rv=rv)
                return True
            except storage.Conflict:
                return False

        results = await asyncio.gather(*(attempt(i) for i in range(20)))
        assert results.count(True) == 1
        assert store.resource_version == int(rv) + 1
    finally:
        await store.close()


async def test_the_event_log_survives_reopening_and_refuses_compacted_versions(
    tmp_path: Path,
) -> None:
    store = await Storage.open(tmp_path / "db", history=3)
    for i in range(5):
        await store.create("/configmaps", {"metadata": {"name": f"c{i}", "namespace": "n"}})
    await store.close()
    store = await Storage.open(tmp_path / "db", history=3)
    try:
        assert store.resource_version == 5
        assert [e.name for e in store.events_after(2)] == ["c2", "c3", "c4"]
        with pytest.raises(storage.TooOld):
            store.events_after(1)
        assert [r.obj["metadata"]["name"] for r in store.records("/configmaps", "n")] == [
            f"c{i}" for i in range(5)
        ]
    finally:
        await store.close()


async def test_writes_are_rejected_for_duplicates_and_missing_keys(tmp_path: Path) -> None:
    store = await Storage.open(tmp_path / "db")
    try:
        obj = {"metadata": {"name": "x", "namespace": "n"}}
        await store.create("/configmaps", obj)
        with pytest.raises(storage.Exists):
            await store.create("/configmaps", obj)
        with pytest.raises(storage.Missing):
            await store.delete("/configmaps", "n", "nope")
    finally:
        await store.close()


async def test_concurrent_writes_get_distinct_contiguous_versions_and_their_own_errors(
    tmp_path: Path,
) -> None:
    store = await Storage.open(tmp_path / "db")
    seen: list[int] = []
    store.listeners.append(lambda event: seen.append(event.rv))
    try:
        results = await asyncio.gather(
            *(
                store.create("/configmaps", {"metadata": {"name": f"c{i % 5}", "namespace": "n"}})
                for i in range(10)
            ),
            return_exceptions=True,
        )
        created = [r for r in results if isinstance(r, dict)]
        assert len(created) == 5
        assert all(isinstance(r, storage.Exists) for r in results if not isinstance(r, dict))
        assert sorted(int(r["metadata"]["resourceVersion"]) for r in created) == [1, 2, 3, 4, 5]
        assert seen == [1, 2, 3, 4, 5]
    finally:
        await store.close()


async def test_a_write_that_is_not_json_fails_alone(tmp_path: Path) -> None:
    import datetime

    store = await Storage.open(tmp_path / "db")
    try:
        bad = store.create(
            "/configmaps",
            {"metadata": {"name": "bad", "namespace": "n"}, "when": datetime.date(2026, 1, 1)},
        )
        good = store.create("/configmaps", {"metadata": {"name": "good", "namespace": "n"}})
        results = await asyncio.gather(bad, good, return_exceptions=True)
        assert isinstance(results[0], TypeError)
        assert isinstance(results[1], dict) and results[1]["metadata"]["resourceVersion"] == "1"
    finally:
        await store.close()
