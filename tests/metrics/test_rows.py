"""The rows of each V2 request answered 2xx: the API's own model's series at once, a model version's on first use."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from localserve.metrics.rows import RequestRows


def test_rows_are_counted_per_api_and_per_model_version_that_ran_them() -> None:
    registry = CollectorRegistry()
    rows = RequestRows(
        lambda name, text, labels, buckets: Histogram(name, text, labels, buckets=buckets, registry=registry)
    )
    iris = rows.of("iris")

    def samples(suffix: str) -> dict[tuple[str, str], float]:
        return {
            (s.labels["model"], s.labels["version"]): s.value
            for family in registry.collect()
            for s in family.samples
            if s.name == "localserve_request_rows" + suffix and s.labels["api"] == "iris"
        }

    assert samples("_count") == {("", ""): 0.0}  # the API's own series, before any request
    iris.observe(3)
    iris.observe(1, ("a", "2"))
    iris.observe(4, ("a", "2"))
    iris.observe(2, ("b", "1"))
    assert samples("_count") == {("", ""): 1.0, ("a", "2"): 2.0, ("b", "1"): 1.0}  # the requests
    assert samples("_sum") == {("", ""): 3.0, ("a", "2"): 5.0, ("b", "1"): 2.0}  # their rows
    assert set(iris.versions) == {("a", "2"), ("b", "1")}
