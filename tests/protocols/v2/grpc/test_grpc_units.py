"""The gRPC front door's pieces on their own: errors as statuses, the model a message names, lazy imports."""

from __future__ import annotations

import logging
import subprocess
import sys

import grpc
import pytest
from tritonclient.grpc import service_pb2

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
from localserve.protocols.v2.grpc.head import peek_model
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


def test_the_model_is_read_from_the_first_fields_only() -> None:
    request = service_pb2.ModelInferRequest(model_name="mlp", model_version="1", id="x")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(b"\0" * 16)
    assert peek_model(request.SerializeToString()) == ("mlp", "1")
    assert peek_model(service_pb2.ModelInferRequest(model_name="iris").SerializeToString()) == ("iris", "")
    assert peek_model(b"") == ("", "")
    late = service_pb2.ModelInferRequest(id="x").SerializeToString() + b"\x0a\x03mlp"  # model_name after id
    assert peek_model(late) == ("", "")
    with pytest.raises(RequestError, match=r"field 1 says 200 bytes, past the end of the message\.$"):
        peek_model(b"\x0a\xc8\x01mlp")
    with pytest.raises(RequestError, match=r"it ends inside a field's number or length\.$"):
        peek_model(b"\x0a")
    with pytest.raises(RequestError, match=r"a varint is longer than 10 bytes\.$"):
        peek_model(b"\xff" * 11)
    with pytest.raises(RequestError, match=r"model_name or model_version is not valid UTF-8\.$"):
        peek_model(b"\x0a\x01\xff")


def test_grpc_is_imported_only_with_a_grpc_port() -> None:
    probe = (
        "import sys\n"
        "import localserve.cli, localserve.server, localserve.protocols.v2.routes\n"
        "print(sorted(m for m in ('grpc', 'google.protobuf') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, env=cli_env(), check=True)
    assert done.stdout.strip() == b"[]"
