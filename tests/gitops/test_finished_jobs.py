"""Training jobs run to completion (`gitops.engine.finished`) and objects nobody handed to Git
are not adopted (`gitops.engine.ownership.refuse_untracked`): the pure rules, then both on the
embedded API server with a real git repository and the real reconciler."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gitops.engine import finished, ownership
from gitops.engine.compare import OUT_OF_SYNC, SYNCED, Comparison, ResourceState
from gitops.engine.health import HealthStatus, assess
from gitops.engine.names import REPOSITORY_ANNOTATION
from gitops.engine.pairing import ResourceKey
from gitops.runtime.manager import GitOpsReconciler
from gitops.runtime.reconciler import JOB_REPOSITORIES
from kube import Client, errors, resources
from tests.gitops.conftest import (
    Remote,
    create_repository,
    repository,
    resource_entry,
    tf_job_yaml,
    wait_status,
)
from tests.support.cluster import aeventually

KEY = ResourceKey("batch.tensorstack.dev", "TensorFlowTrainingJob", "team-a", "mnist")
DESIRED: dict[str, Any] = {
    "apiVersion": "batch.tensorstack.dev/v1beta1",
    "kind": "TensorFlowTrainingJob",
    "metadata": {"name": "mnist", "namespace": "team-a", "annotations": {}},
    "spec": {"replicaSpecs": [{"type": "worker", "replicas": 2}]},
}


def _live(phase: str | None, **annotations: str) -> dict[str, Any]:
    obj: dict[str, Any] = copy.deepcopy(DESIRED)
    obj["metadata"]["annotations"] = dict(annotations)
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def _state(
    live: dict[str, Any] | None, status: str = SYNCED, desired: dict[str, Any] | None = None
) -> Comparison:
    body = desired if desired is not None else DESIRED
    message = "" if live is not None else "missing"
    state = ResourceState(KEY, "mnist.yaml", 1, body, live, status, assess(live), message)
    return Comparison((state,), None)


RECORDS = {
    "a job that Succeeded in sync is remembered": (
        _state(_live("Succeeded")),
        {},
        {KEY: finished.Finished("Succeeded", finished.digest(DESIRED))},
    ),
    "a Failed one too": (
        _state(_live("Failed")),
        {},
        {KEY: finished.Finished("Failed", finished.digest(DESIRED))},
    ),
    "a running job is not": (_state(_live("Running")), {}, {}),
    "one finished out of sync with Git is not": (_state(_live("Succeeded"), OUT_OF_SYNC), {}, {}),
    "a deleted one stays remembered under the same manifest": (
        _state(None, OUT_OF_SYNC),
        {KEY: finished.Finished("Succeeded", finished.digest(DESIRED))},
        {KEY: finished.Finished("Succeeded", finished.digest(DESIRED))},
    ),
    "a changed manifest forgets it": (
        _state(None, OUT_OF_SYNC, {**DESIRED, "spec": {"replicaSpecs": []}}),
        {KEY: finished.Finished("Succeeded", finished.digest(DESIRED))},
        {},
    ),
}


@pytest.mark.parametrize(("comparison", "known", "expected"), RECORDS.values(), ids=RECORDS)
def test_what_a_repository_remembers_of_finished_jobs(
    comparison: Comparison,
    known: dict[ResourceKey, finished.Finished],
    expected: dict[ResourceKey, finished.Finished],
) -> None:
    assert finished.record(comparison, known) == expected


def test_a_deleted_finished_job_is_synced_not_recreated_unless_asked() -> None:
    known = {KEY: finished.Finished("Succeeded", finished.digest(DESIRED))}
    missing = _state(None, OUT_OF_SYNC)
    (kept,) = finished.keep_deleted(missing, known, rerun=False).resources
    assert kept.status == SYNCED and kept.health is not None
    assert kept.health.status == HealthStatus.HEALTHY
    assert "finished (Succeeded) and deleted" in kept.message
    assert finished.keep_deleted(missing, known, rerun=True) is missing
    changed = _state(None, OUT_OF_SYNC, {**DESIRED, "spec": {}})
    assert finished.keep_deleted(changed, known, rerun=False).resources[0].status == OUT_OF_SYNC


def test_finished_jobs_go_to_the_status_deleted_first_and_back() -> None:
    other = ResourceKey(KEY.group, KEY.kind, "team-a", "alive")
    records = {
        other: finished.Finished("Failed", "b" * 20),
        KEY: finished.Finished("Succeeded", "a" * 20),
    }
    entries = finished.to_status(records, {other: True, KEY: False})
    assert [e["name"] for e in entries] == ["mnist", "alive"]
    assert finished.from_status({"finishedJobs": [*entries, {"kind": "x"}, "junk"]}) == records


@pytest.mark.parametrize(
    ("annotations", "allowed", "refused"),
    [
        pytest.param({}, False, True, id="untracked: refused"),
        pytest.param({}, True, False, id="untracked, adoptExisting: adopted"),
        pytest.param({REPOSITORY_ANNOTATION: "team-a/old"}, False, False, id="orphaned: adopted"),
    ],
)
def test_an_untracked_object_is_adopted_only_when_allowed(
    annotations: dict[str, str], allowed: bool, refused: bool
) -> None:
    comparison = _state(_live("Running", **annotations), OUT_OF_SYNC)
    (r,) = ownership.refuse_untracked(comparison, allow=allowed).resources
    assert (r.desired is None) is refused
    if refused:
        assert r.error == ownership.UNTRACKED_MESSAGE and r.where == "mnist.yaml:1"


# --- on the API server ------------------------------------------------------------------------

TF = resources.TFJOBS


async def _set_phase(kclient: Client, namespace: str, name: str, phase: str) -> None:
    job = await kclient.get(TF, name, namespace)
    job["status"] = {**(job.get("status") or {}), "phase": phase}
    await kclient.replace(TF, job, subresource="status")


async def test_a_finished_job_deleted_by_hand_stays_deleted_until_its_manifest_changes(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    first = remote.commit("one job", {"a.yaml": tf_job_yaml("a")})
    automated = {"prune": True, "selfHeal": True}
    await create_repository(kclient, repository(namespace, remote.url, automated=automated))
    await wait_status(kclient, namespace, lambda st: st.get("sync", {}).get("revision") == first)
    # The job controller is not running here: the phase is written as it would write it.
    await _set_phase(kclient, namespace, "a", "Succeeded")

    async def remembered() -> list[dict[str, Any]] | bool:
        obj = await kclient.get(JOB_REPOSITORIES, "jobs", namespace)
        entries: list[dict[str, Any]] = obj.get("status", {}).get("finishedJobs") or []
        return entries or False

    (entry,) = await aeventually(remembered, timeout=20)
    assert (entry["name"], entry["phase"]) == ("a", "Succeeded")
    await kclient.delete(TF, "a", namespace)

    async def kept_deleted() -> dict[str, Any] | bool:
        st = (await kclient.get(JOB_REPOSITORIES, "jobs", namespace))["status"]
        a = resource_entry(st, "a")
        return st if "finished (Succeeded) and deleted" in a.get("message", "") else False

    st = await aeventually(kept_deleted, timeout=20)
    assert resource_entry(st, "a")["status"] == "Synced"
    # Several more rounds (a push each) and the job is still not there.
    for i in range(3):
        later = remote.commit(f"unrelated {i}", {f"cm{i}.yaml": _configmap(f"c{i}")})
        await wait_status(kclient, namespace, lambda st, sha=later: st["sync"]["revision"] == sha)
        with pytest.raises(errors.NotFound):
            await kclient.get(TF, "a", namespace)
    # A changed manifest is a new run.
    remote.commit("two workers", {"a.yaml": tf_job_yaml("a", workers=2)})

    async def recreated() -> bool:
        try:
            job = await kclient.get(TF, "a", namespace)
        except errors.NotFound:
            return False
        return bool(job["spec"]["replicaSpecs"][1]["replicas"] == 2)

    assert await aeventually(recreated, timeout=20)


async def test_an_object_made_by_kubectl_is_not_taken_over(
    gitops: GitOpsReconciler, kclient: Client, namespace: str, remote: Remote
) -> None:
    by_hand = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": namespace},
        "data": {"owner": "a person"},
    }
    await kclient.create(resources.CONFIGMAPS, by_hand)
    sha = remote.commit("settings", {"cm.yaml": _configmap("settings")})
    automated = {"selfHeal": True}
    await create_repository(kclient, repository(namespace, remote.url, automated=automated))
    st = await wait_status(kclient, namespace, lambda st: st.get("sync", {}).get("revision") == sha)
    entry = resource_entry(st, "settings")
    assert entry["status"] == "OutOfSync" and "not taken over" in entry["message"]
    assert (entry["file"], entry["line"]) == ("cm.yaml", 1)
    live = await kclient.get(resources.CONFIGMAPS, "settings", namespace)
    assert live["data"] == {"owner": "a person"}
    # Allowed, it is adopted (self-heal: the next round applies what differs).
    await kclient.patch(
        JOB_REPOSITORIES,
        "jobs",
        {"spec": {"syncPolicy": {"adoptExisting": True}}},
        namespace,
        patch_type="merge",
    )

    async def adopted() -> bool:
        cm = await kclient.get(resources.CONFIGMAPS, "settings", namespace)
        tracked = ownership.tracking(cm).repository == f"{namespace}/jobs"
        # Server-side apply: Git's fields are applied; the one kubectl set stays its own.
        return tracked and cm["data"] == {"owner": "a person", "k": "settings"}

    assert await aeventually(adopted, timeout=20)


def _configmap(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  k: {name}\n"
