"""The LocalServeError tree; each error knows the HTTP status it maps to."""

from __future__ import annotations


class LocalServeError(Exception):
    """Base of every error localserve raises on purpose."""

    status_code: int = 500
    details: str = ""  # a traceback of user code, for the log; never sent to clients

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code

    def __str__(self) -> str:
        return self.message


class ConfigError(LocalServeError):
    """The project's configuration (file or flags) is invalid."""


class ProjectError(LocalServeError):
    """The project directory cannot be prepared (.env, requirements, ...)."""


class HandlerLoadError(LocalServeError):
    """User code (handler, request handler, predictor) cannot be loaded."""


class ModelLoadError(LocalServeError):
    """A model cannot be fetched, opened or placed on its device."""


class RequestError(LocalServeError):
    """The client sent something we cannot serve: 400 unless told otherwise (413, 415, 422 ...)."""

    status_code = 400


class NotFound(RequestError):
    status_code = 404


class HandlerError(LocalServeError):
    """User code raised, or returned something that cannot become a response (500)."""


class Overloaded(LocalServeError):
    """The API's queue is full (503 with Retry-After)."""

    status_code = 503


class NotReady(LocalServeError):
    """The API is still loading, or failed to load (503)."""

    status_code = 503


class Timeout(LocalServeError):
    """The request did not finish within the API's timeout (504)."""

    status_code = 504
