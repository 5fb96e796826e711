"""Statuses and error messages: the ``LocalServeError`` tree (``localserve.errors``), each class's HTTP
status, its gRPC status (``protocols/v2/grpc/status.py``) and the words of the errors built from arguments."""

from __future__ import annotations

import inspect

from grpc_page import status_codes

from localserve import errors

EXAMPLES = {  # arguments for the errors whose message is built from them
    "Overloaded": ("iris", 100),
    "NotReady": ("iris",),
    "ShuttingDown": (),
    "Timeout": ("iris", 60.0, True),
    "ClientGone": (),
    "MethodNotAllowed": ("TRACE", "/iris", "GET, HEAD, POST, OPTIONS"),
    "NoGpu": ("no CUDA driver is installed",),
    "InternalError": (RuntimeError("boom"),),
}

INTRO = """# Statuses and errors

Every error localserve makes is JSON, `{"error": "...", "request_id": "..."}`, with the request id also in
the `X-Request-ID` header; a traceback goes to the log, never to the client. On the Open Inference
Protocol's REST routes the body is `{"error": "..."}`; over gRPC, the status's details carry the same words.
A message names the bad value and what was expected. Generated from the error classes.

| error | HTTP status | gRPC status | when | message (built from its arguments) |
|---|---|---|---|---|
"""

MORE = """
`NotReady` with the load error: `api 'iris' is not ready: it failed to load: <reason>` (paths inside the
project relative, other folders dropped). A `Timeout` of a request not yet started says `(it had not
started and was dropped)`. `ShuttingDown` of a started request: `... the request was still running when
the graceful timeout ran out; ...`.

## Other statuses

| status | when |
|---|---|
| 408 | a request head did not arrive within `--header-timeout` (10 s), or its body within `--body-timeout` (60 s); the connection closes |
| 431 | a head over `--max-header-bytes` (64 KiB) or `--max-headers` (100), trailers of a chunked body included |
| 501 | a `Transfer-Encoding` other than `chunked` alone |
| 499 | in the log, metrics and `/stats` only: the client left before its answer (nothing is sent) |
| 503 + `Retry-After: 1` | the queue is full (`max_queue` per replica); never 429, as on the platforms |

Overload is logged at its first 503, then at most once a minute with how many there were since, naming
`max_queue` and `--replicas`. With `--hide-errors` a 500's text is replaced by `Internal error: the server
log has the details under this request id`. A message longer than 10,000 characters is cut for the client,
saying how much was cut.

## Exit statuses of the commands

| command | status |
|---|---|
| `localserve run` | 0; 1 when the answer's status is 400 or more (status and body on stderr) or the project cannot load |
| `localserve serve` | 0 after SIGTERM/SIGINT and the graceful timeout; 1 when the start fails (a config error, an API that cannot load without `--keep-going`, a replica that dies 3 times before it is ready) |
| `localserve check` | 0 when `serve` would load the project; 1 with every problem named |
| `localserve get` | 0; 1 when the server cannot be reached |
| a usage error (an unknown flag, a bad value) | 2, click's |
"""


def _example(cls: type[errors.LocalServeError]) -> str:
    args = EXAMPLES.get(cls.__name__)
    if args is None:
        return ""
    message = str(cls(*args))  # type: ignore[arg-type]
    return f"`{message}`"


def render() -> str:
    """The page: one row per error class."""
    grpc = status_codes()
    rows = []
    for cls in vars(errors).values():  # in the order the module defines them
        if not (inspect.isclass(cls) and issubclass(cls, errors.LocalServeError)):
            continue
        status = cls.status_code
        code = (
            "RESOURCE_EXHAUSTED"
            if cls is errors.Overloaded
            else grpc.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        )
        doc = " ".join((cls.__doc__ or "").split())
        rows.append(f"| `{cls.__name__}` | {status} | `{code}` | {doc} | {_example(cls)} |")
    return INTRO + "\n".join(rows) + "\n" + MORE
