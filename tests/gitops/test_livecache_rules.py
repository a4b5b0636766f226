"""The tracking index and the digests of `gitops.runtime.livecache` (pure), table-tested."""

from __future__ import annotations

from typing import Any

import pytest

from gitops.runtime import livecache

UID, OTHER = "6f1c2d4e-0000-4000-8000-000000000001", "6f1c2d4e-0000-4000-8000-000000000002"


def obj(
    name: str = "a",
    rv: str = "1",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    uid: str = "u-a",
) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tensorstack.dev/v1beta1",
        "kind": "TensorFlowTrainingJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": rv,
            "labels": labels or {},
            "annotations": annotations or {},
        },
    }


LABEL = {"gitops.trainops.dev/repository-uid": UID}
ANNOTATED = {"gitops.trainops.dev/repository": "team-a/jobs"}
ANNOTATED_UID = {**ANNOTATED, "gitops.trainops.dev/repository-uid": UID}

TRACKING = {
    "the uid label": (obj(labels=LABEL, annotations=ANNOTATED_UID), [UID]),
    "the uid annotation alone (applied before the label)": (
        obj(annotations=ANNOTATED_UID),
        [UID],
    ),
    "label and annotation disagree: both": (
        obj(labels=LABEL, annotations={"gitops.trainops.dev/repository-uid": OTHER}),
        [UID, OTHER],
    ),
    "the name alone (applied before uids)": (
        obj(annotations=ANNOTATED),
        ["repository:team-a/jobs"],
    ),
    "untracked": (obj(labels={"app": "x"}), []),
    "no metadata at all": ({"kind": "ConfigMap"}, []),
    "empty values count as none": (
        obj(labels={"gitops.trainops.dev/repository-uid": ""}, annotations=ANNOTATED),
        ["repository:team-a/jobs"],
    ),
}


@pytest.mark.parametrize(("live", "ids"), TRACKING.values(), ids=TRACKING.keys())
def test_an_object_is_indexed_under_its_tracking_ids(live: dict[str, Any], ids: list[str]) -> None:
    assert livecache.tracking_ids(live) == ids


def test_a_name_id_can_never_be_mistaken_for_a_uid() -> None:
    assert livecache.name_id("team-a/jobs") == "repository:team-a/jobs"
    assert livecache.name_id("team-a/jobs") not in (UID, "team-a/jobs")


def test_an_object_digest_changes_with_its_resource_version_and_uid_only() -> None:
    base = livecache.object_digest(obj())
    assert livecache.object_digest(obj(labels=LABEL)) == base  # labels are not part of it
    assert livecache.object_digest(obj(rv="2")) != base
    assert livecache.object_digest(obj(uid="u-b")) != base  # deleted and created again
    assert livecache.object_digest(obj(name="b")) != base
    assert 0 <= base <= livecache.MASK


def test_digests_sum_per_tracking_id_in_any_order() -> None:
    a = obj("a", labels=LABEL)
    b = obj("b", annotations=ANNOTATED)
    c = obj("c", labels={"gitops.trainops.dev/repository-uid": OTHER})
    ids = [UID, livecache.name_id("team-a/jobs")]
    forward = livecache.digests([a, b, c], ids)
    assert forward == livecache.digests([c, b, a], ids)
    assert forward == {
        UID: livecache.object_digest(a),
        "repository:team-a/jobs": livecache.object_digest(b),
    }
    assert livecache.digests([], ids) == dict.fromkeys(ids, 0)


def test_replaced_gives_what_the_cache_holds_once_the_outcomes_arrive() -> None:
    """After a sync: the cache still has the old versions; the outcomes are the new ones."""
    ids = [UID, livecache.name_id("team-a/jobs")]
    kept = obj("kept", labels=LABEL)
    before_relabel = obj("adopted", "3", annotations=ANNOTATED)
    after_relabel = obj("adopted", "4", labels=LABEL, annotations=ANNOTATED_UID)
    pruned = obj("pruned", labels=LABEL)
    created = obj("created", "9", labels=LABEL)
    cache_now = livecache.digests([kept, before_relabel, pruned], ids)
    expected = livecache.replaced(
        cache_now, [(before_relabel, after_relabel), (pruned, None), (None, created)]
    )
    assert expected == livecache.digests([kept, after_relabel, created], ids)
    # Unchanged applies (same version) change nothing.
    assert livecache.replaced(cache_now, [(kept, kept)]) == cache_now
