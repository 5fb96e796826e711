"""One API inside a replica (ApiRuntime) and the options of a replica (ServeOptions)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localserve.config import ApiConfig, ServeConfig
from localserve.engine import Hooks, Lifecycle, Pipeline
from localserve.errors import LocalServeError
from localserve.handlers import Endpoint, EndpointOptions, create_endpoint
from localserve.metrics import Metrics
from localserve.response import without_paths
from localserve.runtimes import LoadOptions

log = logging.getLogger("localserve")
MiB = 1024 * 1024


@dataclass(frozen=True)
class ServeOptions:
    """How a replica serves (limits, metrics, logs, shutdown, API key): the CLI's flags, passed to the App."""

    max_body_size: int = 100 * MiB
    allow_cpu_fallback: bool = False
    keep_going: bool = False  # a failed API answers 503 instead of stopping the start
    access_log: bool = True  # one log line per request
    metrics: bool = True  # Prometheus metrics (GET /metrics); off only to measure what they cost
    # Event loop and worker threads on one core once the models are loaded; None: where it helps (App.pin_by_default).
    pin_threads: bool | None = False
    port: int = 0  # the port served (with the replica's index, it picks the core to pin to)
    graceful_timeout: float = 30.0  # seconds queued and running requests get once a shutdown begins
    hide_errors: bool = False  # 500 bodies say only "see the log" (--hide-errors)
    api_key: str | None = None  # every route but the health probes needs "Authorization: Bearer <key>"
    # Once every API is loaded: collect, then gc.freeze() what the process holds (App.freeze_heap).
    # `localserve serve` sets it; an App in a test process leaves the test's heap alone.
    freeze_heap: bool = False
    # Given by the supervisor to each replica (one process: the defaults).
    replica: int = 0  # this replica's index (--pin-threads picks the core by it and the port)
    replicas: int = 1  # replica processes of this serve (runtimes divide the cores among them)
    metrics_dir: str | None = None  # prometheus_client's multiprocess folder of a serve with replicas
    # A replacement replica while a sibling serves: take connections off the shared socket only once
    # every API is loaded, so the port keeps answering 200 instead of "still loading" 503s.
    accept_when_loaded: bool = False
    log_format: str | None = None  # --log-format (None: json unless stderr is a terminal)
    log_level: str = "info"  # --log-level
    # Read from the environment by the CLI, never below it:
    forwarded_allow_ips: str = "127.0.0.1,::1"  # --forwarded-allow-ips: proxies whose X-Forwarded-* are applied
    on_kubernetes: bool = False  # KUBERNETES_SERVICE_HOST is set: pods of a node share its cores (no pinning default)
    cache_dir: Path | None = (
        None  # --cache-dir (LOCALSERVE_CACHE_DIR); None: $XDG_CACHE_HOME/localserve or ~/.cache/localserve
    )
    s3_endpoint: str | None = None  # LOCALSERVE_S3_ENDPOINT (deprecated); None: botocore's own (AWS_ENDPOINT_URL_S3)
    cuda_visible_devices: str | None = (
        None  # CUDA_VISIBLE_DEVICES: the GPUs replicas are spread over (None: nvidia-smi's)
    )


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
        endpoint_options = EndpointOptions(
            project=config.project, load=load, cache_dir=options.cache_dir, s3_endpoint=options.s3_endpoint
        )
        hooks = Hooks()
        if metrics is not None:
            endpoint_options = dataclasses.replace(
                endpoint_options, observe=metrics.stage_observer(api.name), metrics_client=metrics.client(api.name)
            )
            hooks = Hooks(
                # Alone, the queue depth is read at scrape time (read_live below); replicas write it.
                depth=functools.partial(metrics.set_queue_depth, api.name) if metrics.multiprocess else None,
                batch=metrics.api(api.name).batch_size.observe,  # the child itself: once per model call
                stage=endpoint_options.observe,
            )
        self.endpoint: Endpoint = create_endpoint(api, endpoint_options)
        self.pipeline = Pipeline(api, self.endpoint, hooks)
        self.lifecycle = Lifecycle(
            self.pipeline, max_body_size=options.max_body_size, status=self._status, hide_errors=options.hide_errors
        )
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
            raise
        except Exception as exc:
            self.state, self.error = "failed", without_paths(f"{type(exc).__name__}: {exc}", self.project)
            log.exception("api %r failed to load", self.api.name)
            raise LocalServeError(f"api {self.api.name!r} failed to load: {self.error}") from exc
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
