"""The contract with uvicorn's internals: what ``localserve/server/connection/`` and the runners rely on.

uvicorn's public API ends at ``Config``, ``Server.run`` and the ASGI interface; our connection
subclasses its httptools protocol and completes its response cycles itself. These tests name
every private name we use, so an upgrade that moves one fails here, with the name, before a
request does. ``pyproject.toml`` bounds uvicorn and httptools to the versions these tests (and
``tests/server/connection/test_writes.py``, which drives the real thing over sockets) passed on.
"""

from __future__ import annotations

import inspect
import re

import pytest
from uvicorn import Config, Server
from uvicorn.protocols.http import httptools_impl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

# HttpToolsProtocol's methods our LimitedHttpProtocol overrides or calls, with the parameters it passes.
PROTOCOL_METHODS = {
    "connection_made": ["transport"],
    "connection_lost": ["exc"],
    "eof_received": [],
    "data_received": ["data"],
    "on_message_begin": [],
    "on_header": ["name", "value"],
    "on_headers_complete": [],
    "on_body": ["body"],
    "on_message_complete": [],
    "on_response_complete": [],
    "send_400_response": ["msg"],
    "_unsupported_upgrade_warning": [],
    "_get_upgrade": [],
    "pause_writing": [],
    "resume_writing": [],
}
# What the protocol sets up per connection and per request, read or written by our code.
PROTOCOL_ATTRIBUTES = ["cycle", "pipeline", "flow", "headers", "scope", "client", "transport", "loop"]
CYCLE_ATTRIBUTES = [
    "response_started",
    "response_complete",
    "disconnected",
    "keep_alive",
    "default_headers",
    "message_event",
    "on_response",
    "flow",
    "transport",
    "waiting_for_100_continue",
]


@pytest.mark.parametrize("name", sorted(PROTOCOL_METHODS))
def test_the_protocol_methods_we_override_keep_their_parameters(name: str) -> None:
    method = getattr(HttpToolsProtocol, name, None)
    assert method is not None, f"uvicorn's HttpToolsProtocol has no {name}() any more"
    parameters = [p for p in inspect.signature(method).parameters if p != "self"]
    assert parameters == PROTOCOL_METHODS[name], f"HttpToolsProtocol.{name}{inspect.signature(method)}"


def test_the_protocol_and_cycle_attributes_we_use_are_set_in_their_constructors() -> None:
    protocol_init = inspect.getsource(HttpToolsProtocol.__init__) + inspect.getsource(HttpToolsProtocol)
    for name in PROTOCOL_ATTRIBUTES:
        assert re.search(rf"self\.{name}\b", protocol_init), f"HttpToolsProtocol no longer sets self.{name}"
    cycle = inspect.getsource(RequestResponseCycle)
    for name in CYCLE_ATTRIBUTES:
        assert re.search(rf"self\.{name}\b", cycle), f"RequestResponseCycle no longer sets self.{name}"
    assert "write_paused" in inspect.getsource(httptools_impl.FlowControl)


def test_the_status_lines_and_header_checks_we_reuse() -> None:
    for status in (200, 204, 400, 401, 404, 405, 408, 413, 415, 431, 499, 500, 501, 503, 504):
        line = httptools_impl.STATUS_LINE[status]
        assert line.startswith(f"HTTP/1.1 {status}".encode()) and line.endswith(b"\r\n")
    assert httptools_impl.HEADER_RE.search(b"bad name") and not httptools_impl.HEADER_RE.search(b"x-good")
    assert httptools_impl.HEADER_VALUE_RE.search(b"a\x01") and not httptools_impl.HEADER_VALUE_RE.search(b"fine")


def test_the_server_lifecycle_we_drive() -> None:
    """server/connection/server.py overrides ``handle_exit`` (clearing ``_captured_signals``) and ``startup``,
    and reads ``servers`` for the port bound."""
    for name, parameters in {
        "handle_exit": ["sig", "frame"],
        "startup": ["sockets"],
    }.items():
        method = getattr(Server, name)
        assert [p for p in inspect.signature(method).parameters if p != "self"] == parameters, name
    server = Server(Config(app=lambda: None))
    assert isinstance(server._captured_signals, list)
    assert hasattr(server, "should_exit") and "self.servers" in inspect.getsource(Server.startup)


def test_httptools_calls_the_chunk_callbacks_around_the_trailer_fields() -> None:
    """guarded.py counts trailer fields from the last chunk's size line (``on_chunk_header``) to its end."""
    import httptools

    class Recorder:
        def __init__(self) -> None:
            self.events: list[object] = []

        def on_header(self, name: bytes, value: bytes) -> None:
            self.events.append((name, value))

        def on_headers_complete(self) -> None:
            self.events.append("head")

        def on_body(self, body: bytes) -> None:
            self.events.append(body)

        def on_chunk_header(self) -> None:
            self.events.append("chunk")

        def on_chunk_complete(self) -> None:
            self.events.append("chunk end")

        def on_message_complete(self) -> None:
            self.events.append("end")

    recorder = Recorder()
    parser = httptools.HttpRequestParser(recorder)
    for piece in (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n", b"0\r\nX-T: a", b"b\r\n\r\n"):
        parser.feed_data(piece)
    assert recorder.events == [
        (b"Transfer-Encoding", b"chunked"),
        "head",
        "chunk",
        b"{}",
        "chunk end",
        "chunk",
        (b"X-T", b"ab"),
        "chunk end",
        "end",
    ]
