"""The HTTP side of the AsyncAPIs of one replica: ``POST /<api>`` submits, ``GET /<api>/<id>`` polls.

Example::

    jobs = AsyncJobs(engine, project=config.project, wire=HttpWire.of(options), cache=options.cache_dir)
    name = jobs.claims(scope)   # in the app's __call__, before the native routes
    if name is not None:
        await jobs.serve(engine.apis[name], scope, receive, send)   # one call into the engine
        return
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from prometheus_client.metrics_core import Metric

from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.errors import ClientGone, LocalServeError, MethodNotAllowed, RequestError, StoreUnavailable
from localserve.messages.error_text import short_repr
from localserve.messages.response import Reply
from localserve.protocols.asyncapi.metrics import collect_metrics
from localserve.protocols.asyncapi.store import (
    JOB_ID_RE,
    Job,
    JobStore,
    StoreError,
    new_job_id,
    open_store,
    rfc3339,
)
from localserve.protocols.asyncapi.worker import AsyncWorker, run_job
from localserve.protocols.bodies import read_body
from localserve.protocols.door import HttpWire, http_traced
from localserve.protocols.http import (
    Receive,
    Scope,
    Send,
    json_reply,
    request_id_of,
    send_reply,
)
from localserve.tracing import Traced

log = logging.getLogger("localserve")
HIDDEN_HEADERS = {"authorization", "proxy-authorization"}  # handlers never see them (docs/reference/handlers.md)
NOT_PATHS = {"predict", "stats"}  # /<api>/<these> keep their own meaning
# What /<api>/<id> takes (Cortex's gateway routed GET only; HEAD is GET without a body).
POLL_ROUTE = b"GET, HEAD, OPTIONS"


class AsyncJobs:
    """Submit and poll routes, stores and workers of the AsyncAPIs among the engine's APIs."""

    def __init__(self, engine: Engine, *, project: Path, wire: HttpWire, cache: Path) -> None:
        self.engine = engine
        runtimes = engine.apis
        self.runtimes = {name: rt for name, rt in runtimes.items() if rt.api.is_async}
        self.project = project
        self.cache = cache  # --cache-dir: the default SQLite stores live under it
        self.wire = wire  # the body's limit, and --hide-errors
        self.stores: dict[str, JobStore] = {}
        self.workers: dict[str, AsyncWorker] = {}
        self.submit_paths: dict[str, str] = {}
        for name in self.runtimes:
            self.submit_paths[f"/{name}"] = name
            self.submit_paths[f"/{name}/predict"] = name
        if len(runtimes) == 1 and self.runtimes:
            self.submit_paths["/"] = self.submit_paths["/predict"] = next(iter(self.runtimes))

    def __bool__(self) -> bool:
        return bool(self.runtimes)

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, *, workers: bool = True) -> None:
        """Open each API's store and, with ``workers``, start its worker (it claims jobs once the API is loaded)."""
        for name, rt in self.runtimes.items():
            try:
                store = open_store(rt.api.async_store, cache=self.cache, project=self.project, api=name)
            except StoreError as exc:
                log.error("api %r: %s", name, exc)
                continue  # /readyz says why; submits answer 503
            self.stores[name] = store
            log.info("api %r: AsyncAPI jobs in %s", name, store.url)
            if not workers:
                continue
            worker = AsyncWorker(
                name,
                store,
                self._runner(rt),
                slots=rt.api.threads_per_process,
                retention=rt.api.async_retention,
                ready=functools.partial(_loaded, rt),
            )
            self.workers[name] = worker
            worker.start()

    def stop(self) -> None:
        """Stop every worker of this replica: nothing new is claimed (a running job runs again after a restart)."""
        for worker in self.workers.values():
            worker.stop()
        for store in self.stores.values():
            store.close()
        self.workers.clear()
        self.stores.clear()

    def _runner(self, rt: ApiRuntime) -> Callable[[Job], concurrent.futures.Future[str]]:
        """What the worker's thread calls with each job it claims: the job run through the engine, on the loop."""
        loop = asyncio.get_running_loop()

        def run(job: Job) -> concurrent.futures.Future[str]:
            return asyncio.run_coroutine_threadsafe(run_job(self.engine, rt, job), loop)

        return run

    # -- health and metrics -----------------------------------------------------------------------
    async def problems(self) -> dict[str, str]:
        """API name -> why its store cannot be used (empty when every store answers); for /readyz."""
        found: dict[str, str] = {}
        for name in self.runtimes:
            store = self.stores.get(name)
            if store is None:
                found[name] = "the job store could not be opened; see the log"
                continue
            try:
                await asyncio.to_thread(store.ping)
            except StoreError as exc:
                log.warning("api %r: %s", name, exc)
                found[name] = exc.public
        return found

    async def add_jobs(self, entries: list[dict[str, Any]]) -> None:
        """Add ``"jobs"`` (queue and outcomes, from the store) to the ``/stats`` entries of AsyncAPIs."""
        for entry in entries:
            store = self.stores.get(str(entry.get("api")))
            if store is None:
                continue
            try:
                counts = await asyncio.to_thread(store.counts)
            except StoreError as exc:
                log.warning("api %r: %s", entry.get("api"), exc)
                entry["jobs"] = {"error": exc.public}
                continue
            done = {outcome: sum(counts.buckets.get(outcome, [])) for outcome in ("completed", "failed")}
            finished = sum(done.values())
            seconds = sum(counts.sums.values())
            entry["jobs"] = {
                "in_queue": counts.in_queue,
                "in_progress": counts.in_progress,
                **done,
                "mean_seconds": seconds / finished if finished else None,
            }

    async def metrics(self) -> list[Metric]:
        """The metric families of the queue length and job latency of every AsyncAPI (figures from the stores)."""
        return await asyncio.to_thread(collect_metrics, self.stores)

    # -- routes ---------------------------------------------------------------------------------
    def claims(self, scope: Scope) -> str | None:
        """The AsyncAPI whose submit (``POST /<api>``) or job route (``/<api>/<id>``, any method) ``scope`` is, else None."""
        path: str = scope["path"]
        if scope["method"] == "POST" and path in self.submit_paths:
            return self.submit_paths[path]
        name, _, job_id = path[1:].partition("/")
        if name in self.runtimes and job_id and job_id not in NOT_PATHS:
            return name
        return None

    async def serve(self, rt: ApiRuntime, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a submit or a poll of ``rt``'s AsyncAPI: one call into the engine. Neither takes a place in the
        API's queue (the store is the jobs' queue, and a job is submitted while its API still loads, as Cortex's
        gateway took them): the engine counts it, the door answers it."""
        await self.engine.submit(rt, _JobRoute(self, rt.api.name, scope, receive, send), admit=False)

    async def answer(self, name: str, scope: Scope, receive: Receive, rid: str) -> Reply:
        """The answer to a submit or poll of AsyncAPI ``name`` (what ``claims`` said) with request id ``rid``. A job
        route answers ``GET`` and ``HEAD``, ``OPTIONS`` with 204 and ``Allow``, any other method with 405 and
        ``Allow``."""
        method = scope["method"]
        if method == "POST" and scope["path"] in self.submit_paths:
            return await self._submit(name, scope, receive)
        if method in ("GET", "HEAD"):
            return await self._poll(name, scope["path"][1:].partition("/")[2])
        if method == "OPTIONS":
            return Reply(status=204, headers=[(b"allow", POLL_ROUTE)])
        raise MethodNotAllowed(method, scope["path"], POLL_ROUTE.decode("latin-1"))

    async def _submit(self, name: str, scope: Scope, receive: Receive) -> Reply:
        body = await read_body(scope, receive, self.wire.max_body_size)
        rt = self.runtimes[name]
        if rt.state == "failed":  # no worker would ever run it (--keep-going); jobs wait only while loading
            raise StoreUnavailable(f"api {name!r} failed to load, so it takes no jobs: {rt.error}")
        store = self._store(name)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        meta = {
            "content_type": headers.get("content-type", ""),
            "query_params": dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))),
            "headers": {k: v for k, v in headers.items() if k not in HIDDEN_HEADERS},
        }
        if self.engine.tracer is not None:  # the job's run continues the trace of this submit
            meta["trace"] = self.engine.tracer.carrier()
        job_id = new_job_id()
        try:
            await asyncio.to_thread(store.submit, job_id, body, meta, time.time())
        except StoreError as exc:
            log.error("api %r: submit refused: %s", name, exc)
            raise StoreUnavailable(f"The job was not stored: {exc.public}.") from None
        worker = self.workers.get(name)
        if worker is not None:
            worker.wake.set()
        return json_reply(200, {"id": job_id})

    def _store(self, name: str) -> JobStore:
        store = self.stores.get(name)
        if store is None:
            raise StoreUnavailable(f"The job store of api {name!r} could not be opened; see the log.")
        return store

    async def _poll(self, name: str, job_id: str) -> Reply:
        if not JOB_ID_RE.fullmatch(job_id):
            raise RequestError(
                f"Invalid job id {short_repr(job_id, 80)}; expected the 32 lower-case hex characters that POST /{name} "
                "answered."
            )
        store = self._store(name)
        try:
            state = await asyncio.to_thread(store.state, job_id)
        except StoreError as exc:
            log.error("api %r: reading job %s failed: %s", name, job_id, exc)
            raise StoreUnavailable(f"The job could not be read: {exc.public}.") from None
        status = 200
        if state is None:  # Cortex 0.35+: 404 "error: id <id> not found"; the status kept for 0.32-0.34's clients
            status = 404
            body = json.dumps({"id": job_id, "status": "not_found", "error": f"id {job_id} not found"}).encode()
        elif state.status == "completed" and state.result is not None and state.finished is not None:
            head = json.dumps({"id": job_id, "status": "completed"})[:-1]
            stamp = json.dumps(rfc3339(state.finished))
            body = f'{head}, "result": {state.result}, "timestamp": {stamp}}}'.encode()
        elif state.status == "failed" and state.finished is not None:
            value = {"id": job_id, "status": "failed", "error": state.error, "timestamp": rfc3339(state.finished)}
            body = json.dumps(value, ensure_ascii=False).encode()
        else:
            body = json.dumps({"id": job_id, "status": state.status}).encode()
        return Reply(status=status, headers=[(b"content-type", b"application/json")], body=body)


def _loaded(rt: ApiRuntime) -> bool:
    return rt.state == "ready"


class _JobRoute:
    """A submit or poll of an AsyncAPI as the engine's ``Exchange``: the door answers it (the store), nothing runs
    on the API's threads."""

    client = None
    writer = None
    deadline = None
    tracked = False  # no prediction yet: the job's run is recorded when it runs

    def __init__(self, jobs: AsyncJobs, api: str, scope: Scope, receive: Receive, send: Send) -> None:
        self.jobs = jobs
        self.api = api
        self.scope = scope
        self._receive = receive
        self._send = send
        self.method: str = scope["method"]
        self.path: str = scope["path"]
        self.request_id = request_id_of(scope)

    async def receive(self) -> Reply:
        return await self.jobs.answer(self.api, self.scope, self._receive, self.request_id)

    async def send(self, reply: Reply) -> None:
        if reply.status != ClientGone.status_code:  # nothing stored, nobody to answer
            await send_reply(self._send, reply, self.request_id)

    def render(self, error: LocalServeError) -> Reply:
        return self.jobs.wire.render(error, self.request_id, self.api)

    def traced(self) -> Traced:
        submit = self.method == "POST" and self.path in self.jobs.submit_paths
        return http_traced(self.scope, f"{self.method} {self.path if submit else f'/{self.api}/{{id}}'}")
