"""The engine of one replica: every API it serves, and every request of every front door, whole.

A front door (the native routes, V2 over REST and gRPC, AsyncAPI, the TrafficSplitter) decodes its
wire into an ``Exchange`` and makes one call::

    reply = await engine.submit(rt, exchange)   # admitted, read, run, answered, recorded

``submit`` owns the request from admission to its records, in one ``try/finally``: the count in
flight, admission (503 before the body is read), the run (deadline, client gone, shutdown: the
``Lifecycle``), the answer's sending and its after-reply stage, then the metrics, the access line
and the tracker. The engine also loads every API at start-up and owns the replica's shutdown.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from localserve.config import ApiConfig, ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime, Runtime
from localserve.engine.leftovers import Leftovers, join_all
from localserve.engine.memory import freeze_heap, hold_thresholds, keep_freed_memory
from localserve.engine.pinner import Pinner
from localserve.engine.pinning import thread_ids
from localserve.engine.ports import Exchange, Stages
from localserve.engine.traces import end_span
from localserve.errors import ClientGone, LocalServeError
from localserve.logs import access_log
from localserve.logs.trace_ids import trace_var
from localserve.messages.response import Reply
from localserve.metrics import Metrics
from localserve.metrics.extras import ExtraMetrics
from localserve.metrics.summary import StatsSummary
from localserve.tracing import start_tracing

if TYPE_CHECKING:
    from localserve.tracing.spans import RequestSpan, Tracing

log = logging.getLogger("localserve")


class Engine:
    """The APIs of one replica and the one place their requests are counted."""

    def __init__(
        self, config: ServeConfig, options: ServeOptions, on_fatal: Callable[[LocalServeError], None] | None = None
    ) -> None:
        self.config = config
        self.options = options
        self.on_fatal = on_fatal
        # One source of figures: /metrics, /stats, `localserve get` and the dashboard all read these.
        # With --no-metrics nothing is counted (the tracker still is) and /metrics answers 404.
        self.figures = Metrics([api.name for api in config.apis], directory=options.metrics_dir)
        self.metrics = self.figures if options.metrics else None
        self.access_log = options.access_log
        # Splitters' targets and shadows, post_predict failures: counted only with metrics on.
        self.extras = ExtraMetrics(self.figures.registry) if options.metrics else None
        # OTEL_* asked for spans (cli/otel.py): the SDK is imported and set up here, else never.
        self.tracer: Tracing | None = None if options.tracing is None else start_tracing(options.tracing)
        self.apis = {
            api.name: ApiRuntime(api, config, options, self.metrics, self.extras, self.tracer) for api in config.apis
        }
        self.stats = StatsSummary(self.figures, config.apis, lambda name: self.apis[name].state)
        self.loading: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cancel_timer: asyncio.TimerHandle | None = None
        self.pinner = Pinner(self.apis, options)
        self.retiring: dict[Runtime, asyncio.Task[None]] = {}  # replaced runtimes answering their last requests
        self._ended = Leftovers()  # the threads of runtimes replaced or whose reload was cancelled

    # -- every request, whole --------------------------------------------------------------------
    async def submit(self, rt: ApiRuntime, exchange: Exchange, *, admit: bool = True) -> Reply:
        """Serve one request of ``rt``'s API through its door's ``exchange``; the Reply it got, or a 499 when the
        client left. Errors are rendered by the door and sent; nothing but a cancellation leaves here. ``admit``:
        False for what takes no place in the API's queue (an AsyncAPI's poll)."""
        start = time.perf_counter()
        rt.in_flight += 1
        counted = rt.counted
        if counted is not None and rt.write_in_flight:
            counted.in_flight.inc()
        reply = None
        stages: Stages | None = None  # a protocol's own (V2's): the rows and model version it ran, for the records
        status = 500  # a bug of ours escaped: the server answers it (uvicorn's 500, grpc's UNKNOWN)
        span = None if self.tracer is None else self._trace(rt, exchange, start)
        try:
            lifecycle = rt.lifecycle
            try:
                if admit:
                    with lifecycle.admit():
                        received = await exchange.receive()
                else:
                    received = await exchange.receive()
                if isinstance(received, Reply):
                    reply = received
                else:
                    # The runtime serving now (serve --reload may have swapped another in while the body came)
                    # answers, and its threads run the reply's after-reply stage.
                    lifecycle = rt.lifecycle
                    request, stages = received
                    del received
                    reply = await lifecycle.run(
                        request,
                        exchange.client,
                        stages=stages,
                        writer=exchange.writer,
                        deadline=exchange.deadline,
                        span=span,
                    )
            except LocalServeError as exc:
                if span is not None:
                    span.error = exc
                reply = exchange.render(exc)
            try:
                await exchange.send(reply)
                if span is not None:
                    span.sent = time.perf_counter()
            finally:  # post_predict: once the answer is out (or its client gone), on the API's threads
                lifecycle.after_reply(reply, exchange.request_id, span)
            status = reply.status
            return reply
        except ClientGone:  # it left while its body came in, or before its answer went out
            status = 499
            return Reply(status=499)
        except asyncio.CancelledError:  # gRPC's client cancelled or its deadline passed, or the server stopped
            status = 499
            raise
        finally:
            self._record(rt, exchange, status, time.perf_counter() - start, reply, span, stages)

    def _record(
        self,
        rt: ApiRuntime,
        exchange: Exchange,
        status: int,
        seconds: float,
        reply: Reply | None,
        span: RequestSpan | None = None,
        stages: Stages | None = None,
    ) -> None:
        rt.in_flight -= 1
        trace = exemplar = None
        if span is not None:
            trace = span.log_ids
            exemplar = trace[0] if trace is not None and span.sampled else None
            end_span(span, rt.api, status)
            trace_var.set(None)  # a door may serve its next request in this task (an ASGI transport's caller)
        counted = rt.counted
        if counted is not None:
            if rt.write_in_flight:
                counted.in_flight.dec()
            self.figures.count(counted, status, seconds, exemplar)
            if stages is not None and 200 <= status < 300:  # V2's rows right after its success (v2/stats.py)
                counted.rows.observe(stages.rows, stages.ran)
        if self.access_log:
            access_log(exchange.method, exchange.path, rt.api.name, status, seconds, exchange.request_id, trace)
        if exchange.tracked and reply is not None and rt.api.tracker is not None and 200 <= status < 300:
            self.stats.record_prediction(rt.api.name, reply.value)

    def _trace(self, rt: ApiRuntime, exchange: Exchange, start: float) -> RequestSpan:
        """Open the request's SERVER span (tracing on): current for the request, its ids on the loop's log lines."""
        assert self.tracer is not None
        span = self.tracer.begin(exchange.traced(), rt.api.name, exchange.request_id, start)
        trace_var.set(span.log_ids)  # this request's task only: its context is its own
        return span

    def unrouted(self, method: str, path: str, status: int, seconds: float, request_id: str) -> None:
        """A request answered before any API took it (V2's unknown model): its access line alone."""
        if self.access_log:
            access_log(method, path, None, status, seconds, request_id)

    # -- the replica's lifecycle -------------------------------------------------------------------
    async def startup(self, *, wait: bool) -> None:
        """Start the workers and load every API (in the background unless ``wait``)."""
        for rt in self.apis.values():
            rt.pipeline.start()
        self.loop = self.pinner.loop = asyncio.get_running_loop()
        self.loading = self.loop.create_task(self._load_all())
        if wait:
            await self.loading

    async def _load_all(self) -> None:
        if self.options.tune_malloc:
            hold_thresholds()  # what loading frees leaves the RSS (engine/memory.py)
        if self.options.freeze_heap:  # start-up's imports (no garbage: a collection here finds none), so that
            gc.freeze()  # freeze_heap's collection walks only what loading made
        before = thread_ids()
        for rt in self.apis.values():
            try:
                await rt.load()
            except LocalServeError as exc:
                if self.on_fatal is None or self.options.keep_going or self.options.reload:
                    log.error("%s", exc)  # else on_fatal's owner reports it (the command's error)
                if not (self.options.keep_going or self.options.reload):  # --reload: the next good save loads it
                    if self.on_fatal is None:
                        raise
                    self.on_fatal(exc)
                    return
        self.pinner.loading_threads = thread_ids() - before  # the runtimes' pools among them (Pinner.pin)
        self._settle()

    def _settle(self) -> None:
        """Once every API is loaded: the heap frozen, freed memory kept, the threads pinned (now or once measured)."""
        if self.options.freeze_heap:
            freeze_heap()
        if self.options.tune_malloc:
            keep_freed_memory()
        pin = self.options.pin_threads
        if pin:
            self.pinner.pin()
        elif pin is None and not self.options.reload and self.pinner.by_default():
            for rt in self.apis.values():  # pinned once every API's requests prove short (Pinner.measured)
                rt.pipeline.measure(functools.partial(self.pinner.measured, rt.api.name))

    async def replace_api(self, name: str, api: ApiConfig) -> float:
        """Load ``api`` beside API ``name``'s runtime, then serve it; the seconds its load took (``serve --reload``).

        The new runtime loads and warms up on threads of its own while the old one serves; then, in
        one step on the event loop, new requests get the new one and the old one drains: the
        requests queued or running on it finish there, then its threads end. A failure raises a
        LocalServeError and changes nothing.
        """
        rt = self.apis[name]
        runtime = rt.build(api)
        try:
            seconds = await rt.load_runtime(runtime)
        except BaseException:  # failed (its threads told to stop) or cancelled (a stop while it loaded)
            runtime.pipeline.stop()
            self._ended.keep(runtime.pipeline.all_threads())
            raise
        old = rt.swap(runtime)
        self.retiring[old] = asyncio.get_running_loop().create_task(self._retire(old))
        return seconds

    async def _retire(self, old: Runtime) -> None:
        try:
            await old.lifecycle.drained()
        finally:
            old.pipeline.stop()
            self._ended.keep(old.pipeline.all_threads())  # a request past its timeout may still run there
            self.retiring.pop(old, None)

    def begin_shutdown(self, graceful_timeout: float) -> None:
        """A stop was asked for (SIGTERM/SIGINT): once ``graceful_timeout`` runs out, cancel what still waits.

        Called by the server's ``Shutdown`` (server/shutdown.py), on the event loop's thread.
        """
        if self.options.accept_when_loaded and self.loading is not None and not self.loading.done():
            self.loading.cancel()  # a replacement still loading has taken no connection: nothing to finish
        if self.loop is not None and self._cancel_timer is None:
            self._cancel_timer = self.loop.call_later(graceful_timeout, self.cancel_waiting)

    def cancel_waiting(self) -> None:
        """Nothing queued starts any more, and every client still waiting gets a JSON 503."""
        for name, runtime in [(rt.api.name, rt.runtime) for rt in self.apis.values()] + [
            (old.api.name, old) for old in self.retiring
        ]:
            runtime.pipeline.stop()
            count = runtime.lifecycle.cancel_waiting()
            if count:
                log.warning("api %r: %d request(s) still waiting were answered 503 as the server stopped", name, count)

    async def shutdown(self) -> None:
        """Cancel loading and the requests still waiting; export the spans still queued."""
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
        if self._cancel_timer is not None:
            self._cancel_timer.cancel()
        self.cancel_waiting()
        if self.tracer is not None:
            await asyncio.sleep(0)  # the requests just answered 503 end their spans
            await asyncio.to_thread(self.tracer.shutdown)

    def join_threads(self, timeout: float) -> list[str]:
        """After ``shutdown``: wait up to ``timeout`` seconds for every API's threads; the names of those still running."""
        pipelines = [rt.pipeline for rt in self.apis.values()] + [old.pipeline for old in self.retiring]
        return join_all([t for pipeline in pipelines for t in pipeline.all_threads()] + self._ended.alive(), timeout)

    @property
    def ready(self) -> bool:
        """Whether every API is loaded (GET /readyz is 200)."""
        return all(rt.state == "ready" for rt in self.apis.values())
