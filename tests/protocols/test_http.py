"""The HTTP wire's pieces every door shares: request ids (the client's, or a new unique one), THE renderer of an
error as an answer (status, headers, JSON body, what is logged), and the answers sent over ASGI."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from localserve.errors import HandlerError, NotReady, RequestError, Timeout, Unauthorized
from localserve.messages.error_text import HIDDEN_ERROR
from localserve.protocols.http import answer_other_method, json_reply, render_error, request_id_of, send_reply


def scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def test_the_clients_request_id_is_kept_unless_it_cannot_be_sent_back() -> None:
    assert request_id_of(scope((b"x-request-id", b"abc-1"))) == "abc-1"
    assert request_id_of(scope((b"x-request-id", b"x" * 300))) == "x" * 200
    made = {request_id_of(scope((b"x-request-id", b"bad\nid"))), request_id_of(scope()), request_id_of(scope())}
    assert len(made) == 3 and all(len(rid) == 32 for rid in made)


def test_an_error_is_its_status_its_headers_and_a_json_body(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="localserve"):
        reply = render_error(NotReady("iris"), "r1")
        assert reply.status == 503
        assert reply.headers == [(b"content-type", b"application/json"), (b"retry-after", b"1")]
        assert json.loads(reply.body) == {"error": "api 'iris' is not ready: it is still loading.", "request_id": "r1"}
        unauthorized = render_error(Unauthorized("no key"), "r2")
        assert (b"www-authenticate", b'Bearer realm="localserve"') in unauthorized.headers
        v2 = render_error(RequestError("bad"), "r3", v2=True)
        assert (v2.status, json.loads(v2.body)) == (400, {"error": "bad"})  # Triton's body: no request id
        render_error(Timeout("iris", 1.0, started=True), "r4")
    assert caplog.records == []  # a client's mistake, a 503 or a 504 is no server error


def test_a_server_error_is_logged_with_user_codes_traceback_and_hidden_if_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = HandlerError("boom", details="Traceback: main.py line 3")
    with caplog.at_level(logging.ERROR, logger="localserve"):
        reply = render_error(error, "r5", api="iris", hide_errors=True)
        render_error(HandlerError("quiet"), "r6", logged=True)
        render_error(HandlerError("no api"), "r7")
    assert (reply.status, json.loads(reply.body)) == (500, {"error": HIDDEN_ERROR, "request_id": "r5"})
    assert caplog.messages == [
        "request r5 to api 'iris' failed: boom\nTraceback: main.py line 3",
        "request r7 failed: no api",
    ]


def run_send(coroutine: Any) -> tuple[Any, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def main() -> Any:
        return await coroutine(send)

    return asyncio.run(main()), sent


def test_a_reply_is_sent_as_two_asgi_messages_with_its_length_and_id() -> None:
    _, sent = run_send(lambda send: send_reply(send, json_reply(201, {"ok": True}), "r8"))
    start, body = sent
    assert start["status"] == 201
    assert dict(start["headers"])[b"content-length"] == b"12" and dict(start["headers"])[b"x-request-id"] == b"r8"
    assert body == {"type": "http.response.body", "body": b'{"ok": true}'}


def test_another_method_is_a_204_for_options_and_a_405_with_allow_for_the_rest() -> None:
    status, sent = run_send(lambda send: answer_other_method(send, "OPTIONS", "/iris", b"GET, POST", "r9"))
    assert status == 204 and (b"allow", b"GET, POST") in sent[0]["headers"]
    status, sent = run_send(lambda send: answer_other_method(send, "PUT", "/iris", b"GET, POST", "r10"))
    assert status == 405 and (b"allow", b"GET, POST") in sent[0]["headers"]
    assert json.loads(sent[1]["body"]) == {
        "error": "Method PUT is not allowed on /iris; it takes GET, POST.",
        "request_id": "r10",
    }
