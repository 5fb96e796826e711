"""The LocalServeError tree: each error's HTTP status comes from its class, the headers its answer carries, and
the words of the errors more than one place raises, built from their arguments."""

from __future__ import annotations

import pytest

from localserve.errors import (
    ClientDeadline,
    ClientGone,
    ConfigError,
    HandlerError,
    InternalError,
    LocalServeError,
    MethodNotAllowed,
    NoGpu,
    NotFound,
    NotReady,
    Overloaded,
    PayloadTooLarge,
    RequestError,
    ShuttingDown,
    StoreUnavailable,
    Timeout,
    Unauthorized,
    UnsupportedMediaType,
)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ConfigError("x"), 500),
        (HandlerError("x"), 500),
        (RequestError("x"), 400),
        (PayloadTooLarge("x"), 413),
        (UnsupportedMediaType("x"), 415),
        (Unauthorized("x"), 401),
        (NotFound("x"), 404),
        (MethodNotAllowed("GET", "/p", "POST"), 405),
        (Overloaded("iris", 4), 503),
        (NotReady("iris"), 503),
        (ShuttingDown(), 503),
        (StoreUnavailable("x"), 503),
        (Timeout("iris", 1.5, started=True), 504),
        (ClientDeadline("iris", 0.25), 504),
        (ClientGone(), 499),
        (InternalError(RuntimeError("bug")), 500),
    ],
)
def test_the_status_comes_from_the_class(error: LocalServeError, status: int) -> None:
    assert error.status_code == status


def test_a_status_given_overrides_the_class_and_details_stay_out_of_the_text() -> None:
    error = RequestError("too many", status_code=422, details="Traceback ...")
    assert (error.status_code, str(error), error.details) == (422, "too many", "Traceback ...")
    assert RequestError("plain").status_code == 400  # the class's own is untouched
    assert LocalServeError("x").details == ""


def test_headers_of_the_answer() -> None:
    assert Unauthorized("x").headers == ((b"www-authenticate", b'Bearer realm="localserve"'),)
    assert MethodNotAllowed("GET", "/iris", "POST, OPTIONS").headers == ((b"allow", b"POST, OPTIONS"),)
    assert MethodNotAllowed("GET", "/iris", "").headers == ()
    assert RequestError("x").headers == ()


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (MethodNotAllowed("GET", "/iris", "POST"), "Method GET is not allowed on /iris; it takes POST."),
        (MethodNotAllowed("PUT", "/x", ""), "Method PUT is not allowed on /x."),
        (Overloaded("iris", 4), "API 'iris' is at capacity: 4 requests are already queued (max_queue); retry later."),
        (NotReady("iris"), "api 'iris' is not ready: it is still loading."),
        (NotReady("iris", "no model.onnx"), "api 'iris' is not ready: it failed to load: no model.onnx"),
        (
            ShuttingDown(),
            "The server is shutting down: the request had not started and never will; retry on another replica or "
            "later.",
        ),
        (
            ShuttingDown(started=True),
            "The server is shutting down: the request was still running when the graceful timeout ran out; retry on "
            "another replica or later.",
        ),
        (
            Timeout("iris", 2.0, started=True),
            "api 'iris' did not answer within its timeout of 2 s (it was still running).",
        ),
        (
            Timeout("iris", 0.5, started=False),
            "api 'iris' did not answer within its timeout of 0.5 s (it had not started and was dropped).",
        ),
        (
            ClientDeadline("iris", 0.12345),
            "api 'iris' did not answer within the client's deadline (0.123 s were left when the call came in); work "
            "not yet started was dropped.",
        ),
        (ClientGone(), "The client disconnected before the request started."),
        (ClientGone("while streaming"), "The client disconnected while streaming."),
        (InternalError(KeyError("k")), "Internal error: KeyError: 'k'"),
    ],
)
def test_the_words_are_built_from_the_arguments(error: LocalServeError, text: str) -> None:
    assert str(error) == text


def test_no_gpu_says_what_is_missing_and_what_a_fallback_logs() -> None:
    error = NoGpu("onnxruntime has no CUDA provider")
    assert str(error) == (
        "A GPU was requested (compute.gpu) but onnxruntime has no CUDA provider; or pass --allow-cpu-fallback to run "
        "on CPU."
    )
    assert error.fallback == (
        "A GPU was requested (compute.gpu) but onnxruntime has no CUDA provider; running on CPU (--allow-cpu-fallback)."
    )
