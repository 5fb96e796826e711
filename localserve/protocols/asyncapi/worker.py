"""The worker of one AsyncAPI in one replica: claims jobs, runs each through the engine, records results.

One dispatcher thread claims a job whenever one of the API's threads is free (so with the default
of one thread, user code still never runs twice at once), renews the leases of the jobs it runs,
and every few seconds puts back in the queue the jobs of dead workers and purges old results.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.errors import LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.protocols.asyncapi.store import Job, JobStore, StoreError, worker_id, worker_is_dead
from localserve.tracing import Traced

log = logging.getLogger("localserve")

LEASE = 30.0  # seconds a claim lasts without renewal; renewed every LEASE / 3
POLL = 0.25  # seconds between looks at the store when nothing woke the worker
HOUSEKEEPING = 5.0  # seconds between recoveries of dead workers' jobs (and purges)
PURGE_EVERY = 600.0


class JobExchange:
    """An AsyncAPI job's run as the engine's ``Exchange``: the job is its own client (it never leaves), with the
    API's deadline and a request's records (``RUN /<api>/<job id>`` in the access log); its outcome is the
    predictor's JSON text, or the error that ended it."""

    client = None
    writer = None
    deadline = None
    tracked = True
    method = "RUN"

    def __init__(self, api: str, job: Job) -> None:
        self.job = job
        self.path = f"/{api}/{job.id}"
        self.request_id = job.id
        self.failure: LocalServeError | None = None

    async def receive(self) -> tuple[Request, None]:
        return job_request(self.job, self.path), None

    async def send(self, reply: Reply) -> None:
        pass

    def render(self, error: LocalServeError) -> Reply:
        self.failure = error
        return Reply(status=error.status_code)

    def traced(self) -> Traced:
        """In the trace of the job's submit: its context was stored with the job."""
        carrier = self.job.meta.get("trace") or {}
        attributes = {"localserve.job.id": self.job.id, "localserve.job.attempt": self.job.attempts}
        return Traced(carrier, f"RUN {self.path.rpartition('/')[0]}", attributes)


def job_request(job: Job, path: str) -> Request:
    """The request a job's submit carried, as its predictor gets it (``request_id`` is the job id)."""
    meta = job.meta
    headers = {str(k).lower(): str(v) for k, v in (meta.get("headers") or {}).items()}
    if meta.get("content_type") and "content-type" not in headers:
        headers["content-type"] = str(meta["content_type"])
    raw = [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers.items()]
    query = urlencode(dict(meta.get("query_params") or {})).encode("latin-1", "replace")
    return Request("POST", raw, job.payload, query_string=query, request_id=job.id, path=path)


async def run_job(engine: Engine, rt: ApiRuntime, job: Job) -> str:
    """Run ``job`` through the engine on API ``rt``: its result as JSON text, or the LocalServeError that ended it."""
    exchange = JobExchange(rt.api.name, job)
    reply = await engine.submit(rt, exchange)
    if exchange.failure is not None:
        raise exchange.failure
    return reply.body.decode("utf-8")


class AsyncWorker:
    """Claims and runs the jobs of one AsyncAPI in this replica."""

    def __init__(
        self,
        name: str,
        store: JobStore,
        run: Callable[[Job], Any],
        *,
        slots: int,
        retention: float,
        ready: Callable[[], bool],
        lease: float = LEASE,
    ) -> None:
        self.name = name
        self.store = store
        self.run = run  # submits a job to the engine (``run_job``); returns a concurrent Future of the JSON text
        self.slots = slots
        self.retention = retention
        self.ready = ready
        self.lease = lease
        self.worker = worker_id()
        self.wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the worker's thread: claim, run, renew leases, recover dead workers' jobs, purge."""
        self._thread = threading.Thread(target=self._loop, name=f"localserve-{self.name}-jobs", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Claim nothing more; jobs still running finish or, if the process ends first, run again elsewhere."""
        self._stop.set()
        self.wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        last_renew = last_house = last_purge = 0.0
        failing = ""  # the store error logged last: said once, not every second while it lasts
        while not self._stop.is_set():
            now = time.time()
            try:
                if now - last_house >= HOUSEKEEPING:
                    last_house = now
                    if self._housekeeping(now, purge=now - last_purge >= PURGE_EVERY):
                        last_purge = now
                if now - last_renew >= self.lease / 3:
                    last_renew = now
                    with self._lock:
                        held = list(self._running)
                    self.store.renew(held, self.worker, now + self.lease)
                job = self._claim(now)
                if failing:
                    log.info("api %r: the job store answers again", self.name)
                    failing = ""
            except StoreError as exc:
                if str(exc) != failing:
                    log.error("api %r: %s (tried again every second; said again when it changes)", self.name, exc)
                    failing = str(exc)
                job = None
                self._stop.wait(1.0)
            if job is None:
                self.wake.wait(POLL)
                self.wake.clear()

    def _housekeeping(self, now: float, *, purge: bool) -> bool:
        """Queue again the jobs of dead workers (and, with ``purge``, delete expired outcomes); whether it purged."""
        back = self.store.recover(now, worker_is_dead)
        if back:
            log.warning(
                "api %r: %d job(s) whose worker died or let its lease run out queued again: %s",
                self.name,
                len(back),
                back,
            )
        if not purge:
            return False
        purged = self.store.purge(now - self.retention)
        if purged:
            log.info("api %r: %d finished job(s) older than the retention purged", self.name, purged)
        return True

    def _claim(self, now: float) -> Job | None:
        with self._lock:
            if len(self._running) >= self.slots or not self.ready():
                return None
        job = self.store.claim(self.worker, now, self.lease)
        if job is None:
            return None
        if job.attempts > 1:
            log.warning("api %r: job %s runs again (attempt %d)", self.name, job.id, job.attempts)
        with self._lock:
            self._running.add(job.id)
        future = self.run(job)
        future.add_done_callback(lambda f: self._done(job, f))
        return job

    def _done(self, job: Job, future: Any) -> None:
        result: str | None = None
        error: str | None = None
        try:
            result = future.result()
        except LocalServeError as exc:
            error = str(exc)
        except BaseException as exc:  # the worker goes on whatever the job did
            error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            log.error("api %r: job %s failed: %s", self.name, job.id, error)
            # A lone surrogate (a file name made by os.fsdecode, say) cannot be stored as UTF-8.
            error = error.encode("utf-8", "backslashreplace").decode("utf-8")
        try:
            if not self.store.finish(job.id, self.worker, time.time(), result=result, error=error):
                log.warning("api %r: job %s was recovered by another worker before it finished here", self.name, job.id)
        except StoreError as exc:
            log.error("api %r: job %s finished but its outcome could not be stored: %s", self.name, job.id, exc)
        except Exception as exc:  # a bug of ours: the job runs again once its lease runs out
            log.error("api %r: job %s finished but storing its outcome failed", self.name, job.id, exc_info=exc)
        finally:
            with self._lock:
                self._running.discard(job.id)
            self.wake.set()
