"""The state and refusals of ``protocol.LimitedHttpProtocol``: timers (408), the head's and trailers' limits (431).

Kept apart from the parsing so that each module stays readable; ``LimitedHttpProtocol`` is the only subclass.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from localserve.config.options import HttpLimits
from localserve.protocols.http import request_id_of
from localserve.server.connection.refusals import write_refusal

log = logging.getLogger("localserve")


class Refused(Exception):
    """Raised from a parser callback to stop httptools; the reason is kept on the protocol."""


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the state of the limits, the timers and the refusals."""

    limits = HttpLimits()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_head = True  # between two requests, or reading a request line and headers
        self.head_bytes = 0
        self.header_count = 0
        self.content_type: bytes | None = None  # the request's Content-Type so far (two that disagree are a 400)
        self.heads = 0  # request heads parsed on this connection
        self.refusal: tuple[int, str] | None = None
        # A refused request behind others still being answered: (status, message, request id),
        # written once they are (``on_response_complete``); its bytes and any after are dropped.
        self.deferred: tuple[int, str, str] | None = None
        self.body_received = 0  # body bytes of the current request
        # Chunked trailers: after a chunk's size line and before any of its data (``trailing``), the
        # bytes may be the trailer fields of the last chunk, which httptools joins like a head's:
        # they count against --max-header-bytes until a data byte shows it was a chunk (431).
        self.trailing = False
        self.trailer_bytes = 0
        self.trailer_dropped = False  # a trailer field of the current request was dropped (and logged)
        self.head_timer: asyncio.TimerHandle | None = None
        self.body_timer: asyncio.TimerHandle | None = None
        self.write_timer: asyncio.TimerHandle | None = None  # while writing is paused (the client reads nothing)

    def _parse(self, data: bytes) -> None:
        raise NotImplementedError  # LimitedHttpProtocol's

    # -- chunked trailers ---------------------------------------------------------------------------
    def on_chunk_header(self) -> None:
        """A chunk's size line: until its data comes, what follows may be trailer fields (the last chunk)."""
        self.trailing = True

    def on_chunk_complete(self) -> None:
        """A chunk ended (the last one with its trailer fields)."""
        self.trailing, self.trailer_bytes = False, 0

    def _drop_trailer(self, name: bytes) -> None:
        """A trailer field: dropped, never a request header (a handler could not tell it from one); logged once."""
        if not self.trailer_dropped:
            self.trailer_dropped = True
            request_id = request_id_of({"headers": self.headers or []})
            field = name.decode("latin-1")[:100]
            log.info(
                "request %s: trailer field %r dropped (trailer fields never become request headers)", request_id, field
            )

    def _trailer_fits(self, data: bytes) -> bool:
        """Whether ``data``, read while trailer fields may be coming, is within the limit; if not it was handled."""
        room = self.limits.max_header_bytes - self.trailer_bytes
        if len(data) > room:
            self._trailer_over(data, room)
            return False
        self.trailer_bytes += len(data)
        return True

    def _trailer_over(self, data: bytes, room: int) -> None:
        """A read past the limit while trailer fields may be coming: parse up to it; still trailing there is a 431."""
        self.trailer_bytes += room
        self._parse(data[:room])
        if self.transport.is_closing() or self.deferred is not None:
            return
        if self.trailing:
            self._refuse(
                431,
                f"The trailer fields after the chunked body are over {self.limits.max_header_bytes} bytes "
                "(--max-header-bytes).",
            )
            return
        self.data_received(data[room:])  # it was a chunk's data, or the next request

    # -- writing -------------------------------------------------------------------------------
    def pause_writing(self) -> None:
        """The transport's buffer is full: the client has --write-timeout seconds to read some of it."""
        super().pause_writing()
        if self.write_timer is None:
            self.write_timer = self.loop.call_later(self.limits.write_timeout, self._write_timed_out)

    def resume_writing(self) -> None:
        """The client read enough of the answer: its timer stops."""
        super().resume_writing()
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    def _write_timed_out(self) -> None:
        """The client read nothing for --write-timeout seconds: the connection is dropped, and what it held freed."""
        self.write_timer = None
        if self.transport.is_closing() and not self.transport.get_write_buffer_size():
            return
        request_id = request_id_of({"headers": self.headers or []})
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        buffered = self.transport.get_write_buffer_size()
        log.warning(
            "request %s from %s: the connection is closed, its answer unsent: the client read none of it for %g s "
            "(--write-timeout; %d bytes were waiting)",
            request_id,
            client,
            self.limits.write_timeout,
            buffered,
        )
        sock = self.transport.get_extra_info("socket")
        try:  # a reset, so the kernel drops what it holds too (a close would keep sending it to a client that does not read)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except (AttributeError, OSError):
            pass
        self.transport.abort()

    # -- refusals -------------------------------------------------------------------------------
    def _head_timed_out(self) -> None:
        self.head_timer = None
        if not self.in_head or self.transport.is_closing():
            return
        if self.head_bytes == 0:  # an idle connection: nothing was asked, nothing to answer
            self.transport.close()
            return
        self._refuse(
            408, f"The request head did not arrive within {self.limits.header_timeout:g} s (--header-timeout)."
        )

    def _body_timed_out(self) -> None:
        self.body_timer = None
        if self.in_head or self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and cycle.response_started:
            if cycle.response_complete:  # answered early (413, 503): the rest of the body is not wanted
                self.transport.close()
            return  # else the app is answering; the connection ends with its response
        self._refuse(408, f"The request body did not arrive within {self.limits.body_timeout:g} s (--body-timeout).")

    def _refuse_head_size(self) -> None:
        self._refuse(
            431,
            f"The request head (request line and headers) is over {self.limits.max_header_bytes} bytes "
            "(--max-header-bytes).",
        )

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` with a JSON error and close the connection; the app never sees the request.

        A request refused in its head behind earlier ones still being answered (pipelining) waits
        for their answers: they were read whole and their handlers run, so their clients get them.
        """
        self._cancel_timers()
        request_id = request_id_of({"headers": self.headers or []})
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        log.warning("request %s from %s refused with %d: %s", request_id, client, status, message)
        cycle = self.cycle
        if self.in_head and (self.pipeline or (cycle is not None and not cycle.response_complete)):
            self.deferred = (status, message, request_id)
            self.flow.pause_reading()
            return
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the app's receive() now says the client has gone
            cycle.message_event.set()
            if cycle.response_started:  # a response is half sent: nothing more can be said
                self.transport.close()
                return
            cycle.response_complete = True
        write_refusal(self.transport, status, message, request_id)

    def _cancel_timers(self) -> None:
        for timer in (self.head_timer, self.body_timer, self.write_timer):
            if timer is not None:
                timer.cancel()
        self.head_timer = self.body_timer = self.write_timer = None
