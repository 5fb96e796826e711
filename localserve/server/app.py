"""The ASGI application of one replica: routes, lifecycle, the prediction hot path, errors as JSON."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from localserve.config import ServeConfig
from localserve.errors import LocalServeError, NotFound, NotReady, Overloaded, RequestError, Timeout
from localserve.logs import access_log, flush_access_log
from localserve.metrics import Metrics
from localserve.request import Request
from localserve.response import Reply, error_body
from localserve.server.pages import Pages
from localserve.server.runtime import ApiRuntime, ClientGone, MiB, ServeOptions, state_of
from localserve.server.wire import (
    Receive,
    Scope,
    Send,
    WatchDisconnect,
    expire,
    json_reply,
    request_id_of,
    send_reply,
    send_stream,
)
from localserve.stats import Stats

log = logging.getLogger("localserve")


class App:
    """The ASGI application of one replica."""

    def __init__(
        self,
        config: ServeConfig,
        options: ServeOptions | None = None,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.options = options or ServeOptions()
        self.on_fatal = on_fatal
        self.metrics = Metrics([api.name for api in config.apis]) if self.options.metrics else None
        if not self.options.access_log:
            logging.getLogger("localserve.access").setLevel(logging.WARNING)
        self.stats = Stats.from_config(config.apis)
        self.apis = {api.name: ApiRuntime(api, config, self.options, self.metrics) for api in config.apis}
        self.routes: dict[str, tuple[ApiRuntime, bool]] = {}  # path -> (api, is the /predict form)
        for rt in self.apis.values():
            self.routes[f"/{rt.api.name}"] = (rt, False)
            self.routes[f"/{rt.api.name}/predict"] = (rt, True)
        if len(self.apis) == 1:
            only = next(iter(self.apis.values()))
            self.routes["/"] = (only, only.api.kind == "abeja")
            self.routes["/predict"] = (only, True)
        self.loading: asyncio.Task[None] | None = None
        self.starlette = Starlette(
            routes=[
                Route("/healthz", self.healthz),
                Route("/health_check", self.healthz),
                Route("/v2/health/live", self.healthz),
                Route("/readyz", self.readyz),
                Route("/v2/health/ready", self.readyz),
                Route("/v2/models/{name}/ready", self.model_ready),
                Route("/metrics", self.metrics_route),
                Route("/stats", self.all_stats),
                Route("/{name}/stats", self.api_stats),
                *Pages(self).routes(),
            ],
            exception_handlers={404: self.not_found, 405: self.not_found},
            lifespan=self.lifespan,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = self.routes.get(scope["path"])
            if route is not None and (route[1] or scope["method"] != "GET"):
                await self.serve(route[0], scope, receive, send)
                return
            if route is not None:
                await send_reply(send, json_reply(200, route[0].describe()), request_id_of(scope))
                return
        await self.starlette(scope, receive, send)

    # -- lifecycle ------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncIterator[None]:
        await self.startup(wait=False)
        try:
            yield
        finally:
            await self.shutdown()

    async def startup(self, *, wait: bool) -> None:
        """Start the workers and load every API (in the background unless ``wait``)."""
        for rt in self.apis.values():
            rt.executor.start()
        self.loading = asyncio.get_running_loop().create_task(self._load_all())
        if wait:
            await self.loading

    async def _load_all(self) -> None:
        for rt in self.apis.values():
            try:
                await rt.load()
                self.stats.set_status(rt.api.name, "ready")
            except LocalServeError as exc:
                self.stats.set_status(rt.api.name, "failed")
                log.error("%s", exc)
                if not self.options.keep_going:
                    if self.on_fatal is None:
                        raise
                    self.on_fatal(str(exc))
                    return
        if self.options.pin_threads:
            self.pin_threads()

    def pin_threads(self) -> None:
        """Put the event loop and every API's worker threads on one core (``--pin-threads``).

        A request crosses from the loop to a worker thread and back; on one core each crossing
        is a direct switch instead of a wake-up on another core (measured here: a 52 µs round
        trip became 22 µs). Done after loading, so the thread pools the runtimes made while
        loading keep every core. Replica i takes the i-th allowed core.
        """
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except AttributeError:
            log.warning("--pin-threads: this platform cannot pin threads to cores; ignored")
            return
        replica = int(os.environ.get("LOCALSERVE_REPLICA", "0") or 0)
        cpus = {allowed[replica % len(allowed)]}
        os.sched_setaffinity(0, cpus)  # this thread: the event loop
        for rt in self.apis.values():
            rt.executor.pin(cpus)
        log.info("event loop and worker threads pinned to CPU %d", next(iter(cpus)))

    async def shutdown(self) -> None:
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
        loop = asyncio.get_running_loop()
        # uvicorn has already given in-flight requests their graceful period; work still
        # running after it gets a few seconds more.
        await asyncio.gather(*(loop.run_in_executor(None, rt.executor.stop, 5.0) for rt in self.apis.values()))
        self.stats.close()
        if self.metrics is not None:
            self.metrics.close()
        flush_access_log()

    @property
    def ready(self) -> bool:
        return all(rt.state == "ready" for rt in self.apis.values())

    # -- the hot path -----------------------------------------------------------------------------
    async def serve(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        name = rt.api.name
        metrics = self.metrics
        request_id = request_id_of(scope)
        rt.in_flight += 1
        if metrics is not None:
            metrics.request_started(name)
        status = 500
        try:
            try:
                if rt.state != "ready":
                    raise NotReady(
                        f"api {name!r} is not ready: "
                        + (f"it failed to load: {rt.error}" if rt.error else "it is still loading.")
                    )
                if rt.executor.depth >= rt.api.max_queue:  # answer before reading a large body for nothing
                    raise Overloaded(
                        f"API {name!r} is at capacity: {rt.api.max_queue} requests are already queued "
                        "(max_queue); retry later."
                    )
                body = await self._read_body(scope, receive)
                request = Request(
                    scope["method"],
                    scope["headers"],
                    body,
                    query_string=scope["query_string"],
                    request_id=request_id,
                    path=scope["path"],
                )
                reply = await self._execute(rt, request, receive)
            except ClientGone:
                status = 499
                return
            except LocalServeError as exc:
                reply = self.error_reply(exc, request_id, name)
            except Exception as exc:  # a bug of ours: answer 500 and keep serving
                log.exception("request %s to api %r: internal error", request_id, name)
                reply = self.error_reply(
                    LocalServeError(f"Internal error: {type(exc).__name__}: {exc}"), request_id, name
                )
            status = reply.status
            if reply.asgi is not None:
                reply.asgi.headers["x-request-id"] = request_id
                await reply.asgi(scope, receive, send)
            elif reply.stream is not None:
                await send_stream(send, receive, reply, request_id, rt)
            else:
                await send_reply(send, reply, request_id)
        finally:
            rt.in_flight -= 1
            seconds = time.perf_counter() - start
            if metrics is not None:
                metrics.request_finished(name, status, seconds)
            if status != 499:
                self.stats.record_request(name, status, seconds)
            access_log(scope["method"], scope["path"], name, status, seconds, request_id)
        if rt.api.tracker is not None and 200 <= status < 300:
            self.stats.record_prediction(name, reply.value)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        limit = self.options.max_body_size
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise RequestError(f"Invalid Content-Length header {value.decode('latin-1')!r}.") from None
                if length > limit:
                    raise self._too_large(length)
        message = await receive()
        body: bytes = message.get("body", b"")
        if not message.get("more_body"):
            if message["type"] == "http.disconnect":
                raise ClientGone("client disconnected")
            if len(body) > limit:  # no Content-Length (chunked): counted as it comes
                raise self._too_large(len(body), at_least=True)
            return body
        chunks = [body]
        size = len(body)
        while message.get("more_body"):
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ClientGone("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise self._too_large(size, at_least=True)
            chunks.append(chunk)
        return b"".join(chunks)

    def _too_large(self, size: int, *, at_least: bool = False) -> RequestError:
        limit = self.options.max_body_size
        shown = f"{limit / MiB:g} MiB" if limit >= MiB else f"{limit} bytes"
        got = f"at least {size}" if at_least else str(size)
        log.warning("rejected a request body of %s bytes: over the limit of %s", got, shown)
        return RequestError(
            f"The request body is too large: {got} bytes; the limit is {shown} ({limit} bytes, --max-body-size).",
            status_code=413,
        )

    async def _execute(self, rt: ApiRuntime, request: Request, receive: Receive) -> Reply:
        loop = asyncio.get_running_loop()
        executor = rt.executor
        queued_behind_others = executor.busy >= executor.threads or executor.depth > 0
        job = executor.submit(request, loop)
        timer = loop.call_later(rt.api.timeout, expire, executor, job, rt.api)
        # Only a request that really waits gets a task listening for its client to go away: one
        # task per queued request costs more than the rest of the hot path under load.
        watch = WatchDisconnect(receive, executor, job) if queued_behind_others else None
        try:
            result = await job.future
        finally:
            timer.cancel()
            if watch is not None:
                watch.cancel()
            if not job.future.done():  # cancelled (shutdown): work nobody waits for is never started
                executor.drop(job)
        if isinstance(result, LocalServeError):
            raise result
        return result

    def error_reply(self, exc: LocalServeError, request_id: str, api: str | None = None) -> Reply:
        if exc.status_code >= 500 and not isinstance(exc, NotReady | Timeout) and exc.status_code != 503:
            if exc.details:
                log.error("request %s to api %r failed: %s\n%s", request_id, api, exc, exc.details)
            else:
                log.error("request %s to api %r failed: %s", request_id, api, exc)
        headers = [(b"content-type", b"application/json")]
        if exc.status_code == 503:
            headers.append((b"retry-after", b"1"))
        return Reply(status=exc.status_code, headers=headers, body=error_body(str(exc), request_id))

    # -- the other routes -------------------------------------------------------------------------
    async def healthz(self, request: StarletteRequest) -> Response:
        return JSONResponse({"status": "ok"}, headers={"x-request-id": request_id_of(request.scope)})

    async def readyz(self, request: StarletteRequest) -> Response:
        apis = {name: state_of(rt) for name, rt in self.apis.items()}
        status = 200 if self.ready else 503
        return JSONResponse({"status": "ready" if self.ready else "not ready", "apis": apis}, status_code=status)

    async def model_ready(self, request: StarletteRequest) -> Response:
        rt = self.apis.get(request.path_params["name"])
        if rt is None:
            return await self.not_found(request, NotFound("no such model"))
        return JSONResponse(state_of(rt), status_code=200 if rt.state == "ready" else 503)

    async def metrics_route(self, request: StarletteRequest) -> Response:
        if self.metrics is None:
            return await self.not_found(request, NotFound("metrics are off"))
        body, content_type = self.metrics.render()
        return Response(body, media_type=content_type)

    async def all_stats(self, request: StarletteRequest) -> Response:
        return JSONResponse(self.stats.stats_json())

    async def api_stats(self, request: StarletteRequest) -> Response:
        name = request.path_params["name"]
        if name not in self.apis:
            return await self.not_found(request, NotFound("no such api"))
        return JSONResponse(self.stats.api_json(name))

    async def not_found(self, request: StarletteRequest, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        if status == 405:
            message = f"Method {request.method} is not allowed on {request.url.path}."
        else:
            paths = sorted(p for p in self.routes if not p.endswith("/predict") or p == "/predict")
            message = f"No route {request.url.path!r}; the APIs answer at {', '.join(paths)}."
        rid = request_id_of(request.scope)
        return Response(
            error_body(message, rid), status_code=status, media_type="application/json", headers={"x-request-id": rid}
        )
