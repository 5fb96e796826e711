"""``localserve run`` on an AsyncAPI: the job runs at once, in process, with no store, and its result is printed."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qsl

from localserve.error_text import error_body
from localserve.errors import LocalServeError
from localserve.protocols.asyncapi.store import Job, new_job_id
from localserve.protocols.asyncapi.worker import execute


def run_job_once(
    app: Any, *, api: str, headers: list[tuple[str, str]], body: bytes, query_string: str = ""
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Load ``api`` of ``app``, run one job through its predictor, and return (status, headers, body).

    The body is the result as JSON (200), or ``{"error": ...}`` (500) when the job failed the way
    a served job would have.
    """
    rt = app.apis[api]
    lowered = {k.lower(): v for k, v in headers}
    meta = {
        "content_type": lowered.get("content-type", ""),
        "query_params": dict(parse_qsl(query_string)),
        "headers": {k: v for k, v in lowered.items() if k not in ("authorization", "proxy-authorization")},
    }
    job = Job(new_job_id(), body, meta)
    json_type = [("content-type", "application/json")]

    async def main() -> tuple[int, list[tuple[str, str]], bytes]:
        rt.pipeline.start()
        try:
            await rt.load()
            result: str = await asyncio.wrap_future(rt.pipeline.call(lambda: execute(rt.endpoint, job)))
        except LocalServeError as exc:
            return 500, json_type, error_body(str(exc), job.id)
        finally:
            rt.pipeline.stop()
        return 200, json_type, result.encode()

    return asyncio.run(main())
