"""An API that stops: its model versions' batchers are its threads too (shutdown waits for them, dropped ones
included), and work handed to it once its threads were told to end fails at once instead of never running."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from localserve.config import ApiConfig
from localserve.config.schema import BatchingConfig
from localserve.engine.pipeline import Pipeline
from localserve.engine.routing import ModelFeed, ModelRoutes
from localserve.errors import ShuttingDown


class HeldModel:
    """A model version whose calls wait for ``release``; ``began`` is released as each call begins."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.began = threading.Semaphore(0)

    def batch_inputs(self) -> None:
        return None

    def run(self, feed: Any, bucket: int | None = None) -> list[Any]:
        self.began.release()
        assert self.release.wait(60)
        return [feed["x"]]


class Endpoint:
    models = None


def test_a_dropped_versions_batcher_still_in_the_model_is_joined_with_the_api() -> None:
    api = ApiConfig(name="multi", batching=BatchingConfig(max_batch_size=4, batch_interval=0.0))
    pipeline = Pipeline(api, Endpoint())  # type: ignore[arg-type]
    pipeline.routes = routes = ModelRoutes(pipeline)
    model = HeldModel()
    batcher = routes._batcher(ModelFeed(("a", 1), model, {}))  # type: ignore[arg-type]
    feed = {"x": np.ones((1, 4), np.float32)}
    inline = threading.Thread(target=batcher.submit, args=([("first", feed)],))
    inline.start()  # runs the model on this thread (the batcher is idle)...
    assert model.began.acquire(timeout=60)
    assert batcher.submit([("second", feed)]) is None  # ...so this one waits for the batcher's thread
    try:
        routes.drop(("a", 1))  # the version leaves memory: its batcher stops once the queued call has run
        assert model.began.acquire(timeout=60)  # the batcher's thread is in the model now
        pipeline.stop()
        assert pipeline.join(0.0) == ["localserve-multi.a-batcher"]
    finally:
        model.release.set()
        inline.join(60)
    assert pipeline.join(60) == []


def test_a_call_handed_to_a_stopped_pipeline_fails_at_once() -> None:
    """An AsyncAPI job dispatched to a runtime that serve --reload retired a moment before: queued after the
    threads' ends it would never run, and the job would hold its worker's slot for ever."""
    pipeline = Pipeline(ApiConfig(name="api"), Endpoint())  # type: ignore[arg-type]
    pipeline.start()
    assert pipeline.call(lambda: "ran").result(timeout=60) == "ran"
    pipeline.stop()

    refused = pipeline.call(lambda: "ran")

    assert refused.done() and isinstance(refused.exception(), ShuttingDown)
    assert pipeline.join(60) == []
