"""The hand-counted metrics expose exactly what the client library's own metric types would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from webhook.metrics import LATENCY_BUCKETS, Metrics

OBSERVATIONS = [0.0001, 0.0005, 0.0005001, 0.003, 0.003, 1, 4.99, 5, 7.5, 120.0]
COUNTS = [
    ("validate", "TensorFlowTrainingJob", "CREATE", "allowed"),
    ("validate", "TensorFlowTrainingJob", "CREATE", "allowed"),
    ("validate", "XGBoostTrainingJob", "UPDATE", "denied"),
    ("mutate", "", "", "bad_request"),
]


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_exposition_matches_the_libraries_counter_and_histogram() -> None:
    ours = Metrics()
    reference = CollectorRegistry()
    counter = Counter(
        "trainops_webhook_requests",
        "x",
        ["endpoint", "kind", "operation", "verdict"],
        registry=reference,
    )
    histogram = Histogram(
        "trainops_webhook_request_duration_seconds",
        "x",
        ["endpoint"],
        buckets=LATENCY_BUCKETS,
        registry=reference,
    )
    for labels in COUNTS:
        ours.count(*labels)
        counter.labels(*labels).inc()
    for seconds in OBSERVATIONS:
        ours.observe("validate", seconds)
        histogram.labels("validate").observe(seconds)
    ours.observe("mutate", 0.002)
    histogram.labels("mutate").observe(0.002)

    assert samples(ours.registry) == samples(reference)
    found = samples(ours.registry)
    assert (
        "trainops_webhook_request_duration_seconds_bucket",
        (("endpoint", "validate"), ("le", "0.0005")),
        2.0,
    ) in found
    assert (
        "trainops_webhook_requests_total",
        (
            ("endpoint", "validate"),
            ("kind", "TensorFlowTrainingJob"),
            ("operation", "CREATE"),
            ("verdict", "allowed"),
        ),
        2.0,
    ) in found


def test_certificate_expiry_is_read_at_scrape_time_and_absent_until_set() -> None:
    metrics = Metrics()
    names = {name for name, _, _ in samples(metrics.registry)}
    assert "trainops_webhook_certificate_expiry_seconds" not in names
    left = [100.0]
    metrics.certificate_expiry(lambda: left[0])
    left[0] = -5.0
    assert ("trainops_webhook_certificate_expiry_seconds", (), -5.0) in samples(metrics.registry)
