"""The Cortex 0.25-0.33 generation (``kind: RealtimeAPI`` / ``kind: AsyncAPI``) rewritten as the keys of
``kind: api``: the predictor's batching, threads, models and signature key, autoscaling's replicas and
concurrency; the keys of the other generation refused with what this one spells instead."""

from __future__ import annotations

from typing import Any

import pytest

from localserve.config.realtime import realtime_entry, realtime_fields
from localserve.config.schema import DEFAULT_ASYNC_RETENTION
from localserve.errors import ConfigError

WHERE = "cortex.yaml: api 'r'"


def entry(**keys: Any) -> dict[str, Any]:
    return {"kind": "RealtimeAPI", "name": "r", "predictor": {"type": "python", "path": "p.py"}, **keys}


def test_the_predictors_batching_threads_and_signature_key_move_to_the_top() -> None:
    raw = entry(
        predictor={
            "type": "tensorflow",
            "path": "p.py",
            "server_side_batching": {"max_batch_size": 4},
            "threads_per_process": 3,
            "processes_per_replica": 2,
            "models": {"path": "savedmodel", "signature_key": "serving"},
        }
    )
    out = realtime_entry(raw, "r", "RealtimeAPI", WHERE)
    assert out == {
        "name": "r",
        "batching": {"max_batch_size": 4},
        "threads_per_process": 3,
        "tf_signature_key": "serving",
        "predictor": {"type": "tensorflow", "path": "p.py", "model_path": "savedmodel"},
    }


def test_a_top_level_key_wins_over_the_predictors() -> None:
    raw = entry(threads_per_process=8, predictor={"type": "python", "path": "p.py", "threads_per_process": 3})
    assert realtime_entry(raw, "r", "RealtimeAPI", WHERE)["threads_per_process"] == 8


def test_autoscaling_replicas_move_into_compute_and_concurrency_into_max_queue() -> None:
    raw = entry(compute={"cpu": 1}, autoscaling={"min_replicas": 2, "max_replicas": 4, "max_replica_concurrency": 16})
    out = realtime_entry(raw, "r", "RealtimeAPI", WHERE)
    assert out["compute"] == {"cpu": 1, "min_replicas": 2, "max_replicas": 4}
    assert out["max_queue"] == 16
    with pytest.raises(ConfigError) as caught:
        realtime_entry(entry(compute={"min_replicas": 1}, autoscaling={"min_replicas": 2}), "r", "RealtimeAPI", WHERE)
    assert (
        str(caught.value)
        == f"{WHERE}: 'min_replicas' is set in both 'compute' and 'autoscaling'; keep it in 'autoscaling'."
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            entry(model="m.onnx"),
            "'model' belongs to 'kind: api' (Cortex 0.8-0.11); with 'kind: RealtimeAPI' use 'models: {path: ...}' in 'predictor'.",
        ),
        (
            entry(predictor="p.py"),
            "'kind: RealtimeAPI' needs a 'predictor' mapping with 'type' and 'path', got str 'p.py'.",
        ),
        (entry(networking={"endpont": "/x"}), "unknown key 'endpont' in 'networking'. Did you mean 'endpoint'?"),
        (entry(update_strategy=3), "'update_strategy' must be a mapping, got int 3."),
        (
            entry(predictor={"type": "python", "path": "p.py", "models": {"path": "m.onnx"}}),
            "'models' in 'predictor' does not apply to python predictors; use 'multi_model_reloading'.",
        ),
    ],
)
def test_refusals_say_what_this_generation_spells_instead(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        realtime_entry(raw, "r", "RealtimeAPI", WHERE)
    assert str(caught.value) == f"{WHERE}: {message}"


def test_the_fields_only_this_generation_sets() -> None:
    raw = entry(autoscaling={"max_replica_concurrency": 8, "target_replica_concurrency": 2})
    raw["predictor"]["processes_per_replica"] = 3
    assert realtime_fields(raw, "RealtimeAPI", WHERE) == {
        "api_kind": "RealtimeAPI",
        "async_store": None,
        "async_retention": DEFAULT_ASYNC_RETENTION,
        "processes_per_replica": 3,
        "max_replica_concurrency": 8,
        "target_replica_concurrency": 2.0,
    }
    with pytest.raises(
        ConfigError, match=r"'target_replica_concurrency' in 'autoscaling'; expected a number above 0\.$"
    ):
        realtime_fields(entry(autoscaling={"target_replica_concurrency": 0}), "RealtimeAPI", WHERE)


def test_an_asyncapis_store_and_retention() -> None:
    raw = entry(kind="AsyncAPI", async_store="redis://h:6379/0", async_retention="12h")
    fields = realtime_fields(raw, "AsyncAPI", WHERE)
    assert (fields["async_store"], fields["async_retention"]) == ("redis://h:6379/0", 12 * 3600.0)


@pytest.mark.parametrize(
    ("kind", "keys", "message"),
    [
        (
            "RealtimeAPI",
            {"async_store": "redis://h"},
            "'async_store' applies only to 'kind: AsyncAPI'; remove it or change 'kind'.",
        ),
        (
            "AsyncAPI",
            {"async_store": "postgres://h/db"},
            "invalid value 'postgres://h/db' for 'async_store'; expected sqlite:///ABSOLUTE/PATH or redis://HOST:PORT/DB.",
        ),
        (
            "AsyncAPI",
            {"batching": {"max_batch_size": 2}},
            "batching does not apply to 'kind: AsyncAPI' (each job runs predict once with its own payload); remove "
            "'batching' / 'server_side_batching', or use 'kind: RealtimeAPI'.",
        ),
        (
            "AsyncAPI",
            {"async_retention": 0},
            "invalid value 0 for 'async_retention'; expected a duration above 0 such as 7d, 12h or 30m.",
        ),
    ],
)
def test_async_refusals(kind: str, keys: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        realtime_fields(entry(kind=kind, **keys), kind, WHERE)
    assert str(caught.value) == f"{WHERE}: {message}"
