"""Cortex's ``metrics_client``: what predictors put, increment and observe, exported as ``localserve_user_<name>``;
Cortex's own calls and refusals, and a user's mistakes logged, never raised into the request."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
import pytest

from localserve.metrics import Metrics, MetricsClient
from tests.metrics.test_metrics import key, scrape


def test_metrics_client_exports_user_metrics() -> None:
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.put("temperature", 21.5)
    client.put("temperature", np.float32(22.0))
    client.increment("hits", tags={"model": "v2", "shard": 3})
    client.increment("hits", 2, tags={"shard": 3, "model": "v2"})
    client.increment("errors_total")
    client.histogram("confidence", 0.7, tags={"label": "setosa"})
    client.histogram("confidence", np.int64(3), tags={"label": "setosa"})
    metrics.client("mnist").increment("hits", tags={"model": "v1", "shard": 0})

    s = scrape(metrics.render()[0])
    assert s[key("localserve_user_temperature", api="iris")] == 22.0
    assert s[key("localserve_user_hits_total", api="iris", model="v2", shard="3")] == 3
    assert s[key("localserve_user_hits_total", api="mnist", model="v1", shard="0")] == 1
    assert s[key("localserve_user_errors_total", api="iris")] == 1
    assert s[key("localserve_user_confidence_count", api="iris", label="setosa")] == 2
    assert s[key("localserve_user_confidence_sum", api="iris", label="setosa")] == pytest.approx(3.7)
    assert s[key("localserve_user_confidence_bucket", api="iris", label="setosa", le="1.0")] == 1


def test_metrics_client_takes_cortex_calls() -> None:
    """Cortex's MetricsClient (v0.30+): gauge / increment / histogram, keyword ``metric``; ``put`` stays."""
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.gauge("active_connections", 1001, tags={"protocol": "http"})
    client.gauge(metric="queue", value=3)
    client.increment(metric="model_calls", tags={"model_version": "v1"})
    client.increment("model_calls", 2, {"model_version": "v1"})
    client.increment(metric_name="model_calls", value=1, tags={"model_version": "v1"})
    client.histogram(metric="inference_time_milliseconds", value=120, tags={"model_version": "v1"})
    client.put(metric="queue", value=4)

    s = scrape(metrics.render()[0])
    assert s[key("localserve_user_active_connections", api="iris", protocol="http")] == 1001
    assert s[key("localserve_user_queue", api="iris")] == 4
    assert s[key("localserve_user_model_calls_total", api="iris", model_version="v1")] == 4
    assert s[key("localserve_user_inference_time_milliseconds_count", api="iris", model_version="v1")] == 1
    assert s[key("localserve_user_inference_time_milliseconds_sum", api="iris", model_version="v1")] == 120


@pytest.mark.parametrize("method", ["gauge", "put", "increment", "histogram"])
@pytest.mark.parametrize("name", ["cortex_latency", "istio_requests"])
def test_metrics_client_refuses_cortex_prefixes_as_cortex_did(method: str, name: str) -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with pytest.raises(ValueError) as info:
        getattr(client, method)(name, 1)
    assert str(info.value) == (
        f"Metric name ({name}) is invalid because it starts with a cortex exclusive prefix.\n"
        "The following are prefixes are exclusive to cortex: ('cortex_', 'istio_')."
    )


def test_metrics_client_takes_the_name_once() -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with pytest.raises(TypeError) as info:
        client.increment("a", metric_name="b")
    assert str(info.value) == "metrics_client.increment() takes the metric's name once, as 'metric' or 'metric_name'"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.put("bad name", 1), "metrics_client.put('bad name'): invalid metric name 'bad name'"),
        (lambda c: c.put("1st", 1), "invalid metric name '1st'"),
        (lambda c: c.put(42, 1), "invalid metric name 42"),
        (lambda c: c.put("x", "12"), "metrics_client.put('x'): value must be a finite number, got '12'"),
        (lambda c: c.put("x", True), "value must be a finite number, got True"),
        (lambda c: c.histogram("x", float("nan")), "value must be a finite number, got nan"),
        (lambda c: c.increment("x", -1), "metrics_client.increment('x'): a counter can only be increased; got -1"),
        (lambda c: c.put("x", 1, tags=["a"]), "tags must be a dict of name to value, got list"),
        (lambda c: c.put("x", 1, tags={"api": "a"}), "invalid tag name 'api'"),
        (lambda c: c.put("x", 1, tags={"my-tag": "a"}), "invalid tag name 'my-tag'"),
        (lambda c: c.put("x", 1, tags={"t": None}), "tag 't' must be a string or a number, got NoneType"),
    ],
)
def test_metrics_client_mistakes_are_logged_not_raised(
    call: Callable[[MetricsClient], None], message: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = Metrics(apis=["iris"]).client("iris")
    with caplog.at_level(logging.ERROR, logger="localserve"):
        call(client)
    assert len(caplog.records) == 1
    assert caplog.records[0].name == "localserve"
    assert message in caplog.records[0].getMessage()


def test_metrics_client_keeps_one_kind_and_one_tag_set(caplog: pytest.LogCaptureFixture) -> None:
    metrics = Metrics(apis=["iris"])
    client = metrics.client("iris")
    client.put("load", 1, tags={"gpu": 0})
    with caplog.at_level(logging.ERROR, logger="localserve"):
        client.increment("load")
        client.put("load", 2, tags={"gpu": 0, "host": "a"})
        client.histogram("lat", 1)
        client.put("lat_count", 1)  # would clash with the histogram's series
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "metrics_client.increment('load'): 'load' is a gauge; it cannot also be a counter"
    assert messages[1] == (
        "metrics_client.put('load'): 'load' was first used with tags ['gpu'], now with tags ['gpu', 'host']; "
        "a metric keeps one set of tag names"
    )
    assert messages[2].startswith("metrics_client.put('lat_count'): Duplicated time")
    assert len(messages) == 3
    assert scrape(metrics.render()[0])[key("localserve_user_load", api="iris", gpu="0")] == 1
