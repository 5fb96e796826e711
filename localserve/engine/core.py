"""The engine of one replica: every API it serves, and every request of every front door, counted once.

The front doors (the native routes in ``server/``, ``protocols/v2``, ``protocols/asyncapi``) get
this object, never the ASGI app. Per request they call, in this order::

    rt = engine.apis.get(name)                  # the API
    engine.began(rt)                            # in flight
    with rt.lifecycle.admit():                  # 503 when not ready or full, before the body is read
        body = ...                              # the front door reads it (its own limit)
    reply = await rt.lifecycle.run(request, client, stages=..., writer=...)   # deadline, client gone
    engine.ended(rt, method, path, status, seconds, request_id, value)        # counted once

The engine also owns the replica's lifecycle: loading every API at start-up (then freezing the
heap and pinning threads where it helps) and the shutdown (``begin_shutdown``: once the graceful
timeout runs out nothing queued starts and every waiting client gets a 503).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import gc
import logging
import os
from collections.abc import Callable
from typing import Any

from localserve.config import ApiConfig, ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime, Runtime
from localserve.engine.leftovers import Leftovers, join_all
from localserve.engine.memory import hold_thresholds, keep_freed_memory, trim_heap
from localserve.engine.pinning import move_away, pin_this_thread, thread_ids
from localserve.errors import LocalServeError
from localserve.logs import access_log
from localserve.metrics import Metrics
from localserve.metrics.extras import ExtraMetrics
from localserve.metrics.summary import StatsSummary

log = logging.getLogger("localserve")

GEN0_THRESHOLD = 10_000  # allocations between two collections of the youngest generation once serving (freeze_heap)
PIN_BELOW = 0.001  # with no --pin-threads flag: pinned when a request takes less CPU on its API's thread


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
        self.apis = {api.name: ApiRuntime(api, config, options, self.metrics, self.extras) for api in config.apis}
        self.stats = StatsSummary(self.figures, config.apis, lambda name: self.apis[name].state)
        self.loading: asyncio.Task[None] | None = None
        self.loading_threads: set[int] = set()  # threads started while the APIs loaded (thread ids)
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cancel_timer: asyncio.TimerHandle | None = None
        self.request_cpu: dict[str, float] = {}  # CPU seconds a request takes on its API's thread (pinning default)
        self.retiring: dict[Runtime, asyncio.Task[None]] = {}  # replaced runtimes answering their last requests
        self._ended = Leftovers()  # the threads of runtimes replaced or whose reload was cancelled

    # -- every request, counted once --------------------------------------------------------------
    def began(self, rt: ApiRuntime) -> None:
        """A request of ``rt``'s API came in (any protocol): it is in flight."""
        rt.in_flight += 1
        counted = rt.counted
        if counted is not None and rt.write_in_flight:
            counted.in_flight.inc()

    def ended(
        self, rt: ApiRuntime, method: str, path: str, status: int, seconds: float, request_id: str, value: Any
    ) -> None:
        """A request of ``rt``'s API was answered (any front door): counted once, its access line, its tracker."""
        rt.in_flight -= 1
        counted = rt.counted
        if counted is not None:
            if rt.write_in_flight:
                counted.in_flight.dec()
            self.figures.count(counted, status, seconds)
        if self.access_log:
            access_log(method, path, rt.api.name, status, seconds, request_id)
        if rt.api.tracker is not None and 200 <= status < 300:
            self.stats.record_prediction(rt.api.name, value)

    # -- the replica's lifecycle -------------------------------------------------------------------
    async def startup(self, *, wait: bool) -> None:
        """Start the workers and load every API (in the background unless ``wait``)."""
        for rt in self.apis.values():
            rt.pipeline.start()
        self.loop = asyncio.get_running_loop()
        self.loading = self.loop.create_task(self._load_all())
        if wait:
            await self.loading

    async def _load_all(self) -> None:
        if self.options.tune_malloc:
            hold_thresholds()  # what loading frees leaves the RSS (engine/memory.py)
        if self.options.freeze_heap:  # start-up's imports (no garbage: a collection here finds none), so that
            gc.freeze()  # freeze_heap's collection walks only what loading made (1 ms, not 15, on the mlp's start)
        before = thread_ids()
        for rt in self.apis.values():
            try:
                await rt.load()
            except LocalServeError as exc:
                log.error("%s", exc)
                if not (self.options.keep_going or self.options.reload):  # --reload: the next good save loads it
                    if self.on_fatal is None:
                        raise
                    self.on_fatal(exc)
                    return
        self.loading_threads = thread_ids() - before  # the runtimes' pools among them (pin_threads)
        self._settle()

    def _settle(self) -> None:
        """Once every API is loaded: the heap frozen, freed memory kept, the threads pinned (now or once measured)."""
        if self.options.freeze_heap:
            self.freeze_heap()
        if self.options.tune_malloc:
            keep_freed_memory()
        pin = self.options.pin_threads
        if pin:
            self.pin_threads()
        elif pin is None and not self.options.reload and self.pin_by_default():
            for rt in self.apis.values():  # pinned once every API's requests prove short (see _measured)
                rt.pipeline.measure(functools.partial(self._measured, rt.api.name))

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

    @staticmethod
    def freeze_heap() -> None:
        """Collect once, then leave everything the process holds now out of later collections (``gc.freeze``).

        What loading made (modules, the user's code, TensorFlow's objects) lives as long as the process, yet
        every full collection walked it again: serving the iris model batched at c=64 on 2 cores, the collector
        ran 25 full collections in 7 s of 20 ms each (a pause in the p99) and took 9 µs a request in all; frozen,
        a full collection took 4 ms and the collector 6 µs a request, and the server answered 6% more.
        Requests' own objects are collected as before: nothing made after this call is frozen.

        The youngest generation is then collected every ``GEN0_THRESHOLD`` allocations instead of 700:
        with requests in flight their objects keep its count up, and at c=64 (iris, 2 cores) it ran
        every ~40 requests, a pause of 0.1-0.2 ms each time (and a gen-1 pause every ~450); at 10,000
        it ran once in 6,000-12,000 requests (1.7-2 ms), the CPU a request the same
        (``benchmarks/hotpath.py --concurrency 64 --gc-threshold``).
        """
        gc.collect()
        gc.freeze()
        gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
        trim_heap()  # what loading freed goes back to the kernel (engine/memory.py)
        log.debug("garbage collector: %d objects frozen after loading", gc.get_freeze_count())

    def pin_by_default(self) -> bool:
        """Whether pinning may be the default (done once requests prove short): every API a CPU model, one thread.

        Those APIs run only our runtimes' code and the user's pre/post_inference on their thread, and the
        runtimes' thread pools are made while loading, so pinning can move them off. Handlers and predictors may
        start thread pools of their own later (torch does at its first call), which would inherit the one core,
        and several threads per API are there to use more cores: those are pinned only if ``--pin-threads`` asks.
        Nor is a Kubernetes pod (``on_kubernetes``: the CLI saw ``KUBERNETES_SERVICE_HOST``), whose node's other
        pods would pin to the same core. ``_decide_pinning`` decides from the measured requests.
        """
        if self.options.on_kubernetes:
            return False
        try:
            if len(os.sched_getaffinity(0)) < 2:
                return False
        except AttributeError:
            return False
        return all(
            rt.api.kind == "request_handler"
            and rt.api.threads_per_process == 1
            and rt.api.compute.gpu == 0
            and not rt.api.is_async
            for rt in self.apis.values()
        )

    def _measured(self, api: str, seconds: float) -> None:
        """An API's thread measured its CPU time per request (on that thread): decide on the loop."""
        loop = self.loop
        if loop is not None:
            try:
                # A fresh context: the decision's log lines are the server's, not the last request's.
                loop.call_soon_threadsafe(self._decide_pinning, api, seconds, context=contextvars.Context())
            except RuntimeError:  # the loop is closed: the server is gone
                pass

    def _decide_pinning(self, api: str, seconds: float) -> None:
        """Pin by default once every API's requests take under ``PIN_BELOW`` of CPU on their thread.

        Pinning saves a fixed cost per request (two threads handing it over on one core) and loses the overlap
        of GIL-free work (Pillow's decoder, numpy) with the loop's: iris at concurrency 64 went from 0.67x a
        minimal Starlette app unpinned to 0.95x pinned; a JPEG pipeline (2-3 ms of decoding a request) lost 13-18%.
        """
        self.request_cpu[api] = seconds
        if len(self.request_cpu) < len(self.apis):
            return
        slowest = max(self.request_cpu, key=self.request_cpu.__getitem__)
        cost = self.request_cpu[slowest] * 1e6
        if cost < PIN_BELOW * 1e6:
            log.info("requests take %.0f us of CPU on their thread at most (api %r): pinning", cost, slowest)
            self.pin_threads()
        else:
            log.info(
                "api %r: requests take %.0f us of CPU on their thread, over %.0f us: the threads keep every core",
                slowest,
                cost,
                PIN_BELOW * 1e6,
            )

    def pin_threads(self) -> None:
        """Put the event loop and every API's worker threads on one core (``--pin-threads``), and the threads the
        runtimes made while loading on the others (engine/pinning.py). Replica i of the server on port p takes
        allowed core (p + i) mod the number of cores: the replicas of a server, and servers on neighbouring
        ports, take different cores."""
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except AttributeError:
            if self.options.pin_threads:
                log.warning("--pin-threads: this platform cannot pin threads to cores; ignored")
            return
        cpus = {allowed[(self.options.port + self.options.replica) % len(allowed)]}
        pin_this_thread(cpus)  # the event loop
        moved = move_away(self.loading_threads, cpus, allowed)
        for rt in self.apis.values():
            rt.pipeline.pin(cpus)
        log.info("event loop and worker threads pinned to CPU %d, %d threads of the runtimes off it", min(cpus), moved)

    def begin_shutdown(self) -> None:
        """A stop was asked for (SIGTERM/SIGINT): once ``graceful_timeout`` runs out, cancel what still waits.

        Called from the server's signal handling, on the event loop's thread.
        """
        if self.options.accept_when_loaded and self.loading is not None and not self.loading.done():
            self.loading.cancel()  # a replacement still loading has taken no connection: nothing to finish
        if self.loop is not None and self._cancel_timer is None:
            self._cancel_timer = self.loop.call_later(self.options.graceful_timeout, self.cancel_waiting)

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
        """Cancel loading and the requests still waiting."""
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
        if self._cancel_timer is not None:
            self._cancel_timer.cancel()
        self.cancel_waiting()

    def join_threads(self, timeout: float) -> list[str]:
        """After ``shutdown``: wait up to ``timeout`` seconds for every API's threads; the names of those still running."""
        pipelines = [rt.pipeline for rt in self.apis.values()] + [old.pipeline for old in self.retiring]
        return join_all([t for pipeline in pipelines for t in pipeline.all_threads()] + self._ended.alive(), timeout)

    @property
    def ready(self) -> bool:
        """Whether every API is loaded (GET /readyz is 200)."""
        return all(rt.state == "ready" for rt in self.apis.values())
