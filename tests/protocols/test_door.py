"""A door decides once whether a 500's details are hidden (``HttpWire``, ``GrpcWire``): every error it answers obeys."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from localserve.config.options import ServeOptions
from localserve.errors import HandlerError, RequestError
from localserve.messages.error_text import HIDDEN_ERROR
from localserve.protocols.door import HttpWire


def _sent(wire: HttpWire, error: Exception) -> tuple[int, Any]:
    messages: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    status = asyncio.run(wire.send_error(send, error, "rid-1", "m"))  # type: ignore[arg-type]
    assert messages[0]["status"] == status
    return status, json.loads(b"".join(m.get("body", b"") for m in messages[1:]))


@pytest.mark.parametrize("v2", [False, True])
def test_an_http_wire_hides_the_details_of_a_500_for_every_error_it_sends(v2: bool) -> None:
    hidden = HttpWire.of(ServeOptions(hide_errors=True), v2=v2)
    status, body = _sent(hidden, HandlerError("onnxruntime failed: boom"))
    assert (status, body["error"]) == (500, HIDDEN_ERROR)
    assert ("request_id" in body) is not v2  # V2's bodies are {"error": ...} alone
    assert _sent(hidden, RequestError("bad"))[1]["error"] == "bad"  # the client's mistake is said
    assert _sent(HttpWire.of(ServeOptions(), v2=v2), HandlerError("boom"))[1]["error"] == "boom"


def test_the_grpc_wire_hides_the_details_of_a_500() -> None:
    grpc = pytest.importorskip("grpc")
    from localserve.protocols.v2.grpc.status import GrpcWire

    assert GrpcWire(hide_errors=True).render(HandlerError("boom"), "rid") == (grpc.StatusCode.INTERNAL, HIDDEN_ERROR)
    assert GrpcWire(hide_errors=False).render(HandlerError("boom"), "rid") == (grpc.StatusCode.INTERNAL, "boom")
