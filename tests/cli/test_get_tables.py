"""``localserve get``: the figures of ``GET /stats`` as the tables ``cortex get`` printed, per API, tracker,
TrafficSplitter target, model version and AsyncAPI jobs."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from localserve.cli.get_tables import render_get
from localserve.errors import NotFound

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


def test_a_splitters_targets_and_shadow() -> None:
    splitter = {
        "api": "split",
        "status": "ready",
        "requests": {"2xx": 4},
        "latency": {},
        "targets": {"a": {"weight": 75, "requests": {"2xx": 3}}, "b": {"weight": 25, "requests": {"2xx": 1, "5xx": 0}}},
        "shadow": {"api": "c", "weight": 10, "answered": 2, "failed": 1},
    }
    assert render_get([splitter]).split("\n\n")[1] == textwrap.dedent(
        """\
        split: TrafficSplitter
        target  weight  2xx  4xx  5xx  share
        a           75    3    0    0  75.0%
        b           25    1    0    0  25.0%
        shadow c (10% copied): answered 2, failed 1, dropped 0"""
    )


def test_model_versions_and_jobs() -> None:
    entry = {
        "api": "multi",
        "status": "ready",
        "requests": {},
        "latency": {},
        "models": [
            {"model": "m", "version": "2", "loads": 3, "evictions": {"cache": 2}, "load_mean": 0.25, "calls": 7}
        ],
        "jobs": {"in_queue": 1, "completed": 5, "mean_seconds": 2.5},
    }
    _, models, jobs = render_get([entry]).split("\n\n")
    assert models == textwrap.dedent(
        """\
        multi: models
        model  version  loads  evictions       load  calls  mean
        m            2      3          2  250.00 ms      7     -"""
    )
    assert jobs == textwrap.dedent(
        """\
        multi: jobs
        in_queue  in_progress  completed  failed      mean
               1            0          5       0  2,500 ms"""
    )
    broken = {**entry, "models": None, "jobs": {"error": "the job store is unreachable"}}
    assert render_get([broken]).endswith("\n\nmulti: jobs: the job store is unreachable")


def test_no_apis() -> None:
    assert render_get([]) == "no APIs"
    with pytest.raises(NotFound, match=r"^No API named 'x'; the server has: no APIs\.$"):
        render_get([], "x")
