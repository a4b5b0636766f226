"""The dashboard's pure view functions on fixtures (tests/fixtures/dashboard/): badges, ages,
the deployed commit, filters, resources with file:line and diff links, the job page's
replicas, budgets, deadline, timeline and events. `now` is fixed: no clock in these tests."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboard import format as fmt
from dashboard import jobviews, views
from gitops.api.show import job_row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dashboard"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def load(name: str) -> Any:
    return yaml.safe_load((FIXTURES / name).read_text())


# --- badges and formatting ------------------------------------------------------------------

SYNC_BADGES = [
    ("Synced", "Synced", "ok", "check"),
    ("OutOfSync", "OutOfSync", "warn", "arrow-up"),
    ("Unknown", "Unknown", "unknown", "question"),
    (None, "Unknown", "unknown", "question"),
    ("<b>", "Unknown", "unknown", "question"),
]
HEALTH_BADGES = [
    ("Healthy", "ok", "heart"),
    ("Progressing", "running", "spinner"),
    ("Degraded", "failed", "broken-heart"),
    ("Suspended", "suspended", "pause"),
    ("Missing", "warn", "ghost"),
    ("Unknown", "unknown", "question"),
]


@pytest.mark.parametrize(("given", "status", "tone", "icon"), SYNC_BADGES)
def test_a_sync_status_gets_argo_cds_tone_and_icon_and_anything_else_reads_unknown(
    given: Any, status: str, tone: str, icon: str
) -> None:
    assert fmt.sync_badge(given) == {"status": status, "tone": tone, "icon": icon}


@pytest.mark.parametrize(("status", "tone", "icon"), HEALTH_BADGES)
def test_each_health_status_has_its_own_tone_and_icon(status: str, tone: str, icon: str) -> None:
    assert fmt.health_badge(status) == {"status": status, "tone": tone, "icon": icon}


def test_an_unknown_health_or_a_missing_phase_reads_unknown() -> None:
    assert fmt.health_badge("Exploded")["status"] == "Unknown"
    assert fmt.phase_badge(None)["status"] == "Unknown"
    assert fmt.phase_badge("Paused")["tone"] == "suspended"


AGES = [
    ("2026-01-01T11:59:59Z", "1s", "1s ago"),
    ("2026-01-01T11:59:15Z", "45s", "45s ago"),
    ("2026-01-01T11:48:00Z", "12m", "12m ago"),
    ("2026-01-01T08:56:00Z", "3h4m", "3h4m ago"),
    ("2025-12-31T00:00:00Z", "36h", "36h ago"),
    ("2025-12-29T00:00:00Z", "3d12h", "3d12h ago"),
    ("2026-01-01T12:00:00Z", "0s", "just now"),
    ("2026-01-01T12:00:30Z", "0s", "just now"),  # a clock a little ahead: never negative
    ("not a time", "", ""),
    (None, "", ""),
]


@pytest.mark.parametrize(("when", "age", "ago"), AGES)
def test_ages_are_spelled_like_kubectl(when: Any, age: str, ago: str) -> None:
    assert fmt.age(when, NOW) == age
    assert fmt.ago(when, NOW) == ago


def test_a_short_sha_is_seven_characters() -> None:
    assert fmt.short_sha("0123456789abcdef") == "0123456"
    assert fmt.short_sha(None) == ""


# --- front page -----------------------------------------------------------------------------


def test_a_synced_repository_row_shows_the_deployed_commit_and_the_last_sync() -> None:
    row = views.repository_row(load("repository-synced.yaml"), NOW)
    assert row["key"] == "default/jobs"
    assert row["path"] == "/repositories/default/jobs"
    assert (row["url"], row["target"], row["source_path"]) == (
        "https://github.com/org/jobs.git",
        "main",
        "jobs",
    )
    assert row["sync"]["status"] == "Synced"
    assert row["health"]["status"] == "Healthy"
    assert row["revision"] == "0123456789abcdef0123456789abcdef01234567"
    assert row["short_revision"] == "0123456"
    assert (row["commit_message"], row["commit_author"]) == ("add mnist", "Ada <ada@example.com>")
    assert row["commit_time"] == "60s ago"
    assert (row["last_sync"], row["last_sync_time"]) == ("Succeeded", "60s ago")
    assert row["automated"] is True


def test_a_failed_sync_names_the_first_denied_file_and_line_and_counts_the_others() -> None:
    obj = load("repository-denied.yaml")
    row = views.repository_row(obj, NOW)
    assert row["last_sync"] == "Failed"
    assert row["denials"] is not None
    assert (row["denials"]["source"], row["denials"]["more"]) == ("bad/too-small.yaml:20", 0)
    assert row["denials"]["message"].startswith('admission webhook "validate.trainingjobs')
    denied = obj["status"]["resources"][0]
    obj["status"]["resources"] += [
        denied | {"name": "n2", "file": "bad/other.yaml", "line": 3},
        denied | {"name": "n3", "file": "bad/third.yaml", "line": 7},
    ]
    more = views.repository_row(obj, NOW)["denials"]
    assert (more["source"], more["more"]) == ("bad/too-small.yaml:20", 2)
    assert views.repository_row(load("repository-synced.yaml"), NOW)["denials"] is None


def test_a_repository_never_synced_has_no_commit_and_targets_head() -> None:
    row = views.repository_row(load("repository-comparison-error.yaml"), NOW)
    assert row["sync"]["status"] == "Unknown"
    assert row["target"] == "nope"
    assert (row["commit_message"], row["short_revision"], row["last_sync"]) == ("", "", "")
    bare = views.repository_row({"metadata": {"namespace": "a", "name": "b"}}, NOW)
    assert (bare["target"], bare["source_path"], bare["automated"]) == ("HEAD", ".", False)


def test_job_rows_link_to_the_job_page_by_kind_and_to_the_repository() -> None:
    rows = views.job_rows(
        [
            {
                "kind": "TensorFlowTrainingJob",
                "namespace": "default",
                "name": "mnist",
                "phase": "Running",
                "replicas": "2/3",
                "restarts": 1,
                "repository": "default/jobs",
                "createdAt": "2026-01-01T11:00:00Z",
            },
            {
                "kind": "XGBoostTrainingJob",
                "namespace": "b",
                "name": "iris",
                "phase": None,
                "replicas": "0/1",
                "restarts": 0,
                "repository": None,
                "createdAt": None,
            },
        ],
        NOW,
    )
    assert rows[0]["path"] == "/jobs/default/tensorflowtrainingjobs/mnist"
    assert rows[0]["repository_path"] == "/repositories/default/jobs"
    assert (rows[0]["age"], rows[0]["phase"], rows[0]["restarts"]) == ("60m", "Running", 1)
    assert rows[1]["path"] == "/jobs/b/xgboosttrainingjobs/iris"
    assert (rows[1]["phase"], rows[1]["repository_path"], rows[1]["age"]) == ("Pending", None, "")


def _row(namespace: str, name: str, phase: str, repository: str = "") -> dict[str, Any]:
    return {"namespace": namespace, "name": name, "phase": phase, "repository": repository}


JOBS = [
    _row("default", "a", "Running", "default/jobs"),
    _row("default", "b", "Failed"),
    _row("team-a", "c", "Running", "team-a/models"),
]
FILTERS = [
    pytest.param(views.Filters(), ["a", "b", "c"], id="none"),
    pytest.param(views.Filters(namespace="default"), ["a", "b"], id="namespace"),
    pytest.param(views.Filters(phase="Running"), ["a", "c"], id="phase"),
    pytest.param(views.Filters(repository="team-a/models"), ["c"], id="repository"),
    pytest.param(views.Filters(namespace="team-a", phase="Failed"), [], id="nothing-matches"),
]


@pytest.mark.parametrize(("filters", "names"), FILTERS)
def test_filters_keep_the_jobs_matching_every_one_given(
    filters: views.Filters, names: list[str]
) -> None:
    assert [r["name"] for r in views.filter_jobs(JOBS, filters)] == names


def test_filters_come_from_the_query_and_offer_every_value_seen_plus_the_chosen_one() -> None:
    filters = views.Filters.from_query({"namespace": " team-b ", "phase": "Paused"})
    assert filters == views.Filters(namespace="team-b", phase="Paused")
    assert filters.active
    repos = [{"namespace": "default", "key": "default/jobs"}]
    options = views.filter_options(JOBS, repos, filters)
    assert options["namespace"] == ["default", "team-a", "team-b"]
    assert options["repository"] == ["default/jobs", "team-a/models"]
    assert options["phase"] == ["Running", "Paused", "Failed"]  # the lifecycle's order
    assert views.filter_query(filters) == "?namespace=team-b&phase=Paused"
    assert views.filter_query(views.Filters()) == ""


# --- repository page ------------------------------------------------------------------------


def test_a_denied_resource_shows_its_message_verbatim_at_file_and_line_with_a_diff_link() -> None:
    detail = views.repository_detail(load("repository-denied.yaml"), [], NOW)
    denied, iris = detail["resources"]
    assert denied["key"] == "TensorFlowTrainingJob/team-a/too-small"
    assert denied["source"] == "bad/too-small.yaml:20"
    assert denied["message"].startswith('admission webhook "validate.trainingjobs')
    assert denied["message"].endswith("must be greater than or equal to cpu request of 1")
    assert denied["sync"]["status"] == "OutOfSync"
    assert denied["health"]["status"] == "Missing"
    assert denied["diff_path"] == (
        "/repositories/team-a/models/diff?resource=TensorFlowTrainingJob%2Fteam-a%2Ftoo-small"
    )
    assert denied["job_path"] is None  # denied: no live object, so no job page to link to
    assert iris["job_path"] == "/jobs/team-a/xgboosttrainingjobs/iris"
    assert iris["diff_path"] is None
    assert iris["source"] == "iris.yaml:1"


LINKS = [
    ("Healthy", "/jobs/default/tensorflowtrainingjobs/mnist"),
    ("Progressing", "/jobs/default/tensorflowtrainingjobs/mnist"),
    ("Degraded", "/jobs/default/tensorflowtrainingjobs/mnist"),
    ("Suspended", "/jobs/default/tensorflowtrainingjobs/mnist"),
    ("Missing", None),  # gitops.engine.health: the object does not exist
    (None, None),  # a document that could not be read: no object either
]


@pytest.mark.parametrize(("health", "path"), LINKS)
def test_a_resource_links_to_its_job_page_only_when_the_job_exists(
    health: str | None, path: str | None
) -> None:
    resource = {"kind": "TensorFlowTrainingJob", "namespace": "default", "name": "mnist"}
    if health is not None:
        resource["health"] = health
    obj = {
        "metadata": {"namespace": "default", "name": "jobs"},
        "status": {"resources": [resource]},
    }
    (shown,) = views.repository_detail(obj, [], NOW)["resources"]
    assert shown["job_path"] == path


def test_a_missing_repository_names_the_resources_that_do_not_exist() -> None:
    detail = views.repository_detail(load("repository-denied.yaml"), [], NOW)
    assert detail["health"]["status"] == "Missing"
    assert detail["health_message"] == "Missing: TensorFlowTrainingJob team-a/too-small"
    row = views.repository_row(load("repository-denied.yaml"), NOW)  # the front page's title
    assert row["health_message"] == detail["health_message"]


def test_many_missing_resources_are_named_up_to_three_then_counted() -> None:
    resources = [
        {"kind": "XGBoostTrainingJob", "namespace": "a", "name": f"j{i}", "health": "Missing"}
        for i in range(5)
    ] + [{"kind": "Namespace", "name": "team", "health": "Missing"}]
    obj: dict[str, Any] = {
        "metadata": {"namespace": "a", "name": "r"},
        "status": {
            "health": {"status": "Missing", "message": "the object does not exist"},
            "resources": [{"kind": "X", "name": "ok", "health": "Healthy"}, *resources],
        },
    }
    assert views.repository_row(obj, NOW)["health_message"] == (
        "Missing: XGBoostTrainingJob a/j0, XGBoostTrainingJob a/j1, XGBoostTrainingJob a/j2"
        " and 3 more"
    )
    obj["status"]["resources"] = resources[-1:]  # cluster-scoped: no namespace to show
    assert views.repository_row(obj, NOW)["health_message"] == "Missing: Namespace team"
    degraded = {"status": "Degraded", "message": "the job failed"}
    obj["status"]["health"] = degraded  # other healths keep the message recorded
    assert views.repository_row(obj, NOW)["health_message"] == "the job failed"


def test_history_is_newest_first_and_marks_the_deployed_revision() -> None:
    detail = views.repository_detail(load("repository-synced.yaml"), [], NOW)
    assert [h["message"] for h in detail["history"]] == ["add mnist", "first"]
    assert [h["current"] for h in detail["history"]] == [True, False]
    assert detail["history"][0]["short_revision"] == "0123456"
    assert detail["operation"] == {
        "phase": "Succeeded",
        "message": "1 applied",
        "revision": "0123456",
        "time": "60s ago",
        "timestamp": "2026-01-01T11:59:00Z",
    }
    assert detail["reconciled"] == "30s ago"
    assert detail["reconciled_timestamp"] == "2026-01-01T11:59:30Z"


def test_under_automated_sync_only_the_deployed_revision_can_be_synced_again() -> None:
    obj = load("repository-synced.yaml")  # automated, targetRevision main
    old, deployed = reversed(views.repository_detail(obj, [], NOW)["history"])
    assert deployed["current"] and deployed["sync_blocked"] == ""
    assert old["sync_blocked"].startswith("Automated sync follows the target revision (main)")
    obj["spec"]["syncPolicy"] = {}  # manual: any revision, once
    assert [h["sync_blocked"] for h in views.repository_detail(obj, [], NOW)["history"]] == [
        "",
        "",
    ]


def test_a_comparison_error_is_listed_as_a_condition() -> None:
    detail = views.repository_detail(load("repository-comparison-error.yaml"), [], NOW)
    assert detail["conditions"] == [
        {
            "type": "ComparisonError",
            "status": "True",
            "tone": "failed",
            "reason": "FetchFailed",
            "message": "git fetch: revision nope not found",
            "time": "30m ago",
            "timestamp": "2026-01-01T11:30:00Z",
        }
    ]
    assert detail["resources"] == [] and detail["history"] == [] and detail["operation"] is None


def test_a_recorded_diff_also_gives_a_synced_looking_resource_a_diff_link() -> None:
    diff = {"kind": "XGBoostTrainingJob", "namespace": "team-a", "name": "iris", "text": ""}
    detail = views.repository_detail(load("repository-denied.yaml"), [diff], NOW)
    assert detail["resources"][1]["diff_path"] is not None


def test_a_diffs_lines_are_tagged_for_colour_and_keep_their_text() -> None:
    diff = {
        "kind": "TensorFlowTrainingJob",
        "namespace": "default",
        "name": "mnist",
        "file": "jobs/mnist.yaml",
        "line": 4,
        "text": "--- live\n+++ desired\n@@ -1 +1 @@\n-replicas: 1\n+replicas: 2\n kind: x\n",
    }
    shown = views.resource_diff([diff], "TensorFlowTrainingJob/default/mnist")
    assert shown is not None
    assert shown["source"] == "jobs/mnist.yaml:4"
    assert shown["kind"] == "diff"
    assert [(line["tag"], line["text"]) for line in shown["lines"]] == [
        ("file", "--- live"),
        ("file", "+++ desired"),
        ("hunk", "@@ -1 +1 @@"),
        ("del", "-replicas: 1"),
        ("add", "+replicas: 2"),
        ("context", " kind: x"),
    ]
    assert views.resource_diff([diff], "TensorFlowTrainingJob/default/other") is None


# --- job page -------------------------------------------------------------------------------


def test_a_running_job_shows_its_replicas_by_type_with_phase_and_restarts() -> None:
    detail = jobviews.job_detail(
        load("job-running.yaml"), load("pods-mnist.yaml"), load("events-mnist.yaml"), NOW
    )
    assert detail["path"] == "/jobs/default/tensorflowtrainingjobs/mnist"
    assert detail["phase"]["status"] == "Running"
    assert [(r["id"], r["phase"]["status"], r["restarts"]) for r in detail["replicas"]] == [
        ("chief-0", "Running", 0),
        ("worker-0", "Running", 1),
        ("worker-1", "Pending", 0),
    ]
    assert detail["log_pods"] == ["mnist-chief-0", "mnist-worker-0"]  # worker-1 has no pod
    assert detail["repository_path"] == "/repositories/default/jobs"
    assert detail["backoff"] == "1 / 3"
    assert detail["deadline"] == "60m left"
    assert (detail["paused"], detail["finished"]) == (False, False)


def test_the_condition_timeline_lists_what_became_true_in_time_order() -> None:
    detail = jobviews.job_detail(load("job-running.yaml"), [], [], NOW)
    assert [(c["type"], c["status"], c["tone"]) for c in detail["conditions"]] == [
        ("Initialized", "True", "neutral"),
        ("Running", "True", "neutral"),
    ]
    assert detail["conditions"][1]["time"] == "59m ago"
    # `Failed False` from the start never happened: no step of the timeline, listed muted.
    assert detail["not_in_effect"] == [
        {"type": "Failed", "status": "False", "reason": "NotFinished"}
    ]


def test_the_timeline_orders_by_time_not_by_spelling() -> None:
    status = {
        "conditions": [
            # The same instant spelled with a fraction, and an offset: strings would misorder.
            {"type": "Completed", "status": "True", "lastTransitionTime": "2026-01-01T11:05:00Z"},
            {
                "type": "Running",
                "status": "True",
                "lastTransitionTime": "2026-01-01T12:01:00+02:00",
            },
            {
                "type": "Initialized",
                "status": "True",
                "lastTransitionTime": "2026-01-01T10:00:00.5Z",
            },
        ]
    }
    detail = jobviews.job_detail({"status": status}, [], [], NOW)
    assert [c["type"] for c in detail["conditions"]] == ["Initialized", "Running", "Completed"]


CONDITION_TONES = [
    ("Succeeded", "True", "ok"),
    ("Completed", "True", "ok"),
    ("Failed", "True", "failed"),
    ("ComparisonError", "True", "failed"),
    ("SyncError", "True", "failed"),
    ("ReplicaFailure", "True", "warn"),
    ("Paused", "True", "suspended"),
    ("Running", "True", "neutral"),
    ("Created", "True", "neutral"),
    ("Initialized", "True", "neutral"),
    ("Succeeded", "False", "muted"),
    ("Failed", "False", "muted"),
    ("Failed", "Unknown", "muted"),
]


@pytest.mark.parametrize(("kind", "status", "tone"), CONDITION_TONES)
def test_a_condition_is_coloured_by_what_it_means_not_by_true(
    kind: str, status: str, tone: str
) -> None:
    assert fmt.condition_tone(kind, status) == tone


def test_a_failed_jobs_failed_condition_is_red_on_the_job_page() -> None:
    detail = jobviews.job_detail(load("job-failed.yaml"), [], [], NOW)
    assert [(c["type"], c["tone"]) for c in detail["conditions"]] == [("Failed", "failed")]


def test_a_comparison_error_on_the_repository_page_is_red_and_a_false_condition_muted() -> None:
    obj = load("repository-comparison-error.yaml")
    obj["status"]["conditions"].append(
        {"type": "SyncError", "status": "False", "lastTransitionTime": "2026-01-01T11:00:00Z"}
    )
    detail = views.repository_detail(obj, [], NOW)
    assert [(c["type"], c["tone"]) for c in detail["conditions"]] == [
        ("ComparisonError", "failed"),
        ("SyncError", "muted"),
    ]


def _event(reason: str, **fields: Any) -> dict[str, Any]:
    return {"type": "Normal", "reason": reason, "message": reason, "count": 1, **fields}


def test_events_are_oldest_first_as_kubectl_sorts_them_with_their_counts() -> None:
    detail = jobviews.job_detail(load("job-running.yaml"), [], load("events-mnist.yaml"), NOW)
    assert [(e["reason"], e["count"], e["time"]) for e in detail["events"]] == [
        ("SuccessfulCreate", 1, "59m ago"),
        ("Restarting", 2, "30m ago"),
    ]
    assert detail["events"][1]["type"] == "Warning"


def test_events_of_either_api_and_of_the_same_second_come_in_the_order_they_happened() -> None:
    events = [
        _event(
            "Restarting", lastTimestamp="2026-01-01T11:30:00Z", metadata={"resourceVersion": "12"}
        ),
        # events.k8s.io/v1 (no lastTimestamp): its series' last observation, else eventTime.
        _event(
            "Repeated",
            eventTime="2026-01-01T11:00:00.000000Z",
            series={"lastObservedTime": "2026-01-01T11:45:00.000000Z"},
        ),
        _event("Scheduled", eventTime="2026-01-01T11:10:00.250000Z"),
        # The same second: the one stored first (lower resourceVersion) first.
        _event("Second", lastTimestamp="2026-01-01T11:30:00Z", metadata={"resourceVersion": "13"}),
        _event("First", firstTimestamp="2026-01-01T11:05:00Z"),
        _event("Created", lastTimestamp="2026-01-01T12:30:00+02:00"),  # 10:30 UTC
    ]
    detail = jobviews.job_detail(load("job-running.yaml"), [], events, NOW)
    assert [e["reason"] for e in detail["events"]] == [
        "Created",
        "First",
        "Scheduled",
        "Restarting",
        "Second",
        "Repeated",
    ]
    assert [e["time"] for e in detail["events"]][-1] == "15m ago"


FINISHED_READY = [
    ("Succeeded", ["Succeeded"] * 4, "4/4 succeeded"),
    ("Failed", ["Failed", "Deleted", "Succeeded", "Deleted"], "1/4 succeeded, 1 failed"),
    ("Succeeded", [], "-"),
]


@pytest.mark.parametrize(("phase", "replicas", "shown"), FINISHED_READY)
def test_a_finished_jobs_ready_counts_what_succeeded_not_the_pods_left(
    phase: str, replicas: list[str], shown: str
) -> None:
    tasks = [
        {
            "type": "worker",
            "replicas": [{"name": f"w-{i}", "phase": p} for i, p in enumerate(replicas)],
        }
    ]
    job = {
        "kind": "TensorFlowTrainingJob",
        "metadata": {"namespace": "a", "name": "w"},
        "status": {"phase": phase, "readyReplicas": "0/4", "tasks": tasks},
    }
    assert jobviews.job_detail(job, [], [], NOW)["ready"] == shown
    # The front page shows the API's row (`/api/v1/jobs`, gitops.api.show.job_row): the same.
    row = job_row(job)
    assert row["replicas"] == shown
    (front,) = views.job_rows([row], NOW)
    assert front["replicas"] == shown


def test_a_running_jobs_ready_is_the_controllers_count() -> None:
    detail = jobviews.job_detail(load("job-running.yaml"), [], [], NOW)
    assert detail["ready"] == load("job-running.yaml")["status"]["readyReplicas"]


def test_a_failed_job_shows_exit_codes_and_an_exhausted_backoff() -> None:
    detail = jobviews.job_detail(load("job-failed.yaml"), [], [], NOW)
    (replica,) = detail["replicas"]
    assert (replica["id"], replica["exit_code"], replica["restarts"]) == ("worker-0", "137", 2)
    assert detail["backoff"] == "2 / 2"
    assert detail["deadline"] == "finished (deadline 60s)"
    assert detail["finished"] is True
    assert detail["tensorboard"] is None


def test_a_paused_job_stops_its_deadline_clock() -> None:
    detail = jobviews.job_detail(load("job-paused.yaml"), [], [], NOW)
    assert detail["paused"] is True
    assert detail["deadline"] == "stopped while paused (deadline 10m)"
    assert detail["backoff"] == "0 / unlimited"
    assert detail["replicas"][0]["phase"]["status"] == "Deleted"


def test_a_job_without_status_lists_the_replicas_its_spec_asks_for() -> None:
    detail = jobviews.job_detail(load("job-new.yaml"), [], [], NOW)
    assert [r["id"] for r in detail["replicas"]] == ["chief-0", "worker-0", "worker-1"]
    assert {r["phase"]["status"] for r in detail["replicas"]} == {"Pending"}
    assert detail["deadline"] == "no deadline"
    assert detail["conditions"] == [] and detail["log_pods"] == []


DEADLINES = [
    pytest.param({}, {}, "no deadline", id="none"),
    pytest.param({"activeDeadlineSeconds": 600}, {}, "10m left (not started)", id="not-started"),
    pytest.param(
        {"activeDeadlineSeconds": 600},
        {"startTime": "2026-01-01T11:55:00Z"},
        "5m left",
        id="counting",
    ),
    pytest.param(
        {"activeDeadlineSeconds": 60},
        {"startTime": "2026-01-01T11:55:00Z"},
        "deadline exceeded",
        id="exceeded",
    ),
    pytest.param(
        {"activeDeadlineSeconds": 600},
        {
            "startTime": "2026-01-01T10:00:00Z",
            "conditions": [
                {"type": "Paused", "status": "False", "lastTransitionTime": "2026-01-01T11:58:00Z"}
            ],
        },
        "8m left",
        id="counted-again-from-the-resume",
    ),
]


@pytest.mark.parametrize(("policy", "status", "shown"), DEADLINES)
def test_time_left_to_the_deadline(
    policy: dict[str, Any], status: dict[str, Any], shown: str
) -> None:
    assert jobviews.deadline({"runPolicy": policy}, status, NOW) == shown


def test_the_tensorboard_link_goes_through_kubectl_proxy_to_the_jobs_service() -> None:
    board = jobviews.job_detail(load("job-running.yaml"), [], [], NOW)["tensorboard"]
    assert board == {
        "service": "mnist-tensorboard",
        "ready": True,
        "note": "TensorBoard [mnist-tensorboard] is ready",
        "url": "http://127.0.0.1:8001/api/v1/namespaces/default/services/"
        "mnist-tensorboard:6006/proxy/",
    }


def test_a_pod_summary_names_container_states_and_exit_codes() -> None:
    pod = {
        "metadata": {"name": "p", "deletionTimestamp": "x"},
        "spec": {"nodeName": "n"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 3}}}],
        },
    }
    assert jobviews.pod_summary(pod) == {
        "name": "p",
        "phase": "Failed",
        "node": "n",
        "deleting": True,
        "containers": [{"name": "c", "state": "terminated", "exitCode": 3}],
    }


REFUSAL = (
    'admission webhook "validate.trainingjobs.batch.tensorstack.dev" denied the request: '
    'spec.replicaSpecs[0]: Invalid value: "500m": must be greater than or equal to cpu request'
)
RECORDED = {
    "a unified diff": ("--- live\n+++ desired\n@@ -1 +1 @@\n-a: 1\n+a: 2\n", "diff"),
    "a prune (every line removed)": ("-apiVersion: v1\n-kind: Job\n", "diff"),
    "a refusal": (REFUSAL, "message"),
    "a refusal over two lines": (REFUSAL + "\n+ a hint", "message"),
    "a missing resource's message": ("not in the cluster yet", "message"),
}


@pytest.mark.parametrize(("text", "kind"), RECORDED.values(), ids=RECORDED.keys())
def test_what_the_hub_recorded_is_a_diff_only_when_it_has_diff_lines(text: str, kind: str) -> None:
    recorded = {"kind": "TensorFlowTrainingJob", "namespace": "a", "name": "b", "text": text}
    shown = views.resource_diff([recorded], "TensorFlowTrainingJob/a/b")
    assert shown is not None and shown["kind"] == kind
    if kind == "message":
        assert shown["message"] == text.strip() and shown["lines"] == []
    else:
        assert [line["text"] for line in shown["lines"]] == text.splitlines()


# --- links built from names --------------------------------------------------------------------

HOSTILE = {
    "a javascript: URL": "javascript:alert(1)",
    "a protocol-relative URL": "//evil.example/x",
    "markup and quotes": '"><script>x</script>',
    "a path climbing up": "../../api/v1",
    "a query": "a?b=c#d",
}


@pytest.mark.parametrize("value", HOSTILE.values(), ids=HOSTILE.keys())
def test_links_built_from_names_stay_on_this_site_with_each_name_one_quoted_segment(
    value: str,
) -> None:
    row = {
        "kind": "TensorFlowTrainingJob",
        "namespace": value,
        "name": value,
        "repository": f"{value}/{value}",  # the tracking annotation: any string a Git file sets
        "createdAt": "2026-01-01T11:00:00Z",
    }
    (shown,) = views.job_rows([row], NOW)
    job = {
        "kind": "TensorFlowTrainingJob",
        "metadata": {
            "namespace": value,
            "name": value,
            "annotations": {jobviews.REPOSITORY_ANNOTATION: f"{value}/{value}"},
        },
        "spec": {"tensorboardSpec": {}},
    }
    detail = jobviews.job_detail(job, [], [], NOW)
    repo = views.repository_row({"metadata": {"namespace": value, "name": value}}, NOW)
    assert shown["path"] and detail["path"] and repo["path"]
    for href in (
        shown["path"],
        shown["repository_path"],
        detail["path"],
        detail["repository_path"],
        repo["path"],
    ):
        if href is None:  # an annotation that names no namespace/name: no link at all
            continue
        assert href.startswith(("/jobs/", "/repositories/")) and not href.startswith("//")
        assert not set(href) & set("\"'<>?#:"), href
        assert href.count("/") == (4 if href.startswith("/jobs/") else 3), href
        assert "/../" not in href + "/" and "/./" not in href + "/"
    assert detail["tensorboard"]["url"].startswith("http://127.0.0.1:8001/api/v1/namespaces/")
    assert "<" not in detail["tensorboard"]["url"]


def test_a_replicas_earlier_runs_are_listed_with_their_exit_codes_and_where_their_log_is() -> None:
    """status.tasks[].replicas[].attempts (the controller's record): a run whose pod was
    recreated has its log kept in a ConfigMap; the latest earlier run of the current pod is
    its previous run (`kubectl logs --previous`)."""
    attempts = [
        {
            "attempt": 1,
            "exitCode": 137,
            "reason": "Error",
            "finishedAt": "2026-01-01T11:40:00Z",
            "podUID": "old-pod",
            "keptLog": {"configMap": "w-attempts", "key": "worker-0.1.log"},
        },
        {"attempt": 2, "exitCode": 1, "reason": "Error", "podUID": "pod-2"},
        {"attempt": 3, "exitCode": 1, "reason": "Error", "podUID": "pod-2"},
    ]
    job = {
        "kind": "TensorFlowTrainingJob",
        "metadata": {"namespace": "a", "name": "w"},
        "spec": {},
        "status": {
            "phase": "Running",
            "tasks": [
                {
                    "type": "Worker",
                    "replicas": [{"name": "w-worker-0", "restartCount": 3, "attempts": attempts}],
                }
            ],
        },
    }
    pod = {"metadata": {"name": "w-worker-0", "uid": "pod-2"}, "status": {"phase": "Running"}}
    (replica,) = jobviews.job_detail(job, [pod], [], NOW)["replicas"]
    assert replica["restarts"] == 3
    shown = [(a["attempt"], a["exit_code"], a["kept"], a["previous"]) for a in replica["attempts"]]
    assert shown == [
        (1, 137, "w-attempts/worker-0.1.log", False),
        (2, 1, "", False),
        (3, 1, "", True),
    ]
    assert replica["attempts"][0]["ended"] == "20m ago"


@pytest.mark.parametrize(
    ("state", "previous", "current"),
    [
        ({"running": {}}, 1, None),  # the latest ended run is `--previous`
        ({"waiting": {"reason": "CrashLoopBackOff"}}, 1, None),  # lastState: the latest
        # Ended for good: its own run is the current log, `--previous` the one before.
        ({"terminated": {"exitCode": 0}}, 0, 1),
    ],
)
def test_the_previous_run_link_is_on_the_run_kubectl_logs_previous_shows(
    state: dict[str, Any], previous: int, current: int | None
) -> None:
    """The journey test saw a job end Succeeded with its worker's last row (run 1, exit 0)
    linked as "previous run": `--previous` of a pod that has ended shows the run before."""
    runs = [{"attempt": 0, "exitCode": 137, "podUID": "p"}]
    if current is not None:
        runs.append({"attempt": 1, "exitCode": 0, "podUID": "p"})
    else:
        runs.insert(0, {"attempt": -1, "exitCode": 1, "podUID": "p"})
        runs = [{**r, "attempt": i} for i, r in enumerate(runs)]
    job = {
        "kind": "TensorFlowTrainingJob",
        "metadata": {"namespace": "a", "name": "w"},
        "spec": {},
        "status": {
            "tasks": [{"type": "Worker", "replicas": [{"name": "w-worker-0", "attempts": runs}]}]
        },
    }
    statuses = [
        {"name": "sidecar", "state": {"running": {}}},
        {"name": "tensorflow", "state": state},
    ]
    pod = {
        "metadata": {"name": "w-worker-0", "uid": "p"},
        "status": {"containerStatuses": statuses},
    }
    (replica,) = jobviews.job_detail(job, [pod], [], NOW)["replicas"]
    assert [a["attempt"] for a in replica["attempts"] if a["previous"]] == [previous]
    assert [a["attempt"] for a in replica["attempts"] if a["current"]] == (
        [] if current is None else [current]
    )


def test_the_job_page_renders_earlier_runs_with_a_link_to_the_previous_log() -> None:
    from dashboard.render import Renderer

    attempts = [
        {
            "attempt": 1,
            "exitCode": 137,
            "podUID": "old",
            "keptLog": {"configMap": "w-attempts", "key": "worker-0.1.log"},
        },
        {"attempt": 2, "exitCode": 1, "podUID": "pod-2"},
    ]
    job = {
        "kind": "TensorFlowTrainingJob",
        "metadata": {"namespace": "a", "name": "w"},
        "spec": {},
        "status": {
            "tasks": [
                {"type": "Worker", "replicas": [{"name": "w-worker-0", "attempts": attempts}]}
            ]
        },
    }
    pod = {"metadata": {"name": "w-worker-0", "uid": "pod-2"}, "status": {"phase": "Running"}}
    detail = jobviews.job_detail(job, [pod], [], NOW)
    html = Renderer(lambda name: f"/static/{name}").render(
        "_job.html",
        {
            "job": detail,
            "api_path": "/api/v1/jobs/a/tensorflowtrainingjobs/w",
            "now": "",
            "progress": None,
        },
    )
    assert 'id="attempts"' in html
    assert '<h3 id="attempts-title">Ended runs</h3>' in html  # the last one too, once over
    assert (
        'href="/api/v1/jobs/a/tensorflowtrainingjobs/w/logs?pod=w-worker-0&amp;previous=true'
        '&amp;tailLines=all"' in html
    )
    assert "kept: w-attempts/worker-0.1.log" in html
