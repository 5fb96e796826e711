"""create_app(config) -> the ASGI app: one route per API, health, readiness, errors as JSON.

Example::

    app = create_app(load_config(Path("iris-classifier")))
    uvicorn.run(app, port=8888)

Prediction routes are dispatched from a dict straight to the API's executor, with no
per-request Starlette objects: on small models the server's own work is most of a
request's cost (PERFORMANCE.md). Everything else (health, stats, metrics, 404s) is a
plain Starlette app.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from localserve.config import ApiConfig, ServeConfig
from localserve.errors import LocalServeError, NotFound, NotReady, RequestError, Timeout
from localserve.executor import Executor, Result
from localserve.handlers import Endpoint, EndpointOptions, create_endpoint
from localserve.logs import access_log, api_var, request_id_var
from localserve.metrics import Metrics
from localserve.request import Request
from localserve.response import Reply, error_body
from localserve.runtimes import LoadOptions
from localserve.stats import Stats

log = logging.getLogger("localserve")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
MiB = 1024 * 1024


@dataclass(frozen=True)
class ServeOptions:
    max_body_size: int = 100 * MiB
    allow_cpu_fallback: bool = False
    keep_going: bool = False  # a failed API answers 503 instead of stopping the start
    access_log: bool = True  # one log line per request
    metrics: bool = True  # Prometheus metrics (GET /metrics); off only to measure what they cost


class ClientGone(LocalServeError):
    status_code = 499


class ApiRuntime:
    """One API in this process: its endpoint, its executor, its state."""

    def __init__(self, api: ApiConfig, config: ServeConfig, options: ServeOptions, metrics: Metrics | None) -> None:
        self.api = api
        self.metrics = metrics
        self.state = "loading"
        self.error: str | None = None
        load = LoadOptions(
            signature_key=api.tf_signature_key,
            threads=api.model_threads,
            gpu=api.compute.gpu > 0,
            allow_cpu_fallback=options.allow_cpu_fallback,
        )
        endpoint_options = EndpointOptions(project=config.project, load=load)
        if metrics is not None:
            endpoint_options.observe = functools.partial(metrics.observe_stage, api.name)
            endpoint_options.metrics_client = metrics.client(api.name)
        self.endpoint: Endpoint = create_endpoint(api, endpoint_options)
        self.executor = Executor(
            api.name,
            self._process,
            threads=api.threads_per_process,
            max_queue=api.max_queue,
            batching=api.batching,
            on_batch=functools.partial(metrics.observe_batch, api.name) if metrics is not None else None,
            pending=lambda: self.in_flight,
        )
        self.in_flight = 0  # requests of this API inside the server (reading, queued, running, sending)

    def _process(self, requests: list[Request]) -> list[Result]:
        api_var.set(self.api.name)
        request_id_var.set(requests[0].request_id if len(requests) == 1 else ",".join(r.request_id for r in requests))
        if len(requests) == 1 and self.api.batching is None:
            try:
                return [self.endpoint.handle(requests[0])]
            except LocalServeError as exc:
                return [exc]
        return self.endpoint.handle_batch(requests)

    async def load(self) -> None:
        start = time.perf_counter()
        try:
            await asyncio.wrap_future(self.executor.call(self.endpoint.load))
        except LocalServeError as exc:
            self.state, self.error = "failed", str(exc)
            if exc.details:
                log.error("api %r failed to load:\n%s", self.api.name, exc.details)
            raise
        except Exception as exc:
            self.state, self.error = "failed", f"{type(exc).__name__}: {exc}"
            log.exception("api %r failed to load", self.api.name)
            raise LocalServeError(f"api {self.api.name!r} failed to load: {self.error}") from exc
        self.state = "ready"
        seconds = time.perf_counter() - start
        if self.metrics is not None:
            self.metrics.observe_model_load(self.api.name, seconds)
        log.info("api %r loaded in %.3f s", self.api.name, seconds)

    def describe(self) -> dict[str, Any]:
        info = self.endpoint.describe() if self.state == "ready" else {"name": self.api.name, "kind": self.api.kind}
        info["status"] = self.state
        if self.error:
            info["error"] = self.error
        return info


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
                await _send_reply(send, _json_reply(200, route[0].describe()), _request_id(scope))
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

    async def shutdown(self) -> None:
        if self.loading is not None and not self.loading.done():
            self.loading.cancel()
        loop = asyncio.get_running_loop()
        await asyncio.gather(*(loop.run_in_executor(None, rt.executor.stop, 30.0) for rt in self.apis.values()))
        self.stats.close()
        if self.metrics is not None:
            self.metrics.close()

    @property
    def ready(self) -> bool:
        return all(rt.state == "ready" for rt in self.apis.values())

    # -- the hot path -----------------------------------------------------------------------------
    async def serve(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        name = rt.api.name
        metrics = self.metrics
        request_id = _request_id(scope)
        rt.in_flight += 1
        if metrics is not None:
            metrics.request_started(name)
        try:
            try:
                if rt.state != "ready":
                    raise NotReady(
                        f"api {name!r} is not ready: "
                        + (f"it failed to load: {rt.error}" if rt.error else "it is still loading.")
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
                if metrics is not None:
                    metrics.request_finished(name, 499, time.perf_counter() - start)
                return
            except LocalServeError as exc:
                reply = self.error_reply(exc, request_id, name)
            if reply.asgi is not None:
                reply.asgi.headers["x-request-id"] = request_id
                await reply.asgi(scope, receive, send)
            elif reply.stream is not None:
                await _send_stream(send, reply, request_id, rt.executor)
            else:
                await _send_reply(send, reply, request_id)
        finally:
            rt.in_flight -= 1
        seconds = time.perf_counter() - start
        status = reply.status
        if metrics is not None:
            metrics.request_finished(name, status, seconds)
        self.stats.record_request(name, status, seconds)
        if rt.api.tracker is not None and 200 <= status < 300:
            self.stats.record_prediction(name, reply.value)
        access_log(scope["method"], scope["path"], name, status, seconds, request_id)

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
        watch_disconnect = executor.busy >= executor.threads or executor.depth > 0
        job = executor.submit(request, loop)
        if self.metrics is not None:
            self.metrics.set_queue_depth(rt.api.name, executor.depth)
        timer = loop.call_later(rt.api.timeout, _expire, executor, job, rt.api)
        watcher = loop.create_task(_watch_disconnect(receive, executor, job)) if watch_disconnect else None
        try:
            result = await job.future
        finally:
            timer.cancel()
            if watcher is not None:
                watcher.cancel()
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
        return JSONResponse({"status": "ok"}, headers={"x-request-id": _request_id(request.scope)})

    async def readyz(self, request: StarletteRequest) -> Response:
        apis = {name: _state(rt) for name, rt in self.apis.items()}
        status = 200 if self.ready else 503
        return JSONResponse({"status": "ready" if self.ready else "not ready", "apis": apis}, status_code=status)

    async def model_ready(self, request: StarletteRequest) -> Response:
        rt = self.apis.get(request.path_params["name"])
        if rt is None:
            return await self.not_found(request, NotFound("no such model"))
        return JSONResponse(_state(rt), status_code=200 if rt.state == "ready" else 503)

    async def metrics_route(self, request: StarletteRequest) -> Response:
        if self.metrics is None:
            return await self.not_found(request, NotFound("metrics are off"))
        for name, rt in self.apis.items():
            self.metrics.set_queue_depth(name, rt.executor.depth)
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
        rid = _request_id(request.scope)
        return Response(
            error_body(message, rid), status_code=status, media_type="application/json", headers={"x-request-id": rid}
        )


def create_app(
    config: ServeConfig, options: ServeOptions | None = None, on_fatal: Callable[[str], None] | None = None
) -> App:
    """The ASGI app serving every API of ``config``."""
    return App(config, options, on_fatal)


def _state(rt: ApiRuntime) -> dict[str, Any]:
    return {"status": rt.state, **({"error": rt.error} if rt.error else {})}


_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


def _request_id(scope: Scope) -> str:
    """The client's X-Request-ID, or a new one: unique per process prefix + counter (no syscall per request)."""
    for name, value in scope["headers"]:
        if name == b"x-request-id" and value:
            return str(value.decode("latin-1")[:200])
    return f"{_ID_PREFIX}{next(_id_counter):016x}"


def _json_reply(status: int, value: Any) -> Reply:
    import json

    return Reply(status=status, headers=[(b"content-type", b"application/json")], body=json.dumps(value).encode())


def _expire(executor: Executor, job: Any, api: ApiConfig) -> None:
    started = not executor.drop(job)
    if not job.future.done():
        what = "it was still running" if started else "it had not started and was dropped"
        job.future.set_result(
            Timeout(f"api {api.name!r} did not answer within its timeout of {api.timeout:g} s ({what}).")
        )


async def _watch_disconnect(receive: Receive, executor: Executor, job: Any) -> None:
    message = await receive()
    if message["type"] == "http.disconnect" and executor.drop(job) and not job.future.done():
        job.future.set_result(ClientGone("client disconnected before the request started"))


async def _send_reply(send: Send, reply: Reply, request_id: str) -> None:
    headers = reply.headers
    headers.append((b"content-length", str(len(reply.body)).encode()))
    headers.append((b"x-request-id", request_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def _send_stream(send: Send, reply: Reply, request_id: str, executor: Executor) -> None:
    assert reply.stream is not None
    iterator = reply.stream
    end = object()
    reply.headers.append((b"x-request-id", request_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": reply.status, "headers": reply.headers})
    while True:
        try:
            chunk = await asyncio.wrap_future(executor.call(lambda: next(iterator, end)))
        except Exception:
            log.exception("request %s: the streamed response failed", request_id)
            break
        if chunk is end:
            break
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
