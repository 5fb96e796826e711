"""One API inside a replica: its endpoint, its engine (pipeline and lifecycle), its state, its figures."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

from localserve.config import ApiConfig, ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine.lifecycle import Lifecycle
from localserve.engine.pipeline import Pipeline
from localserve.engine.ports import Hooks
from localserve.error_text import without_paths
from localserve.errors import HandlerLoadError, LocalServeError
from localserve.handlers import Endpoint, EndpointOptions, create_endpoint, no_stage
from localserve.metrics import Metrics
from localserve.runtimes import LoadOptions

log = logging.getLogger("localserve")


class ApiRuntime:
    """One API in this process: its endpoint, its engine (pipeline and lifecycle), its state."""

    def __init__(self, api: ApiConfig, config: ServeConfig, options: ServeOptions, metrics: Metrics | None) -> None:
        self.api = api
        self.project = config.project
        self.metrics = metrics
        self.state = "loading"
        self.error: str | None = None
        load = LoadOptions(
            signature_key=api.tf_signature_key,
            threads=api.model_threads,
            gpu=api.compute.gpu > 0,
            allow_cpu_fallback=options.allow_cpu_fallback,
            cuda_options=api.cuda_options,
            replicas=options.replicas,
            api_threads=api.threads_per_process,
            batch_interval=api.batching.batch_interval if api.batching else 0.0,
        )
        observe = metrics.stage_observer(api.name) if metrics is not None else no_stage
        endpoint_options = EndpointOptions(
            project=config.project,
            load=load,
            observe=observe,
            metrics_client=metrics.client(api.name) if metrics is not None else None,
            cache_dir=options.cache_dir,
            s3_endpoint=options.s3_endpoint,
        )
        hooks = Hooks()
        if metrics is not None:
            hooks = Hooks(
                # Alone, the queue depth is read at scrape time (read_live below); replicas write it.
                depth=functools.partial(metrics.set_queue_depth, api.name) if metrics.multiprocess else None,
                batch=metrics.api(api.name).batch_size.observe,  # the child itself: once per model call
                stage=observe,
                phases=metrics.phase_observer(api.name),  # Triton's queue and compute statistics (V2)
            )
        self.endpoint: Endpoint = create_endpoint(api, endpoint_options)
        self.pipeline = Pipeline(api, self.endpoint, hooks)
        self.lifecycle = Lifecycle(self.pipeline, status=self._status)
        self.in_flight = 0  # requests of this API inside the server (reading, queued, running, sending); loop only
        self.counted = None if metrics is None else metrics.api(api.name)  # this API's request metrics
        self.write_in_flight = metrics is not None and metrics.multiprocess  # else the gauge reads in_flight
        if metrics is not None and not metrics.multiprocess:
            metrics.read_live(api.name, lambda: self.in_flight, lambda: self.pipeline.depth)

    def _status(self) -> tuple[str, str | None]:
        return self.state, self.error

    async def load(self) -> None:
        """Load the API on its worker thread (user code, model, warm-up); its state becomes ready or failed."""
        start = time.perf_counter()
        try:
            await asyncio.wrap_future(self.pipeline.call(self._load))
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

    def _load(self) -> None:
        self.endpoint.load()
        self.pipeline.attach_model()  # dynamic batching: every batch size warmed before ready

    def describe(self) -> dict[str, Any]:
        """JSON for GET /<api>: the endpoint's description with the API's status (and error)."""
        info = self.endpoint.describe() if self.state == "ready" else {"name": self.api.name, "kind": self.api.kind}
        info["status"] = self.state
        if self.error:
            info["error"] = self.error
        return info


def state_of(rt: ApiRuntime) -> dict[str, Any]:
    """An API's status for /readyz: ``{"status": ..., "error": ...}``."""
    return {"status": rt.state, **({"error": rt.error} if rt.error else {})}
