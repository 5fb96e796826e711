"""The ASGI application of one replica: routes, lifecycle, the prediction hot path, errors as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from localserve.compat.hosts import route_by_host
from localserve.config import ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine import json_reply, send_reply
from localserve.engine.lifecycle import Receive, Scope, Send
from localserve.errors import LocalServeError, NotFound
from localserve.logs import access_log, flush_access_log
from localserve.metrics import Metrics
from localserve.metrics.summary import StatsSummary
from localserve.project import default_cache_dir
from localserve.protocols.asyncapi import AsyncJobs
from localserve.protocols.v2.routes import V2Routes, infer_params
from localserve.response import error_body
from localserve.server.api import ApiRuntime, state_of
from localserve.server.methods import answer_method
from localserve.server.pages import Pages
from localserve.server.wire import request_id_of

log = logging.getLogger("localserve")
METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _method_rank(method: str) -> int:
    return METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER)


# With no --pin-threads flag, threads are pinned when a request takes less CPU than this on its
# API's thread (see App._decide_pinning).
PIN_BELOW = 0.001


class App:
    """The ASGI application of one replica."""

    def __init__(
        self,
        config: ServeConfig,
        options: ServeOptions | None = None,
        on_fatal: Callable[[LocalServeError], None] | None = None,
    ) -> None:
        self.config = config
        self.options = options or ServeOptions()
        self.on_fatal = on_fatal
        # One source of figures: /metrics, /stats, `localserve get` and the dashboard all read these.
        # With --no-metrics nothing is counted (the tracker still is) and /metrics answers 404.
        self.figures = Metrics([api.name for api in config.apis], directory=self.options.metrics_dir)
        self.metrics = self.figures if self.options.metrics else None
        self.access_log = self.options.access_log
        self.apis = {api.name: ApiRuntime(api, config, self.options, self.metrics) for api in config.apis}
        self.stats = StatsSummary(self.figures, config.apis, lambda name: self.apis[name].state)
        self.routes: dict[str, tuple[ApiRuntime, bool]] = {}  # path -> (api, is the /predict form)
        for rt in self.apis.values():
            self.routes[f"/{rt.api.name}"] = (rt, False)
            self.routes[f"/{rt.api.name}/predict"] = (rt, True)
        if len(self.apis) == 1:
            only = next(iter(self.apis.values()))
            self.routes["/"] = (only, only.api.kind == "abeja")
            self.routes["/predict"] = (only, True)
        self.jobs = AsyncJobs(  # kind: AsyncAPI: POST /<api> submits, GET /<api>/<id> polls
            self.apis,
            project=config.project,
            max_body_size=self.options.max_body_size,
            cache=self.options.cache_dir or default_cache_dir(),
        )
        self.loading: asyncio.Task[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._cancel_timer: asyncio.TimerHandle | None = None
        self.request_cpu: dict[str, float] = {}  # CPU seconds a request takes on its API's thread (pinning default)
        self.v2 = V2Routes(self)
        self.starlette = Starlette(
            routes=[
                Route("/healthz", self.healthz),
                Route("/health_check", self.healthz),
                Route("/v2/health/live", self.healthz),
                Route("/readyz", self.readyz),
                Route("/v2/health/ready", self.readyz),
                *self.v2.routes(),
                Route("/metrics", self.metrics_route),
                Route("/stats", self.all_stats),
                Route("/{name}/stats", self.api_stats),
                *Pages(self).routes(),
            ],
            exception_handlers={404: self.not_found, 405: self.not_found},
            lifespan=self.lifespan,
            # X-Forwarded-For/-Proto from a trusted proxy, as uvicorn's proxy_headers would apply them,
            # for these routes alone: the prediction routes never read the client or the scheme, and the
            # middleware parses the client's address on every request (serve runs uvicorn without it).
            middleware=[
                Middleware(
                    ProxyHeadersMiddleware,  # type: ignore[arg-type]  # uvicorn's stricter ASGI types
                    trusted_hosts=self.options.forwarded_allow_ips,
                )
            ],
        )
        # API names routed by Host (``Host: api-<name>`` on / or /predict goes to /<name>/predict): set by serve.
        self.host_names: frozenset[str] = frozenset()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.host_names and scope["path"] in ("/", "/predict"):
                scope = route_by_host(scope, self.host_names)  # Host: api-<name> (seed 001)
            if self.jobs and (name := self.jobs.claims(scope)) is not None:
                await self.serve_job_request(self.apis[name], scope, receive, send)
                return
            route = self.routes.get(scope["path"])
            if route is not None and scope["method"] != "POST" and await answer_method(route, scope, send):
                return
            if route is not None and (route[1] or scope["method"] != "GET"):
                await self.serve(route[0], scope, receive, send)
                return
            if route is not None:
                await send_reply(send, json_reply(200, route[0].describe()), request_id_of(scope))
                return
            if scope["method"] == "POST" and (params := infer_params(scope["path"])) is not None:
                scope["path_params"] = params  # the Open Inference Protocol's infer, without Starlette's router
                await self.v2.infer(scope, receive, send)
                return
        await self.starlette(scope, receive, send)

    # -- lifecycle ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        """Starlette's lifespan: load the APIs at start-up, shut down at the end."""
        await self.startup(wait=False)
        if self.options.accept_when_loaded and self.loading is not None:
            await asyncio.wait({self.loading})  # uvicorn accepts once the lifespan has started
        try:
            yield
        finally:
            await self.shutdown()

    async def startup(self, *, wait: bool) -> None:
        """Start the workers and load every API (in the background unless ``wait``)."""
        for rt in self.apis.values():
            rt.pipeline.start()
        if self.options.async_jobs:
            self.jobs.start()
        self.loop = asyncio.get_running_loop()
        self.loading = self.loop.create_task(self._load_all())
        if wait:
            await self.loading

    async def _load_all(self) -> None:
        for rt in self.apis.values():
            try:
                await rt.load()
            except LocalServeError as exc:
                log.error("%s", exc)
                if not self.options.keep_going:
                    if self.on_fatal is None:
                        raise
                    self.on_fatal(exc)
                    return
        if self.options.freeze_heap:
            self.freeze_heap()
        pin = self.options.pin_threads
        if pin:
            self.pin_threads()
        elif pin is None and self.pin_by_default():
            for rt in self.apis.values():  # pinned once every API's requests prove short (see _measured)
                rt.pipeline.measure(functools.partial(self._measured, rt.api.name))

    @staticmethod
    def freeze_heap() -> None:
        """Collect once, then leave everything the process holds now out of later collections (``gc.freeze``).

        What loading made (modules, the user's code, TensorFlow's objects) lives as long as the
        process, yet every full collection walked it again: serving the iris model batched at
        c=64 on 2 cores, the collector ran 25 full collections in 7 s of 20 ms each (a pause in
        the p99) and took 9 µs a request in all; frozen, a full collection took 4 ms and the
        collector 6 µs a request, and the server answered 6% more. Requests' own objects are
        collected as before: nothing made after this call is frozen.
        """
        gc.collect()
        gc.freeze()
        log.debug("garbage collector: %d objects frozen after loading", gc.get_freeze_count())

    def pin_by_default(self) -> bool:
        """Whether pinning may be the default: every API a model on CPU with one thread.

        Such a server then measures its requests and pins once they prove short
        (``_decide_pinning``).

        Those APIs run only our runtimes' code and the user's pre/post_inference on their thread,
        and the runtimes' thread pools are made while loading, so they keep every core. Handlers
        and predictors may start thread pools of their own later (torch does at its first call),
        which would inherit the one core, and several threads per API are there to use more
        cores: those are left alone unless ``--pin-threads`` asks. In a Kubernetes pod
        (``KUBERNETES_SERVICE_HOST``) the other pods of the node see the same cores and would
        pin to the same one, so the default is off there.
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

        Pinning saves a fixed cost per request (two threads handing each request over on one
        core); it loses the overlap of a thread's GIL-free work (Pillow's decoder, numpy) with
        the event loop's. Short requests gain (iris at concurrency 64: 0.67x a minimal Starlette
        app unpinned, 0.95x pinned); a JPEG pipeline (2-3 ms of decoding a request) lost 13-18%.
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
        """Put the event loop and every API's worker threads on one core (``--pin-threads``).

        A request crosses from the loop to a worker thread and back; on one core each crossing
        is a direct switch instead of a wake-up on another core (measured here: a 52 µs round
        trip became 22 µs), and the two threads do not pass the GIL between cores. Done after
        loading, so the thread pools the runtimes made while loading keep every core. Replica i
        of the server on port p takes allowed core (p + i) mod the number of cores, so the
        replicas of a server, and servers on neighbouring ports, take different cores.
        """
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except AttributeError:
            if self.options.pin_threads:
                log.warning("--pin-threads: this platform cannot pin threads to cores; ignored")
            return
        cpus = {allowed[(self.options.port + self.options.replica) % len(allowed)]}
        os.sched_setaffinity(0, cpus)  # this thread: the event loop
        for rt in self.apis.values():
            rt.pipeline.pin(cpus)
        log.info("event loop and worker threads pinned to CPU %d", next(iter(cpus)))

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
        for rt in self.apis.values():
            rt.pipeline.stop()
            count = rt.lifecycle.cancel_waiting()
            if count:
                log.warning(
                    "api %r: %d request(s) still waiting were answered 503 as the server stopped", rt.api.name, count
                )

    async def shutdown(self) -> None:
        """Cancel loading and the requests still waiting; flush stats, metrics and the access log."""
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
        if self._cancel_timer is not None:
            self._cancel_timer.cancel()
        self.jobs.stop()
        self.cancel_waiting()
        flush_access_log()

    def join_threads(self, timeout: float) -> list[str]:
        """After ``shutdown``: wait up to ``timeout`` seconds for every API's threads; the names of those still running."""
        deadline = time.monotonic() + timeout
        running: list[str] = []
        for rt in self.apis.values():
            running += rt.pipeline.join(max(0.0, deadline - time.monotonic()))
        return running

    @property
    def ready(self) -> bool:
        """Whether every API is loaded (GET /readyz is 200)."""
        return all(rt.state == "ready" for rt in self.apis.values())

    # -- the hot path -----------------------------------------------------------------------------
    async def serve(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request of ``rt``'s API, and count it once: metrics, tracker, access log."""
        start = time.perf_counter()
        request_id = request_id_of(scope)
        self.request_began(rt)
        status = 500
        value = None
        try:
            status, value = await rt.lifecycle.serve(scope, receive, send, request_id)
        finally:
            self.request_ended(rt, scope, status, time.perf_counter() - start, request_id)
        if rt.api.tracker is not None and 200 <= status < 300:
            self.stats.record_prediction(rt.api.name, value)

    async def serve_job_request(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a submit or a poll of ``rt``'s AsyncAPI, counted as its request (metrics, access log)."""
        start = time.perf_counter()
        request_id = request_id_of(scope)
        self.request_began(rt)
        status = 500
        try:
            status = await self.jobs.handle(rt.api.name, scope, receive, send, request_id)
        finally:
            self.request_ended(rt, scope, status, time.perf_counter() - start, request_id)

    def request_began(self, rt: ApiRuntime) -> None:
        """A request of ``rt``'s API came in (any protocol): it is in flight."""
        rt.in_flight += 1
        counted = rt.counted
        if counted is not None and rt.write_in_flight:
            counted.in_flight.inc()

    def request_ended(self, rt: ApiRuntime, scope: Scope, status: int, seconds: float, request_id: str) -> None:
        """A request of ``rt``'s API was answered (any protocol): counted once, and its access line."""
        rt.in_flight -= 1
        counted = rt.counted
        if counted is not None:
            if rt.write_in_flight:
                counted.in_flight.dec()
            self.figures.count(counted, status, seconds)
        if self.access_log:
            access_log(scope["method"], scope["path"], rt.api.name, status, seconds, request_id)

    # -- the other routes -------------------------------------------------------------------------
    async def healthz(self, request: StarletteRequest) -> Response:
        """GET /healthz: 200 while the process answers."""
        return JSONResponse({"status": "ok"}, headers={"x-request-id": request_id_of(request.scope)})

    async def readyz(self, request: StarletteRequest) -> Response:
        """GET /readyz: 200 once every API is loaded, else 503; each API's status."""
        apis = {name: state_of(rt) for name, rt in self.apis.items()}
        stores = await self.jobs.problems() if self.jobs else {}  # an AsyncAPI needs its job store
        for name, problem in stores.items():
            apis[name] = {**apis[name], "store": problem}
        ready = self.ready and not stores
        return JSONResponse(
            {"status": "ready" if ready else "not ready", "apis": apis}, status_code=200 if ready else 503
        )

    async def metrics_route(self, request: StarletteRequest) -> Response:
        """GET /metrics: the Prometheus text of every replica, with the trackers."""
        if self.metrics is None:
            return await self.not_found(request, NotFound("metrics are off"))
        body, content_type = self.metrics.render()
        if self.jobs:
            body += await self.jobs.metrics()  # AsyncAPI queue and job latency, from the job stores
        return Response(body, media_type=content_type)

    async def all_stats(self, request: StarletteRequest) -> Response:
        """GET /stats: every API's counts, latency and tracker (and an AsyncAPI's jobs)."""
        entries = self.stats.stats_json()
        if self.jobs:
            await self.jobs.add_jobs(entries)  # AsyncAPIs: queue and outcomes from the job store
        return JSONResponse(entries)

    async def api_stats(self, request: StarletteRequest) -> Response:
        """GET /<api>/stats: one API's counts, latency and tracker."""
        name = request.path_params["name"]
        if name not in self.apis:
            return await self.not_found(request, NotFound("no such api"))
        entry = self.stats.api_json(name)
        if self.jobs:
            await self.jobs.add_jobs([entry])
        return JSONResponse(entry)

    async def not_found(self, request: StarletteRequest, exc: Exception) -> Response:
        """404 and 405 as JSON errors (a 404 lists the routes the APIs answer at)."""
        status = getattr(exc, "status_code", 404)
        headers: dict[str, str] = {}
        rid = request_id_of(request.scope)
        if request.method == "OPTIONS" and request.scope.get("raw_path") == b"*":  # the server as a whole (RFC 9110)
            return Response(status_code=204, headers={"allow": "GET, HEAD, POST, OPTIONS", "x-request-id": rid})
        if status == 405:
            allow = (getattr(exc, "headers", None) or {}).get("Allow")  # Starlette's route names its methods
            if allow:  # in the order of a set: made stable
                allow = ", ".join(sorted(allow.split(", "), key=_method_rank))
            message = f"Method {request.method} is not allowed on {request.url.path}"
            message += f"; it takes {allow}." if allow else "."
            if allow:
                headers["allow"] = allow
        else:
            paths = sorted(p for p in self.routes if not p.endswith("/predict") or p == "/predict")
            path = request.url.path
            shown = path if len(path) <= 200 else f"{path[:200]}..."  # a 60 KB path is not echoed whole
            message = f"No route {shown!r}; the APIs answer at {', '.join(paths)}."
        return Response(
            error_body(message, rid),
            status_code=status,
            media_type="application/json",
            headers={**headers, "x-request-id": rid},
        )
