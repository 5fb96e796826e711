"""The ASGI application of one replica: routes onto the engine, health, figures, errors as JSON.

Every request of an API goes to a front door that makes one ``Engine.submit`` (``engine/core.py``):
the native routes (``server/routes.py``), the TrafficSplitter (``protocols/splitter.py``), the Open
Inference Protocol over REST (``protocols/v2``) and, on its own port, gRPC (``protocols/v2/grpc``),
and the AsyncAPI routes (``protocols/asyncapi``). None of them gets this object. What is left here
is the dispatch, the lifespan and the server's own pages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Match, Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from localserve.config import ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine.api import state_of
from localserve.engine.core import Engine
from localserve.errors import LocalServeError, MethodNotAllowed, NotFound
from localserve.messages.response import Reply
from localserve.metrics import expose
from localserve.project.compat.hosts import route_by_host
from localserve.protocols.asyncapi.routes import AsyncJobs
from localserve.protocols.door import HttpWire
from localserve.protocols.http import Receive, Scope, Send, render_error, request_id_of
from localserve.protocols.splitter import SplitterRoutes
from localserve.protocols.v2.routes import V2Routes, infer_params
from localserve.runtimes.cache import scratch_dir
from localserve.server.pages import Pages
from localserve.server.reload import ProjectReload, Reloader
from localserve.server.routes import NativeRoutes
from localserve.server.shutdown import Shutdown

METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def _method_rank(method: str) -> int:
    return METHOD_ORDER.index(method) if method in METHOD_ORDER else len(METHOD_ORDER)


class App:
    """The ASGI application of one replica."""

    def __init__(
        self,
        config: ServeConfig,
        options: ServeOptions | None = None,
        on_fatal: Callable[[LocalServeError], None] | None = None,
        project: ProjectReload | None = None,
    ) -> None:
        self.config = config
        self.options = options = options or ServeOptions()
        self.engine = engine = Engine(config, options, on_fatal)
        # serve --reload: the project entered again after each edit (the CLI's Project context)
        self.reloader = Reloader(engine, config, project) if options.reload and project is not None else None
        self.apis = engine.apis
        self.metrics = engine.metrics
        self.stats = engine.stats
        self.native = NativeRoutes(engine, options)
        self.routes = self.native.routes
        # kind: TrafficSplitter: /<splitter> picks one of its APIs by weight (a shadow gets a copy)
        self.splitters = SplitterRoutes(engine, config.splitters, self.native.wire, engine.extras)
        self.jobs = _async_jobs(engine, config, options)  # kind: AsyncAPI: POST /<api> submits, GET /<api>/<id> polls
        self.v2 = V2Routes(engine, options)
        self.grpc = None  # the Open Inference Protocol over gRPC (--grpc-port): grpcio is imported only then
        if options.grpc_port is not None:
            from localserve.protocols.v2.grpc.server import GrpcDoor  # lazy: grpcio, only with --grpc-port

            self.grpc = GrpcDoor(engine, options)
        # SIGTERM's begin and the lifespan's end, in their order, with their deadlines (server/shutdown.py)
        self.shutdown = Shutdown(
            options.graceful_timeout, engine, jobs=self.jobs, reloader=self.reloader, grpc=self.grpc
        )
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
                    ProxyHeadersMiddleware,
                    trusted_hosts=options.forwarded_allow_ips,
                )
            ],
        )
        self.starlette.router.redirect_slashes = False  # Starlette's: an absolute URL from the client's Host
        # API names routed by Host (``Host: api-<name>`` on / or /predict goes to /<name>/predict): set by serve.
        self.host_names: frozenset[str] = frozenset()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.host_names and scope["path"] in ("/", "/predict"):
                scope = route_by_host(scope, self.host_names)  # Host: api-<name> (Cortex 0.25-0.33 docs, *Predictors*)
            if self.jobs and (name := self.jobs.claims(scope)) is not None:
                await self.jobs.serve(self.apis[name], scope, receive, send)
                return
            route = self.routes.get(scope["path"])
            if route is not None:
                await self.native.serve(route, scope, receive, send)
                return
            if self.splitters and (split := self.splitters.routes.get(scope["path"])) is not None:
                await self.splitters.serve(split, scope, receive, send)
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
        loading = self.engine.loading
        if self.options.accept_when_loaded and loading is not None:
            await asyncio.wait({loading})  # uvicorn accepts once the lifespan has started
        try:
            yield
        finally:
            await self.shutdown.finish()

    async def startup(self, *, wait: bool) -> None:
        """Start the workers and the AsyncAPI stores, and load every API (in the background unless ``wait``)."""
        await self.engine.startup(wait=False)
        if self.options.async_jobs and self.jobs is not None:
            self.jobs.start(workers=self.options.async_workers)
        if self.grpc is not None:
            await self.grpc.start()
        if self.reloader is not None:
            self.reloader.start()
        if wait and self.engine.loading is not None:
            await self.engine.loading

    @property
    def loading(self) -> asyncio.Task[None] | None:
        """The task loading every API (None before ``startup``)."""
        return self.engine.loading

    @property
    def ready(self) -> bool:
        """Whether every API is loaded (GET /readyz is 200)."""
        return self.engine.ready

    def join_threads(self, timeout: float) -> list[str]:
        """After ``shutdown.finish``: wait up to ``timeout`` seconds for every API's threads; the names still running."""
        return self.engine.join_threads(timeout)

    # -- the other routes -------------------------------------------------------------------------
    async def healthz(self, request: StarletteRequest) -> Response:
        """GET /healthz: 200 while the process answers."""
        return JSONResponse({"status": "ok"}, headers={"x-request-id": request_id_of(request.scope)})

    async def readyz(self, request: StarletteRequest) -> Response:
        """GET /readyz: 200 once every API is loaded, else 503; each API's status (and --reload's, see Reloader.status)."""
        apis = {name: state_of(rt) for name, rt in self.apis.items()}
        stores = await self.jobs.problems() if self.jobs else {}  # an AsyncAPI needs its job store
        for name, problem in stores.items():
            apis[name] = {**apis[name], "store": problem}
        ready = self.ready and not stores
        body: dict[str, Any] = {"status": "ready" if ready else "not ready", "apis": apis}
        if self.reloader is not None:  # a failed reload is a detail: the last good version still serves
            body["reload"] = self.reloader.status()
        return JSONResponse(body, status_code=200 if ready else 503)

    async def metrics_route(self, request: StarletteRequest) -> Response:
        """GET /metrics: the Prometheus text of every replica, with the trackers."""
        if self.metrics is None:
            return await self.not_found(request, NotFound("metrics are off"))
        families = self.metrics.families()
        if self.jobs:
            families += await self.jobs.metrics()  # AsyncAPI queue and job latency, from the job stores
        headers = request.headers
        body, answer = expose(families, headers.get("accept", ""), headers.get("accept-encoding", ""))
        return Response(body, headers=answer)

    async def all_stats(self, request: StarletteRequest) -> Response:
        """GET /stats: every API's counts, latency and tracker (and an AsyncAPI's jobs)."""
        entries = self.stats.stats_json()
        if self.jobs:
            await self.jobs.add_jobs(entries)  # AsyncAPIs: queue and outcomes from the job store
        return JSONResponse(entries + self.splitters.stats_json())

    async def api_stats(self, request: StarletteRequest) -> Response:
        """GET /<api>/stats: one API's counts, latency and tracker."""
        name = request.path_params["name"]
        if name in self.splitters.splitters:
            return JSONResponse(next(e for e in self.splitters.stats_json() if e["api"] == name))
        if name not in self.apis:
            return await self.not_found(request, NotFound("no such api"))
        entry = self.stats.api_json(name)
        if self.jobs:
            await self.jobs.add_jobs([entry])
        return JSONResponse(entry)

    async def not_found(self, request: StarletteRequest, exc: Exception) -> Response:
        """404 and 405 as JSON errors (a 404 lists the routes the APIs answer at)."""
        rid = request_id_of(request.scope)
        if request.method == "OPTIONS" and request.scope.get("raw_path") == b"*":  # the server as a whole (RFC 9110)
            return Response(status_code=204, headers={"allow": "GET, HEAD, POST, OPTIONS", "x-request-id": rid})
        error: MethodNotAllowed | NotFound
        if getattr(exc, "status_code", 404) == 405:
            allow = (getattr(exc, "headers", None) or {}).get("Allow", "")  # Starlette's route names its methods
            allow = (
                ", ".join(sorted(allow.split(", "), key=_method_rank)) if allow else ""
            )  # a set's order, made stable
            error = MethodNotAllowed(request.method, request.url.path, allow)
        elif (location := self._without_slash(request.scope)) is not None:
            return RedirectResponse(location, headers={"x-request-id": rid})
        else:
            path = request.url.path
            shown = path if len(path) <= 200 else f"{path[:200]}..."  # a 60 KB path is not echoed whole
            error = NotFound(f"No route {shown!r}; {self._routes_for(path)}.")
        v2 = request.url.path.startswith("/v2/") or request.url.path == "/v2"
        return starlette_response(render_error(error, rid, v2=v2), rid)

    def _without_slash(self, scope: Scope) -> str | None:
        """Where a path with trailing slashes redirects (``/docs/`` -> ``/docs``, as Starlette's router would):
        a path under ``--root-path``, never a URL of the client's ``Host``. None when that path is no route."""
        target = scope["path"].rstrip("/")
        if target == scope["path"] or not target or target.startswith("//"):  # "//host" would be another site
            return None
        probe = {**scope, "path": target}
        if all(route.matches(probe)[0] is Match.NONE for route in self.starlette.routes):
            return None
        query = scope.get("query_string", b"").decode("latin-1")
        return quote(self.options.root_path + target) + (f"?{query}" if query else "")

    def _routes_for(self, path: str) -> str:
        """The routes a 404 at ``path`` lists: the Open Inference Protocol's under /v2, else the APIs'."""
        if path.startswith("/v2/"):
            models = [f"/v2/models/{name}" for name in self.v2.names()]
            stats = ["/v2/models/stats"] if models else []
            every = ["/v2", "/v2/health/live", "/v2/health/ready", *stats]
            every += [f"{model}{tail}" for model in models for tail in ("", "/ready", "/config", "/stats", "/infer")]
            return f"the Open Inference Protocol's routes are {', '.join(every)}"
        paths = sorted(p for p in self.routes if not p.endswith("/predict") or p == "/predict")
        return f"the APIs answer at {', '.join(paths)}"


def starlette_response(reply: Reply, request_id: str) -> Response:
    """``reply`` (a rendered error) as a Starlette Response, for the Starlette routes."""
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in reply.headers}
    return Response(reply.body, status_code=reply.status, headers={**headers, "x-request-id": request_id})


def _async_jobs(engine: Engine, config: ServeConfig, options: ServeOptions) -> AsyncJobs | None:
    """The AsyncAPIs' routes, stores and workers; None when no API is one."""
    if not any(api.is_async for api in config.apis):
        return None
    return AsyncJobs(
        engine,
        project=config.project,
        wire=HttpWire.of(options),
        cache=options.cache_dir or scratch_dir(),
    )
