from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from localserve.config import ApiConfig, TrackerConfig
from localserve.errors import NotFound
from localserve.stats import Stats, merge_tracker
from localserve.status import render_get
from localserve.tracker import REGRESSION_BOUNDS, ApiStats, Tracker, histogram, tracker_metrics

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_metrics_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCALSERVE_METRICS_DIR", raising=False)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "localserve" and r.levelno == logging.WARNING]


def test_classification_counts_each_class_of_the_key(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracker("iris", "classification", "class_label")
    for label in ["setosa", "setosa", np.str_("virginica"), 2, np.int64(2), np.array(2)]:
        tracker.record({"class_label": label, "score": 0.9})
    assert tracker.state() == {
        "model_type": "classification",
        "key": "class_label",
        "classes": {"setosa": 2, "virginica": 1, "2": 3},
    }
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    ("value", "warning"),
    [
        ({"class_label": True}, "'class_label' must be an int or a str for classification, got bool True"),
        ({"class_label": 0.5}, "'class_label' must be an int or a str for classification, got float 0.5"),
        ({"class_label": [1]}, "'class_label' must be an int or a str for classification, got list [1]"),
        ({"label": "setosa"}, "the response has no key 'class_label' (its keys: 'label')"),
        ({}, "the response has no key 'class_label' (its keys: none)"),
        (["setosa"], "expected a JSON object holding 'class_label', got list ['setosa']"),
        ("setosa", "expected a JSON object holding 'class_label', got str 'setosa'"),
    ],
)
def test_classification_wrong_values_are_warnings(value: Any, warning: str, caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracker("iris", "classification", "class_label")
    with caplog.at_level(logging.WARNING, logger="localserve"):
        tracker.record(value)
    assert warnings_of(caplog) == [f"tracker of api 'iris': {warning}"]
    assert tracker.state()["classes"] == {}


def test_classification_without_key_takes_the_value_itself(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracker("iris", "classification")
    tracker.record("setosa")
    tracker.record(np.int32(1))
    with caplog.at_level(logging.WARNING, logger="localserve"):
        tracker.record({"class_label": "setosa"})
    assert tracker.state()["classes"] == {"setosa": 1, "1": 1}
    assert warnings_of(caplog) == [
        "tracker of api 'iris': the response is a JSON object; set 'key' in 'tracker' to the field to track"
    ]


def test_regression_keeps_count_min_max_and_sum(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracker("price", "regression", "value")
    for value in [1.5, np.float32(2.5), 3, np.int64(-1)]:
        tracker.record({"value": value})
    with caplog.at_level(logging.WARNING, logger="localserve"):
        for value in [True, "4", float("nan"), None, np.bool_(True)]:
            tracker.record({"value": value})
    assert tracker.state() == {
        "model_type": "regression",
        "key": "value",
        "count": 4,
        "sum": 6.0,
        "min": -1.0,
        "max": 3.0,
        "buckets": {"18": 1, "39": 1, "40": 2},  # (-2, -1], (1, 2], (2, 5]
    }
    assert warnings_of(caplog) == [
        "tracker of api 'price': 'value' must be a finite number for regression, got bool True",
        "tracker of api 'price': 'value' must be a finite number for regression, got str '4'",
        "tracker of api 'price': 'value' must be a finite number for regression, got float nan",
        "tracker of api 'price': 'value' must be a finite number for regression, got NoneType None",
        "tracker of api 'price': 'value' must be a finite number for regression, got bool True",
    ]


def test_regression_histogram_has_fixed_bins_that_add_up() -> None:
    assert REGRESSION_BOUNDS[:3] == (-1e6, -5e5, -2e5) and REGRESSION_BOUNDS[27:32] == (
        -0.001,
        0.0,
        0.001,
        0.002,
        0.005,
    )
    assert len(REGRESSION_BOUNDS) == 57
    one, two = Tracker("price", "regression"), Tracker("price", "regression")
    for value in [0.0, 1.0, 1.0000001, -3e9]:  # a bin holds (lower, upper]
        one.record(value)
    for value in [2e6, 1.5, 0]:
        two.record(value)
    merged = one.state()
    merge_tracker(merged, two.state())
    assert histogram(merged["buckets"]) == [
        [None, -1e6, 1],
        [-0.001, 0.0, 2],
        [0.5, 1.0, 1],
        [1.0, 2.0, 2],
        [1e6, None, 1],
    ]
    assert (merged["count"], merged["min"], merged["max"]) == (7, -3e9, 2e6)
    assert histogram({}) == []


def test_tracker_metrics_are_prometheus_text_of_the_stats() -> None:
    regression = {"model_type": "regression", "key": None, "count": 3, "min": -1.0, "max": 4.0, "mean": 1.5}
    text = tracker_metrics(
        [
            ("iris", {"model_type": "classification", "key": "label", "classes": {"setosa": 2, "virginica": 1}}),
            ("price", {**regression, "histogram": [[-2.0, -1.0, 1], [2.0, 5.0, 2]]}),
            ("empty", {**regression, "count": 0, "min": None, "max": None, "mean": None, "histogram": []}),
        ]
    ).decode()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    buckets = [line for line in lines if line.startswith('localserve_tracker_value_bucket{api="price"')]
    assert len(buckets) == 58  # no _sum and _count: OpenMetrics has none for a histogram with negative bounds
    assert 'localserve_tracker_value_bucket{api="empty",le="+Inf"} 0.0' in lines
    assert [line for line in lines if "_bucket" not in line] == [
        'localserve_tracker_predictions_total{api="iris",class="setosa"} 2.0',
        'localserve_tracker_predictions_total{api="iris",class="virginica"} 1.0',
        'localserve_tracker_value_min{api="price"} -1.0',
        'localserve_tracker_value_max{api="price"} 4.0',
        'localserve_tracker_value_mean{api="price"} 1.5',
    ]
    assert [buckets[i] for i in (0, 17, 18, 38, 39, 40, 56, 57)] == [
        'localserve_tracker_value_bucket{api="price",le="-1000000.0"} 0.0',
        'localserve_tracker_value_bucket{api="price",le="-2.0"} 0.0',
        'localserve_tracker_value_bucket{api="price",le="-1.0"} 1.0',
        'localserve_tracker_value_bucket{api="price",le="1.0"} 1.0',
        'localserve_tracker_value_bucket{api="price",le="2.0"} 1.0',
        'localserve_tracker_value_bucket{api="price",le="5.0"} 3.0',
        'localserve_tracker_value_bucket{api="price",le="1e+06"} 3.0',
        'localserve_tracker_value_bucket{api="price",le="+Inf"} 3.0',
    ]
    assert tracker_metrics([]) == b""


def test_unknown_model_type_is_refused() -> None:
    with pytest.raises(ValueError, match="tracker model_type must be 'classification' or 'regression', got 'ranking'"):
        Tracker("iris", "ranking")


def test_api_stats_counts_and_latency() -> None:
    api_stats = ApiStats()
    for _ in range(98):
        api_stats.record(200, 0.001)
    api_stats.record(404, 2.0)
    api_stats.record(500, 2.0)
    api_stats.record(302, 0.001)  # latency counts; 3xx has no column
    state = api_stats.state()
    assert state["requests"] == {"2xx": 98, "4xx": 1, "5xx": 1}
    stats = Stats(["iris"])
    stats.apis["iris"] = api_stats
    latency = stats.api_json("iris")["latency"]
    assert latency["mean"] == pytest.approx((99 * 0.001 + 4.0) / 101)
    assert latency["p50"] == 0.001  # the mean of the bucket: exact when its values are equal
    assert latency["p99"] == 2.0


def test_latency_quantiles_are_within_a_bucket() -> None:
    stats = Stats(["iris"])
    for i in range(1, 1001):
        stats.record_request("iris", 200, i / 1000)  # 1 ms .. 1 s
    latency = stats.api_json("iris")["latency"]
    assert latency["mean"] == pytest.approx(0.5005)
    assert latency["p50"] == pytest.approx(0.5, rel=0.12)
    assert latency["p99"] == pytest.approx(0.99, rel=0.12)


def test_stats_json_for_the_server() -> None:
    apis = [
        ApiConfig(name="iris", handler="main:handler", tracker=TrackerConfig("classification", "class_label")),
        ApiConfig(name="price", handler="main:handler", tracker=TrackerConfig("regression")),
        ApiConfig(name="echo", handler="main:handler"),
    ]
    stats = Stats.from_config(apis)
    stats.set_status("iris", "ready")
    for _ in range(3):
        stats.record_request("iris", 200, 0.004)
        stats.record_prediction("iris", {"class_label": "setosa"})
    stats.record_request("iris", 400, 0.004)
    stats.record_prediction("price", 2.0)
    stats.record_prediction("price", 4)
    stats.record_prediction("echo", "anything")  # no tracker: nothing
    stats.record_request("nope", 200, 1.0)  # not an API of this server: ignored

    assert stats.api_json("iris") == {
        "api": "iris",
        "status": "ready",
        "requests": {"2xx": 3, "4xx": 1, "5xx": 0},
        "latency": {"mean": 0.004, "p50": 0.004, "p99": 0.004},
        "tracker": {"model_type": "classification", "key": "class_label", "classes": {"setosa": 3}},
    }
    assert stats.stats_json()[1:] == [
        {
            "api": "price",
            "status": "loading",
            "requests": {"2xx": 0, "4xx": 0, "5xx": 0},
            "latency": {"mean": None, "p50": None, "p99": None},
            "tracker": {
                "model_type": "regression",
                "key": None,
                "count": 2,
                "min": 2.0,
                "max": 4.0,
                "mean": 3.0,
                "histogram": [[1.0, 2.0, 1], [2.0, 5.0, 1]],
            },
        },
        {
            "api": "echo",
            "status": "loading",
            "requests": {"2xx": 0, "4xx": 0, "5xx": 0},
            "latency": {"mean": None, "p50": None, "p99": None},
            "tracker": None,
        },
    ]
    with pytest.raises(NotFound, match=r"^No API named 'nope'; the server has: iris, price, echo\.$"):
        stats.api_json("nope")


REPLICA = textwrap.dedent(
    """
    import sys
    from localserve.config import TrackerConfig
    from localserve.stats import Stats, merge_tracker
    stats = Stats(["iris"], {"iris": TrackerConfig("classification", "label")})
    for label in sys.argv[1:]:
        stats.record_request("iris", 200, 0.002)
        stats.record_prediction("iris", {"label": label})
    stats.record_request("iris", 500, 0.5)
    stats.close()
    """
)


def test_replicas_figures_add_up_through_snapshot_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "LOCALSERVE_METRICS_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", REPLICA, "a", "a", "b"], env=env, check=True, timeout=60)
    subprocess.run([sys.executable, "-c", REPLICA, "b", "c"], env=env, check=True, timeout=60)
    snapshots = sorted(p.name for p in tmp_path.iterdir())
    assert len(snapshots) == 2
    assert all(name.startswith("stats-") and name.endswith(".json") for name in snapshots)  # no temp files left

    monkeypatch.setenv("LOCALSERVE_METRICS_DIR", str(tmp_path))
    stats = Stats(["iris"], {"iris": TrackerConfig("classification", "label")})
    try:
        stats.set_status("iris", "ready")
        stats.record_request("iris", 404, 0.002)  # this process: taken live, before any flush
        stats.record_prediction("iris", {"label": "a"})
        figures = stats.api_json("iris")
        assert figures["requests"] == {"2xx": 5, "4xx": 1, "5xx": 2}
        assert figures["latency"]["mean"] == pytest.approx((6 * 0.002 + 2 * 0.5) / 8)
        assert figures["latency"]["p50"] == 0.002
        assert figures["tracker"]["classes"] == {"a": 3, "b": 2, "c": 1}

        stats.flush()
        own = json.loads((tmp_path / f"stats-{os.getpid()}.json").read_text())
        assert own["pid"] == os.getpid()
        assert own["apis"]["iris"]["requests"] == {"2xx": 0, "4xx": 1, "5xx": 0}
        assert stats.api_json("iris")["requests"] == {"2xx": 5, "4xx": 1, "5xx": 2}  # own file not counted twice
    finally:
        stats.close()


def test_a_broken_snapshot_file_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "stats-1.json").write_text("{not json")
    monkeypatch.setenv("LOCALSERVE_METRICS_DIR", str(tmp_path))
    stats = Stats(["iris"])
    try:
        stats.record_request("iris", 200, 0.01)
        assert stats.api_json("iris")["requests"] == {"2xx": 1, "4xx": 0, "5xx": 0}
    finally:
        stats.close()


GET_JSON: list[dict[str, Any]] = [
    {
        "api": "iris",
        "status": "ready",
        "requests": {"2xx": 1204, "4xx": 3, "5xx": 0},
        "latency": {"mean": 0.0012, "p50": 0.00112, "p99": 0.00447},
        "tracker": {"model_type": "classification", "key": "class_label", "classes": {"versicolor": 1, "setosa": 2}},
    },
    {
        "api": "price",
        "status": "loading",
        "requests": {"2xx": 0, "4xx": 0, "5xx": 0},
        "latency": {"mean": None, "p50": None, "p99": None},
        "tracker": {"model_type": "regression", "key": "value", "count": 3, "min": 0.5, "max": 3.25, "mean": 1.5},
    },
    {
        "api": "echo",
        "status": "ready",
        "requests": {"2xx": 2, "4xx": 0, "5xx": 1},
        "latency": {"mean": 1.5, "p50": 1.25, "p99": 12.5},
        "tracker": None,
    },
]


def test_render_get_all_apis() -> None:
    assert render_get(GET_JSON) == textwrap.dedent(
        """\
        api    status    2xx  4xx  5xx      mean       p50        p99
        iris   ready    1204    3    0   1.20 ms   1.12 ms    4.47 ms
        price  loading     0    0    0         -         -          -
        echo   ready       2    0    1  1,500 ms  1,250 ms  12,500 ms

        iris: classification of 'class_label', 3 predictions
        class       count  percent
        setosa          2    66.7%
        versicolor      1    33.3%

        price: regression of 'value', 3 predictions
        min   max  mean
        0.5  3.25   1.5"""
    )


def test_render_get_one_api() -> None:
    assert render_get(GET_JSON, "price") == textwrap.dedent(
        """\
        api    status   2xx  4xx  5xx  mean  p50  p99
        price  loading    0    0    0     -    -    -

        price: regression of 'value', 3 predictions
        min   max  mean
        0.5  3.25   1.5"""
    )
    assert render_get(GET_JSON[0], "iris").startswith("api   status   2xx  4xx  5xx")
    empty = {**GET_JSON[0], "tracker": {"model_type": "classification", "key": None, "classes": {}}}
    assert render_get([empty]).endswith("\n\niris: classification, 0 predictions")


def test_render_get_unknown_api() -> None:
    with pytest.raises(NotFound, match=r"^No API named 'mnist'; the server has: iris, price, echo\.$"):
        render_get(GET_JSON, "mnist")
