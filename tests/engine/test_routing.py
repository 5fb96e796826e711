"""Model routes of a multi-model API: a version's batcher is one of the API's threads (shutdown waits for it,
a dropped version's included)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from localserve.config import ApiConfig
from localserve.config.schema import BatchingConfig
from localserve.engine.pipeline import Pipeline
from localserve.engine.routing import ModelFeed, ModelRoutes


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
