"""``localserve run`` on an AsyncAPI: the job runs at once, in process, with no store, and its result is printed."""

from __future__ import annotations

from urllib.parse import parse_qsl

from localserve.engine.api import ApiRuntime
from localserve.engine.core import Engine
from localserve.errors import LocalServeError
from localserve.protocols.asyncapi.store import Job, new_job_id
from localserve.protocols.asyncapi.worker import run_job
from localserve.protocols.http import render_error

JSON_TYPE = [("content-type", "application/json")]


def one_shot_job(headers: list[tuple[str, str]], body: bytes, query_string: str = "") -> Job:
    """The job a submit of ``body`` with ``headers`` would have stored (credentials left out)."""
    lowered = {k.lower(): v for k, v in headers}
    meta = {
        "content_type": lowered.get("content-type", ""),
        "query_params": dict(parse_qsl(query_string)),
        "headers": {k: v for k, v in lowered.items() if k not in ("authorization", "proxy-authorization")},
    }
    return Job(new_job_id(), body, meta)


async def run_one_job(engine: Engine, rt: ApiRuntime, job: Job) -> tuple[int, list[tuple[str, str]], bytes]:
    """Run ``job`` through the engine on the loaded API ``rt``, as a worker would: (status, headers, body).

    The body is the result as JSON (200), or ``{"error": ...}`` with the error's status (a body the
    predictor cannot read is the client's 400, a predictor that raised a 500) when the job failed the
    way a served job would have.
    """
    try:
        result = await run_job(engine, rt, job)
    except LocalServeError as exc:
        return job_failed(exc, job)
    return 200, JSON_TYPE, result.encode()


def job_failed(exc: LocalServeError, job: Job) -> tuple[int, list[tuple[str, str]], bytes]:
    """What ``run`` prints for a job that failed (or whose API failed to load): the error's status, its body
    naming the job."""
    reply = render_error(exc, job.id, logged=True)
    return reply.status, JSON_TYPE, reply.body
