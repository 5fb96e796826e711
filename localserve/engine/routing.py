"""Requests that name one model of a multi-model API (the Open Inference Protocol's ``<api>.<model>``).

Their first stage (``Job.prepare``) returns a ``ModelFeed``: the feed and the very model version it is for. With
``batching``, each version has its own batcher (its bucket sizes warmed when it is made), so models never share a batch;
without, the API's thread runs the model. A request keeps the model it started with: a version evicted or replaced
meanwhile finishes its calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from localserve.config import ApiConfig
from localserve.engine.answers import Done, as_error
from localserve.engine.batcher import Batcher
from localserve.engine.feeds import bucket_sizes
from localserve.engine.job import Job
from localserve.engine.jobqueue import JobQueue
from localserve.engine.leftovers import Leftovers
from localserve.engine.ports import Hooks
from localserve.handlers import Endpoint
from localserve.runtimes import Feed, Model


class Pipeline(Protocol):
    """What the routes use of their API's ``Pipeline`` (which owns them)."""

    api: ApiConfig
    name: str
    endpoint: Endpoint
    hooks: Hooks
    queue: JobQueue

    def deliver(self, outcomes: list[tuple[Job, Any]]) -> None: ...

    def finish_all(self, outcomes: list[tuple[Job, Any]], done: Done) -> None: ...


class ModelFeed:
    """A feed for one model version: ``key`` (model name, version), the loaded ``model``, where its call time goes."""

    __slots__ = ("feed", "key", "model", "ran")

    def __init__(
        self, key: tuple[str, int], model: Model, feed: Feed, ran: Callable[[float], None] | None = None
    ) -> None:
        self.key = key
        self.model = model
        self.feed = feed
        self.ran = ran


class ModelRoutes:
    """The jobs of one API that carry their own stages and name a model: one batcher per model version."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.batchers: dict[tuple[str, int], tuple[Model, Batcher]] = {}
        self._lock = threading.Lock()
        self._ended = Leftovers()  # the threads of batchers stopped, until they end
        models = pipeline.endpoint.models
        if models is not None:  # a version leaving memory retires its batcher (which held the model)
            models.listeners.append(self.drop)
        self.sizes: dict[tuple[str, int], list[int]] = {}  # batch sizes each model version ran (tests, /stats)

    def take(self, jobs: list[Job], done: Done) -> list[Job]:
        """Run the jobs with their own stages (V2) here; return the others, for the API's own path.

        Every job is prepared first, then each model version's feeds go to its batcher in one submit
        (as ``Pipeline._begin_batched`` does): the batcher sees them together, none waits for the others.
        """
        own = [job for job in jobs if job.prepare is not None]
        if not own:
            return jobs
        pipe = self.pipeline
        batching = pipe.api.batching is not None
        groups: dict[tuple[str, int], tuple[Batcher, list[tuple[Job, Feed]]]] = {}
        claimed = 0
        for job in own:
            if not pipe.queue.start(job):
                continue
            claimed += 1
            try:
                assert job.prepare is not None
                prepared = job.prepare(job.request)
                job.times.append(time.perf_counter())
                if not isinstance(prepared, ModelFeed):  # the API's own model
                    pipe.finish_all([(job, pipe.endpoint.infer(prepared))], done)
                elif batching:
                    groups.setdefault(prepared.key, (self._batcher(prepared), []))[1].append((job, prepared.feed))
                else:
                    pipe.finish_all([(job, self._run(prepared))], done)
            except BaseException as exc:
                done.append((job, as_error(exc, pipe.name)))
        pipe.queue.prepared(claimed)
        for batcher, entries in groups.values():
            outcomes = batcher.submit(entries)
            if outcomes is not None:
                pipe.finish_all(outcomes, done)
        return [job for job in jobs if job.prepare is None]

    def _run(self, routed: ModelFeed) -> Any:
        """No batching: the API's thread runs the model version itself."""
        start = time.perf_counter()
        output = routed.model.run(routed.feed)
        if routed.ran is not None:
            routed.ran(time.perf_counter() - start)
        return output

    def _batcher(self, routed: ModelFeed) -> Batcher:
        """The batcher of this model version; a new one when the version was loaded again (a new object)."""
        with self._lock:
            found = self.batchers.get(routed.key)
            if found is not None and found[0] is routed.model:
                return found[1]
            if found is not None:
                self._end(found[1])
            batching = self.pipeline.api.batching
            assert batching is not None
            sizes = self.sizes.setdefault(routed.key, [])
            hooks = self.pipeline.hooks

            def observe(size: int) -> None:
                sizes.append(size)
                if hooks.batch is not None:
                    hooks.batch(size)

            batcher = Batcher(
                f"{self.pipeline.name}.{routed.key[0]}",
                routed.model,
                buckets=bucket_sizes(batching.max_batch_size, batching.batch_sizes),
                interval=batching.batch_interval,
                deliver=self.pipeline.deliver,
                upstream=self.pipeline.queue.upstream,
                observe=observe,
                observe_run=routed.ran,
                traced=self.pipeline.hooks.batch_run,
            )
            batcher.warm()
            batcher.start()
            self.batchers[routed.key] = (routed.model, batcher)
            return batcher

    def drop(self, key: tuple[str, int]) -> None:
        """A model version left memory: its batcher ends (requests already in it are answered first)."""
        with self._lock:
            found = self.batchers.pop(key, None)
            if found is not None:
                self._end(found[1])

    def stop(self) -> None:
        """At shutdown: every batcher ends, and the watching of the model folders."""
        models = self.pipeline.endpoint.models
        if models is not None:
            models.close()
        with self._lock:
            for _, batcher in self.batchers.values():
                self._end(batcher)
            self.batchers.clear()

    def _end(self, batcher: Batcher) -> None:
        """Stop ``batcher``; its thread is joined at shutdown with the API's."""
        batcher.stop()
        self._ended.keep([batcher.thread])

    def all_threads(self) -> list[threading.Thread]:
        """The threads of the model versions' batchers (running, or stopped but not yet ended) and of the watch."""
        with self._lock:
            live = [batcher.thread for _, batcher in self.batchers.values() if batcher.thread is not None]
        models = self.pipeline.endpoint.models
        watcher = None if models is None else models.watcher  # may be loading a version
        return live + self._ended.alive() + (list(watcher.threads) if watcher is not None else [])


def describe_routes(routes: ModelRoutes | None) -> dict[str, Any]:
    """The batch sizes each model version ran, for tests and GET /<api>."""
    if routes is None:
        return {}
    return {f"{name}/{version}": list(sizes) for (name, version), sizes in routes.sizes.items()}
