"""The tracker: classification counts of a key (or the value itself), regression figures and their fixed bins."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from localserve.config import ApiConfig, TrackerConfig
from localserve.metrics import Metrics
from localserve.metrics.summary import StatsSummary
from localserve.metrics.tracker import REGRESSION_BOUNDS, Tracker

ROOT = Path(__file__).resolve().parents[2]


class Tracked:
    """A tracker on its own metrics, and its figures as ``/stats`` reads them back."""

    def __init__(self, api: str, model_type: str, key: str | None = None) -> None:
        config = ApiConfig(name=api, handler="main:handler", tracker=TrackerConfig(model_type, key))
        self.api = api
        self.summary = StatsSummary(Metrics(), [config], lambda _: "ready")

    def record(self, value: Any) -> None:
        self.summary.record_prediction(self.api, value)

    def state(self) -> dict[str, Any]:
        tracker: dict[str, Any] = self.summary.api_json(self.api)["tracker"]
        return tracker


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "localserve" and r.levelno == logging.WARNING]


def test_classification_counts_each_class_of_the_key(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracked("iris", "classification", "class_label")
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
    tracker = Tracked("iris", "classification", "class_label")
    with caplog.at_level(logging.WARNING, logger="localserve"):
        tracker.record(value)
    assert warnings_of(caplog) == [f"tracker of api 'iris': {warning}"]
    assert tracker.state()["classes"] == {}


def test_classification_without_key_takes_the_value_itself(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracked("iris", "classification")
    tracker.record("setosa")
    tracker.record(np.int32(1))
    with caplog.at_level(logging.WARNING, logger="localserve"):
        tracker.record({"class_label": "setosa"})
    assert tracker.state()["classes"] == {"setosa": 1, "1": 1}
    assert warnings_of(caplog) == [
        "tracker of api 'iris': the response is a JSON object; set 'key' in 'tracker' to the field to track"
    ]


def test_regression_keeps_count_min_max_and_sum(caplog: pytest.LogCaptureFixture) -> None:
    tracker = Tracked("price", "regression", "value")
    for value in [1.5, np.float32(2.5), 3, np.int64(-1)]:
        tracker.record({"value": value})
    with caplog.at_level(logging.WARNING, logger="localserve"):
        for value in [True, "4", float("nan"), None, np.bool_(True)]:
            tracker.record({"value": value})
    assert tracker.state() == {
        "model_type": "regression",
        "key": "value",
        "count": 4,
        "min": -1.0,
        "max": 3.0,
        "mean": 1.5,
        "histogram": [[-2.0, -1.0, 1], [1.0, 2.0, 1], [2.0, 5.0, 2]],  # (lower, upper], non-empty bins
    }
    assert warnings_of(caplog) == [
        "tracker of api 'price': 'value' must be a finite number for regression, got bool True",
        "tracker of api 'price': 'value' must be a finite number for regression, got str '4'",
        "tracker of api 'price': 'value' must be a finite number for regression, got float nan",
        "tracker of api 'price': 'value' must be a finite number for regression, got NoneType None",
        "tracker of api 'price': 'value' must be a finite number for regression, got bool True",
    ]


def test_regression_histogram_has_fixed_bins() -> None:
    assert REGRESSION_BOUNDS[:3] == (-1e6, -5e5, -2e5)
    assert REGRESSION_BOUNDS[27:32] == (-0.001, 0.0, 0.001, 0.002, 0.005)
    assert len(REGRESSION_BOUNDS) == 57
    tracker = Tracked("price", "regression")
    assert tracker.state()["histogram"] == []
    for value in [0.0, 1.0, 1.0000001, -3e9, 2e6, 1.5, 0]:  # a bin holds (lower, upper]
        tracker.record(value)
    assert tracker.state()["histogram"] == [
        [None, -1e6, 1],
        [-0.001, 0.0, 2],
        [0.5, 1.0, 1],
        [1.0, 2.0, 2],
        [1e6, None, 1],
    ]


def test_unknown_model_type_is_refused() -> None:
    with pytest.raises(ValueError, match="tracker model_type must be 'classification' or 'regression', got 'ranking'"):
        Tracker("iris", "ranking", None, Metrics())
