"""``localserve run``'s engine: one request through the app in-process, with no socket; the peer APIs on call."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, MutableMapping
from dataclasses import replace
from typing import Any

from localserve.config import ServeConfig
from localserve.errors import HandlerError, LocalServeError
from localserve.project.compat.hosts import RUN_PEERS
from localserve.protocols.asyncapi.oneshot import job_failed, one_shot_job, run_one_job
from localserve.protocols.http import render_error
from localserve.server import App, ServeOptions
from localserve.server.runner import Runner

PEER_LOAD_WAIT = 600.0  # seconds a call to another API waits for it to load


async def call(
    app: App,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    query_string: str = "",
) -> tuple[int, list[tuple[str, str]], bytes]:
    """One HTTP exchange with ``app`` through ASGI; returns (status, headers, body)."""
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method.upper(),
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query_string.encode("latin-1"),
        "headers": _scope_headers(headers, body),
        "client": ("127.0.0.1", 0),
        "server": ("localserve-run", 0),
        "state": {},
    }
    sent = False
    never = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()  # the client never goes away
        return {"type": "http.disconnect"}

    status = 500
    response_headers: list[tuple[str, str]] = []
    chunks: list[bytes] = []
    complete = False

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, response_headers, complete
        if message["type"] == "http.response.start":
            status = message["status"]
            response_headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", [])]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            complete = not message.get("more_body", False)

    await app(scope, receive, send)
    if not complete:  # a stream that failed: what a client would see as a response cut short
        size = sum(map(len, chunks))
        error = HandlerError(
            f"The response was cut short after {size} bytes of its body: the stream failed (see the log)."
        )
        reply = render_error(error, None, logged=True)
        return reply.status, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in reply.headers], reply.body
    return status, response_headers, b"".join(chunks)


def _scope_headers(headers: list[tuple[str, str]], body: bytes) -> list[tuple[bytes, bytes]]:
    """ASGI's headers: lower-case names, and a Content-Length unless the caller's headers have one."""
    encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if not any(name == b"content-length" for name, _ in encoded):
        encoded.append((b"content-length", str(len(body)).encode()))
    return encoded


def run_once(
    runner: Runner,
    *,
    api: str | None,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes,
    query_string: str = "",
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Load every API of the runner's app, send one request to ``api`` (the only one when None), stop."""
    name = api or next(iter(runner.app.apis))
    return runner.call(lambda app: call(app, method, f"/{name}/predict", headers, body, query_string))


def run_job_once(
    runner: Runner, *, api: str, headers: list[tuple[str, str]], body: bytes, query_string: str = ""
) -> tuple[int, list[tuple[str, str]], bytes]:
    """An AsyncAPI's job, run at once: load ``api``, run one job through the engine, stop; the result as JSON."""
    job = one_shot_job(headers, body, query_string)
    try:
        return runner.call(lambda app: run_one_job(app.engine, app.apis[api], job))
    except LocalServeError as exc:  # the API failed to load: the job failed, as a served one would have
        return job_failed(exc, job)


# Under ``run``, LOCALSERVE_URL's host: one loopback server of every API but the one run, started on first use.


def peer_starter(
    config: ServeConfig, options: ServeOptions, *, run_api: str | None = None
) -> Callable[[str], tuple[int, Callable[[], list[str]]]]:
    """For ``Peers``: start API ``name`` of ``config`` on a loopback port; its port and how to stop it.

    ``RUN_PEERS`` starts every API of ``config`` but ``run_api`` on one server (``LOCALSERVE_URL`` under ``run``).
    """

    def start(name: str) -> tuple[int, Callable[[], list[str]]]:
        names = [a.name for a in config.apis if a.name != run_api] if name == RUN_PEERS else [name]
        runner = Runner(config.only(names), replace(options, keep_going=True, metrics=False, async_jobs=True))
        return runner.start_in_thread(PEER_LOAD_WAIT), runner.stop_thread

    return start
