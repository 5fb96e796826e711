"""The LocalServeError tree; each error knows the HTTP status it maps to.

An error whose text more than one place raises builds it from its arguments (``Overloaded``,
``NotReady``, ``NoGpu``, ``Timeout`` ...), so the words cannot drift apart.
"""

from __future__ import annotations


class LocalServeError(Exception):
    """Base of every error localserve raises on purpose."""

    status_code: int = 500
    details: str = ""  # a traceback of user code, for the log; never sent to clients
    headers: tuple[tuple[bytes, bytes], ...] = ()  # what the answer carries besides the body (Allow, ...)

    def __init__(self, message: str, *, status_code: int | None = None, details: str = "") -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code
        if details:
            self.details = details

    def __str__(self) -> str:
        return self.message


class StartError(LocalServeError):
    """The server cannot start, or stopped: a port it cannot listen on, a replica that cannot load."""


class Unreachable(LocalServeError):
    """A running localserve cannot be reached or answered with an error (``localserve get``)."""


class ConfigError(LocalServeError):
    """The project's configuration (file or flags) is invalid."""


class ProjectError(LocalServeError):
    """The project directory cannot be prepared (.env, requirements, ...)."""


class HandlerLoadError(LocalServeError):
    """User code (handler, request handler, predictor) cannot be loaded."""


class ModelLoadError(LocalServeError):
    """A model cannot be fetched, opened or placed on its device."""


class NoGpu(ModelLoadError):
    """A GPU was requested (``compute.gpu``) but the runtime cannot use one; ``why`` says what is missing."""

    def __init__(self, why: str) -> None:
        super().__init__(f"A GPU was requested (compute.gpu) but {why}; or pass --allow-cpu-fallback to run on CPU.")
        self.why = why

    @property
    def fallback(self) -> str:
        """The warning logged instead when ``--allow-cpu-fallback`` runs the model on CPU."""
        return f"A GPU was requested (compute.gpu) but {self.why}; running on CPU (--allow-cpu-fallback)."


class RequestError(LocalServeError):
    """The client sent something we cannot serve: 400 unless told otherwise (413, 415, 422 ...)."""

    status_code = 400


class PayloadTooLarge(RequestError):
    """The request body is over the limit, sent or once decompressed (413)."""

    status_code = 413


class UnsupportedMediaType(RequestError):
    """The body comes in an encoding or type this route does not take (415)."""

    status_code = 415


class Unauthorized(RequestError):
    """The request lacks the server's API key (401 with WWW-Authenticate)."""

    status_code = 401
    headers = ((b"www-authenticate", b'Bearer realm="localserve"'),)


class MethodNotAllowed(RequestError):
    """The route does not take this method (405 with Allow); ``allow`` lists those it takes."""

    status_code = 405

    def __init__(self, method: str, path: str, allow: str) -> None:
        super().__init__(f"Method {method} is not allowed on {path}" + (f"; it takes {allow}." if allow else "."))
        if allow:
            self.headers = ((b"allow", allow.encode("latin-1")),)


class NotFound(RequestError):
    """No such route, API or page (404)."""

    status_code = 404


class HandlerError(LocalServeError):
    """User code raised, or returned something that cannot become a response (500)."""


class Overloaded(LocalServeError):
    """The API's queue is full (503 with Retry-After)."""

    status_code = 503

    def __init__(self, api: str, max_queue: int) -> None:
        super().__init__(
            f"API {api!r} is at capacity: {max_queue} requests are already queued (max_queue); retry later."
        )


class NotReady(LocalServeError):
    """The API is still loading, or failed to load (503)."""

    status_code = 503

    def __init__(self, api: str, error: str | None = None) -> None:
        why = f"it failed to load: {error}" if error else "it is still loading."
        super().__init__(f"api {api!r} is not ready: {why}")


class ShuttingDown(LocalServeError):
    """The server is stopping and the request will not be answered by the API (503)."""

    status_code = 503

    def __init__(self, started: bool = False) -> None:
        what = (
            "the request was still running when the graceful timeout ran out"
            if started
            else "the request had not started and never will"
        )
        super().__init__(f"The server is shutting down: {what}; retry on another replica or later.")


class StoreUnavailable(LocalServeError):
    """An AsyncAPI's job store cannot take or give jobs now (503 with Retry-After)."""

    status_code = 503


class Timeout(LocalServeError):
    """The request did not finish within the API's timeout (504)."""

    status_code = 504

    def __init__(self, api: str, seconds: float, started: bool) -> None:
        what = "it was still running" if started else "it had not started and was dropped"
        super().__init__(f"api {api!r} did not answer within its timeout of {seconds:g} s ({what}).")


class ClientDeadline(LocalServeError):
    """The client's own deadline (gRPC's) passed before the answer (504; DEADLINE_EXCEEDED over gRPC)."""

    status_code = 504

    def __init__(self, api: str, seconds: float) -> None:
        super().__init__(
            f"api {api!r} did not answer within the client's deadline ({seconds:.3g} s were left when the call came "
            "in); work not yet started was dropped.",
        )


class ClientGone(LocalServeError):
    """The client went away before its request was answered (logged as 499; nothing is sent)."""

    status_code = 499

    def __init__(self, when: str = "before the request started") -> None:
        super().__init__(f"The client disconnected {when}.")


class InternalError(LocalServeError):
    """A bug of ours, or user code that escaped every other net (SystemExit): 500, and the server keeps serving."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"Internal error: {type(exc).__name__}: {exc}")


class WouldFetch(Exception):
    """Reading ``location`` would download it, and the caller may not wait (the event loop): load it off the loop."""
