"""The HTTP/1.1 connection: uvicorn's httptools protocol with limits on the request head and read timeouts.

httptools (llhttp) has no limit of its own: it hands header values over in pieces joined as they come, so one endless
header costs quadratic time on the loop and unbounded memory. This protocol counts a head's bytes *before* the parser
sees them and refuses the request at the limit (431), and counts headers as they are parsed. A head must arrive within
``header_timeout`` seconds of the connection opening or of its first byte, a body within ``body_timeout`` of its head's
end (408); a silent connection is closed after ``header_timeout``. A request in one read costs a comparison and no
timer, so the hot path stays as fast as plain httptools.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from localserve.config.options import HttpLimits
from localserve.protocols.http import FAST_PATH
from localserve.server.connection.guarded import GuardedProtocol, Refused
from localserve.server.connection.refusals import cut_body_message, header_refusal, write_refusal
from localserve.server.connection.writes import FastReply, OneWrite

log = logging.getLogger("localserve")


def protocol_class(limits: HttpLimits) -> type[HttpToolsProtocol]:
    """A uvicorn ``http`` protocol class enforcing ``limits`` (``uvicorn.Config(http=...)``)."""
    return type("LimitedHttpProtocol", (LimitedHttpProtocol,), {"limits": limits})


class LimitedHttpProtocol(GuardedProtocol):
    """uvicorn's httptools protocol with limits on request heads and timeouts (``HttpLimits``).

    Made per server by ``protocol_class``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.completed = False  # a request ended during the current parse...
        self.begun = False  # ... and the next one began after it
        self.body_seen = 0  # body bytes handed over during the current parse
        # The socket's own descriptor, duplicated for the API's threads to write answers
        # (ThreadReply): closing the connection cannot hand its number to another client while
        # a thread writes, because it is closed under the lock a thread writes under.
        self.thread_fd = -1
        self.thread_lock = threading.Lock()

    # -- connection ---------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: start the timer of its first request head."""
        super().connection_made(transport)
        self.head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

    def _unsupported_upgrade_warning(self) -> None:
        """A WebSocket upgrade was asked for: localserve serves none (uvicorn runs with ``ws="none"``), so the
        request is answered as plain HTTP; uvicorn's own warnings would tell the client's operator to install a
        WebSocket library on every such request."""
        log.debug("request for %s asks to upgrade to %r: answered as plain HTTP", self.url, self._get_upgrade())

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection closed: stop its timers, close the threads' descriptor."""
        self._cancel_timers()
        if self.thread_fd >= 0:
            with self.thread_lock:
                os.close(self.thread_fd)
                self.thread_fd = -1
        super().connection_lost(exc)
        # The last request's cycle (its on_response), its scope (our FastReply) and any pipelined cycles point
        # back here: left set, every closed connection would be a reference cycle that only the collector frees.
        self.cycle = self.scope = None  # type: ignore[assignment]
        self.pipeline.clear()  # never started now (uvicorn's on_response_complete stops at a closing transport)

    def eof_received(self) -> None:
        """The client closed the connection (or its writing side): a request it cut short is a 400 that says so.

        An end of stream is the client leaving, as uvicorn, nginx and Go's net/http take it: a request not yet answered
        is dropped (``engine/lifecycle.py``). A half-close looks the same from here, so it counts as gone too
        (docs/reference/limits.md); a head or body cut short is answered first, for a client that only half-closed.
        """
        if self.deferred is None and not self.transport.is_closing():
            cycle = self.cycle
            if not self.in_head:  # the body was cut short
                if (cycle is None or not cycle.response_started) and not self.pipeline:  # and it has no answer yet
                    self._refuse(400, cut_body_message(self.headers or [], self.body_received))
            elif self.head_bytes and (cycle is None or cycle.response_complete) and not self.pipeline:
                self._refuse(
                    400,
                    "The request head ended early: the connection was closed before the blank line that ends "
                    "the headers.",
                )
        super().eof_received()

    def data_received(self, data: bytes) -> None:
        """Feed bytes to the parser, answering a request over the limits with its 4xx."""
        if self.deferred is not None:
            return  # the connection ends with the refusal once the requests before it are answered
        if self.in_head:
            room = self.limits.max_header_bytes - self.head_bytes
            if len(data) > room:
                self._head_over(data, room)
                return
            self.head_bytes += len(data)
        elif self.trailing and not self._trailer_fits(data):
            return
        self._parse(data)
        if self.transport.is_closing():
            self._cancel_timers()
        elif self.deferred is not None:
            return
        elif self.in_head:
            if self.head_bytes and self.head_timer is None:
                self.head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)
        elif self.body_timer is None:  # a body is still coming
            self.body_timer = self.loop.call_later(self.limits.body_timeout, self._body_timed_out)

    def _head_over(self, data: bytes, room: int) -> None:
        """A read past the head's limit: the head may end inside it (a body follows), so parse up to the limit."""
        self.head_bytes += room
        heads = self.heads
        self._parse(data[:room])
        if self.heads == heads and not self.transport.is_closing() and self.deferred is None:
            self._refuse_head_size()
            return
        if not self.transport.is_closing() and self.deferred is None and len(data) > room:
            self.data_received(data[room:])  # a body, or a next request's head counted afresh

    def _parse(self, data: bytes) -> None:
        """Parse ``data``; when a request ends inside it and the next one's head begins, count that head.

        Where the next head begins in ``data`` is not known, so all of ``data`` but the body bytes
        counts toward it: a pipelined request cannot slip a head past the limit behind another.
        """
        self.completed, self.body_seen = False, 0
        super().data_received(data)
        if self.completed and self.begun and self.in_head and self.deferred is None and not self.transport.is_closing():
            self.head_bytes = len(data) - self.body_seen
            if self.head_bytes > self.limits.max_header_bytes:
                self._refuse_head_size()

    # -- parser callbacks -----------------------------------------------------------------------
    def on_message_begin(self) -> None:
        """A request begins: its headers are counted from zero."""
        self.header_count, self.begun, self.body_received = 0, True, 0
        self.content_type = None
        self.trailing, self.trailer_bytes, self.trailer_dropped = False, 0, False
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        """One header: refused when the head has too many. A trailer field counts, and is dropped."""
        self.header_count += 1
        if self.header_count > self.limits.max_headers:
            self.refusal = (431, f"The request has more than {self.limits.max_headers} headers (--max-headers).")
            raise Refused
        if not self.in_head:  # a trailer field
            self._drop_trailer(name)
            return
        if len(name) in (12, 17):  # Content-Type, Transfer-Encoding: checked (the others cost one comparison)
            self.refusal = header_refusal(name, value, self.content_type)
            if self.refusal is not None:
                raise Refused
            if name.lower() == b"content-type":
                self.content_type = value
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The head is complete: its timer stops and the body's starts."""
        self.in_head = False
        self.heads += 1
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None
        self._end_written_answer()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.transport is self.transport and self.scope["method"] != "HEAD":
            cycle.transport = OneWrite(self.transport, self.loop)  # type: ignore[assignment]
            if self.thread_fd < 0 and not self.transport.is_closing():
                self._open_thread_fd()
            self.scope["extensions"] = {FAST_PATH: FastReply(self, cycle)}  # type: ignore[dict-item]

    def on_body(self, body: bytes) -> None:
        """A piece of the body (counted: it is no part of the next request's head)."""
        self.trailing, self.trailer_bytes = False, 0
        self.body_seen += len(body)
        self.body_received += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        """The request is complete: the next head is counted from zero and the body's timer stops."""
        self.in_head, self.head_bytes, self.completed, self.begun = True, 0, True, False
        if self.body_timer is not None:
            self.body_timer.cancel()
            self.body_timer = None
        super().on_message_complete()

    def _end_written_answer(self) -> None:
        """The next request came before the loop ended the answer an API's thread wrote whole: end that one now.

        A keep-alive client sends its next request as soon as it has the answer, often before the loop woke to end it;
        uvicorn would take it for a pipelined one and stop reading until then. The answer is all out, so it ends here
        (``FastReply.end_early``) and this request starts at once; requests really pipelined wait their turn.
        """
        cycle = self.cycle
        if cycle is None or cycle.response_complete or self.pipeline:
            return
        extensions = cycle.scope.get("extensions")
        reply = None if extensions is None else extensions.get(FAST_PATH)
        if isinstance(reply, FastReply):
            reply.end_early()

    def _open_thread_fd(self) -> None:
        transport = self.transport
        sock = transport.get_extra_info("socket")
        if sock is None or transport.get_extra_info("sslcontext") is not None:
            return
        try:
            self.thread_fd = os.dup(sock.fileno())
        except OSError:  # out of descriptors: the loop writes every answer of this connection
            self.thread_fd = -1

    def send_400_response(self, msg: str) -> None:
        """A request the parser refused: the 431 of a head over the limits, else a 400 with the parser's reason.

        uvicorn calls this while it handles httptools' error, whose text (llhttp's) says what was wrong.
        """
        if self.refusal is not None:
            self._refuse(*self.refusal)
            return
        error = sys.exc_info()[1]
        reason = str(error).strip() if error is not None else ""
        self._refuse(400, f"The request is not valid HTTP/1.1: {reason or msg}.")

    def on_response_complete(self) -> None:
        """A response is complete: the next pipelined request starts, or a refusal deferred behind it goes out."""
        super().on_response_complete()
        deferred = self.deferred
        if deferred is None or self.pipeline or (self.cycle is not None and not self.cycle.response_complete):
            return
        self.deferred = None
        if not self.transport.is_closing():
            write_refusal(self.transport, *deferred)
