"""Errors as gRPC statuses (``render_status``), and grpc imported only when a gRPC port is asked for.

What is imported is checked in a fresh Python: what this session imported already would hide an import."""

from __future__ import annotations

import logging
import subprocess
import sys

import grpc
import pytest

from localserve.errors import (
    HandlerError,
    LocalServeError,
    NotFound,
    NotReady,
    Overloaded,
    PayloadTooLarge,
    RequestError,
    ShuttingDown,
    Timeout,
    Unauthorized,
)
from localserve.messages.error_text import HIDDEN_ERROR
from localserve.protocols.v2.grpc.status import render_status
from tests.conftest import cli_env


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (RequestError("bad"), grpc.StatusCode.INVALID_ARGUMENT),
        (PayloadTooLarge("big"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (Unauthorized("key"), grpc.StatusCode.UNAUTHENTICATED),
        (NotFound("none"), grpc.StatusCode.NOT_FOUND),
        (NotReady("iris"), grpc.StatusCode.UNAVAILABLE),
        (ShuttingDown(), grpc.StatusCode.UNAVAILABLE),
        (Overloaded("iris", 4), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (Timeout("iris", 1.0, started=False), grpc.StatusCode.DEADLINE_EXCEEDED),
        (HandlerError("boom"), grpc.StatusCode.INTERNAL),
    ],
)
def test_statuses_come_from_the_error_classes(error: LocalServeError, code: grpc.StatusCode) -> None:
    assert render_status(error, "rid") == (code, str(error))


def test_server_errors_are_logged_and_hidden_with_hide_errors(caplog: pytest.LogCaptureFixture) -> None:
    error = HandlerError("onnxruntime failed to run m.onnx: boom", details="Traceback ...")
    with caplog.at_level(logging.ERROR, logger="localserve"):
        assert render_status(error, "rid-1", api="m", hide_errors=True) == (grpc.StatusCode.INTERNAL, HIDDEN_ERROR)
    assert [r.getMessage() for r in caplog.records] == [
        "request rid-1 to api 'm' failed: onnxruntime failed to run m.onnx: boom\nTraceback ..."
    ]
    caplog.clear()
    with caplog.at_level(logging.ERROR, logger="localserve"):  # a 400 or a 503 is the client's or a state: no log
        assert (
            render_status(NotReady("m"), "rid-2", hide_errors=True)[1] == "api 'm' is not ready: it is still loading."
        )
        assert render_status(RequestError("bad"), "rid-3", hide_errors=True)[1] == "bad"
    assert caplog.records == []


def test_grpc_is_imported_only_with_a_grpc_port() -> None:
    probe = (
        "import sys\n"
        "import localserve.cli, localserve.server, localserve.protocols.v2.routes\n"
        "print(sorted(m for m in ('grpc', 'google.protobuf') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), check=True)
    assert done.stdout.strip() == b"[]"
