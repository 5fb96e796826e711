"""One API inside a replica: its endpoint, its engine (pipeline and lifecycle), its state, its figures.

What one load of the API made (its config, endpoint, threads and lifecycle) is a ``Runtime``; the
``ApiRuntime`` serves one at a time and outlives them. ``serve --reload`` builds a new Runtime
beside the one serving (``build``), loads it on its own threads (``load_runtime``) and swaps it in
(``swap``): the front doors read ``rt.lifecycle`` and ``rt.pipeline`` per request, so new requests
get the new code at once, while the requests already queued on the old one finish there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localserve.config import ApiConfig, ServeConfig
from localserve.config.options import ApiOptions, ServeOptions
from localserve.engine.lifecycle import Lifecycle
from localserve.engine.pipeline import Pipeline
from localserve.engine.ports import Hooks
from localserve.engine.routing import describe_routes
from localserve.errors import HandlerLoadError, LocalServeError
from localserve.handlers import Endpoint, Observers, create_endpoint, no_stage
from localserve.messages.error_text import without_paths
from localserve.metrics import Metrics
from localserve.metrics.extras import ExtraMetrics

if TYPE_CHECKING:
    from localserve.tracing.spans import Tracing

log = logging.getLogger("localserve")


@dataclass(frozen=True, eq=False)  # one load is itself, whatever its fields
class Runtime:
    """One load of an API: its config, its endpoint (user code, model) and its threads and lifecycle."""

    api: ApiConfig
    endpoint: Endpoint
    pipeline: Pipeline
    lifecycle: Lifecycle

    def load(self) -> None:
        """On one of its own threads: user code, the model, the warm-up of every batch size."""
        self.endpoint.load()
        self.pipeline.attach_model()  # dynamic batching: every batch size warmed before ready


class ApiRuntime:
    """One API in this process: the Runtime it serves (endpoint, pipeline, lifecycle), its state."""

    def __init__(
        self,
        api: ApiConfig,
        config: ServeConfig,
        options: ServeOptions,
        metrics: Metrics | None,
        extras: ExtraMetrics | None = None,
        tracer: Tracing | None = None,
    ) -> None:
        self.project = config.project
        self.options = options
        self.metrics = metrics
        self.state = "loading"
        self.error: str | None = None
        # An AsyncAPI's front (--no-async-workers): its store only; no user code or model in this process.
        self.front_only = api.is_async and not options.async_workers
        self.observe = metrics.stage_observer(api.name) if metrics is not None else no_stage
        self.hooks = Hooks()
        if metrics is not None:
            self.hooks = Hooks(
                # Alone, the queue depth is read at scrape time (read_live below); replicas write it.
                depth=functools.partial(metrics.set_queue_depth, api.name) if metrics.multiprocess else None,
                batch=metrics.api(api.name).batch_size.observe,  # the child itself: once per model call
                stage=self.observe,
                phases=metrics.phase_observer(api.name),  # Triton's queue and compute statistics (V2)
                after_failed=None if extras is None else functools.partial(extras.post_predict_failed, api.name),
            )
        if tracer is not None:  # a batched model run: one span linking the requests it served
            self.hooks.batch_run = tracer.batch_run
        self.runtime = runtime = self.build(api)
        self.api, self.endpoint, self.pipeline, self.lifecycle = (
            api,
            runtime.endpoint,
            runtime.pipeline,
            runtime.lifecycle,
        )
        self.in_flight = 0  # requests of this API inside the server (reading, queued, running, sending); loop only
        self.counted = None if metrics is None else metrics.api(api.name)  # this API's request metrics
        self.write_in_flight = metrics is not None and metrics.multiprocess  # else the gauge reads in_flight
        if metrics is not None and not metrics.multiprocess:
            metrics.read_live(api.name, lambda: self.in_flight, lambda: self.pipeline.queue.depth)

    def build(self, api: ApiConfig) -> Runtime:
        """A Runtime of ``api`` (this API's name), not started and not loaded."""
        options, metrics = self.options, self.metrics
        observers = Observers(
            stage=self.observe,
            metrics_client=metrics.client(api.name) if metrics is not None else None,
            models=metrics.models.observer(api.name) if metrics is not None else None,
        )
        endpoint = create_endpoint(api, ApiOptions.of(api, options, self.project), observers)
        pipeline = Pipeline(api, endpoint, self.hooks)
        return Runtime(api, endpoint, pipeline, Lifecycle(pipeline, status=self._status))

    def _status(self) -> tuple[str, str | None]:
        return self.state, self.error

    async def load(self) -> None:
        """Load the API on its worker thread (user code, model, warm-up); its state becomes ready or failed."""
        if self.front_only:
            self.state = "ready"
            log.info("api %r: submits and polls only (--no-async-workers); its jobs run on the workers", self.api.name)
            return
        start = time.perf_counter()
        try:
            await asyncio.wrap_future(self.pipeline.call(self.runtime.load))
        except LocalServeError as exc:
            self.state, self.error = "failed", without_paths(str(exc), self.project)
            if exc.details:
                log.error("api %r failed to load:\n%s", self.api.name, exc.details)
                exc.details = ""  # logged: whoever reports the failure (the CLI's error) shows the message only
            raise
        except Exception as exc:
            self.state, self.error = "failed", without_paths(f"{type(exc).__name__}: {exc}", self.project)
            log.exception("api %r failed to load", self.api.name)
            raise HandlerLoadError(f"api {self.api.name!r} failed to load: {self.error}") from exc
        self.state = "ready"
        seconds = time.perf_counter() - start
        if self.metrics is not None:
            self.metrics.observe_model_load(self.api.name, seconds)
        log.info("api %r loaded in %.3f s", self.api.name, seconds)

    async def load_runtime(self, runtime: Runtime) -> float:
        """Start ``runtime``'s threads and load it there, beside the Runtime serving; the seconds it took.

        Every failure is a LocalServeError (user code's own exception as its ``__cause__``), nothing
        is logged, and ``runtime``'s threads are stopped: the Runtime serving is left as it was.
        """
        start = time.perf_counter()
        runtime.pipeline.start()
        if self.front_only:  # an AsyncAPI's front loads no user code, on a reload as at the start
            return 0.0
        try:
            await asyncio.wrap_future(runtime.pipeline.call(runtime.load))
        except LocalServeError:
            runtime.pipeline.stop()
            raise
        except Exception as exc:
            runtime.pipeline.stop()
            error = without_paths(f"{type(exc).__name__}: {exc}", self.project)
            raise HandlerLoadError(f"api {self.api.name!r} failed to load: {error}") from exc
        seconds = time.perf_counter() - start
        if self.metrics is not None:
            self.metrics.observe_model_load(self.api.name, seconds)
        return seconds

    def swap(self, runtime: Runtime) -> Runtime:
        """Serve ``runtime`` (loaded) from the next request on; the Runtime it replaces, to drain (event loop only)."""
        old = self.runtime
        if old.pipeline.affinity is not None:
            runtime.pipeline.pin(old.pipeline.affinity)
        self.runtime = runtime
        self.api, self.endpoint, self.pipeline, self.lifecycle = (
            runtime.api,
            runtime.endpoint,
            runtime.pipeline,
            runtime.lifecycle,
        )
        self.state, self.error = "ready", None
        return old

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: the endpoint's description with the API's status (and error)."""
        loaded = self.state == "ready" and not self.front_only
        info = self.endpoint.describe() if loaded else {"name": self.api.name, "kind": self.api.kind}
        info["status"] = self.state
        models = info.get("models")
        if self.pipeline.routes is not None and isinstance(models, dict):
            models["batches"] = describe_routes(self.pipeline.routes)  # V2 batch sizes per model version
        if self.error:
            info["error"] = self.error
        return info


def state_of(rt: ApiRuntime) -> dict[str, Any]:
    """An API's status for /readyz: ``{"status": ..., "error": ...}``."""
    return {"status": rt.state, **({"error": rt.error} if rt.error else {})}
