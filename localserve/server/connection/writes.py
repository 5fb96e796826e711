"""Answers written whole: by the loop in one write (``OneWrite``, ``response_bytes``) or by the API's thread.

``FastReply`` is one request's ``protocols.http.FastPath`` and the engine's ``ReplyWriter``: the
thread that finishes a request writes its answer to the socket itself, where the connection
allows it (docs/explanation/architecture.md, "The answer leaves from the API's thread").
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from typing import Any, Protocol

from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE, RequestResponseCycle
from uvicorn.server import ServerState

from localserve.engine.ports import Headers, ReplyWriter


class Connection(Protocol):
    """What a ``FastReply`` uses of its connection (``protocol.LimitedHttpProtocol``): the request in
    progress, the transport, and the duplicated socket a thread writes to under the lock (-1: none)."""

    @property
    def cycle(self) -> RequestResponseCycle: ...
    @property
    def transport(self) -> asyncio.Transport: ...
    @property
    def server_state(self) -> ServerState: ...
    @property
    def thread_fd(self) -> int: ...
    @property
    def thread_lock(self) -> threading.Lock: ...


KiB = 1024
THREAD_WRITE_LIMIT = 256 * KiB  # larger responses are written by the event loop


def response_bytes(
    cycle: RequestResponseCycle, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> bytes | None:
    """A whole HTTP/1.1 response as uvicorn would write it (its checks, default headers, ``connection: close``).

    None when a header name or value is invalid: uvicorn's ``send`` then refuses it as usual.
    """
    head = [STATUS_LINE[status]]
    names, values = [], []
    for name, value in (*cycle.default_headers, *headers):
        names.append(name)
        values.append(value)
        head += (name, b": ", value, b"\r\n")
    # uvicorn's checks, one search over all the names and one over all the values (a byte refused in one
    # is refused in their concatenation, and the patterns match single bytes) instead of two per header
    if HEADER_RE.search(b"".join(names)) or HEADER_VALUE_RE.search(b"".join(values)):
        return None
    if not cycle.keep_alive:
        head.append(b"connection: close\r\n")
    head += (b"\r\n", body)
    return b"".join(head)


class FastReply:
    """One request's fast path (``protocols.http.FastPath``) and, where the socket allows, its ``ReplyWriter``.

    ``reply_now`` writes a whole answer from the loop in one write. As a writer, the API's thread writes its answer
    itself: the bytes leave without waiting for the loop, whose bookkeeping (``complete``) runs while the client reads.
    The thread writes only a response not begun on an empty, open, unpaused transport (``thread_lock``).
    """

    __slots__ = ("_cycle", "protocol", "whole")

    def __init__(self, protocol: Connection, cycle: RequestResponseCycle) -> None:
        self.protocol = protocol
        self.whole = False  # the API's thread wrote the whole answer: the loop may end it early (``end_early``)
        # Weak: the cycle's scope holds this object, and a strong reference back would make every
        # request a reference cycle that only the collector frees (a gen-0 collection every few dozen requests,
        # each a pause that made the p99 at c=1: benchmarks/README.md). The protocol and the request's
        # task hold the cycle for as long as it can be answered.
        self._cycle = weakref.ref(cycle)

    @property
    def writer(self) -> ReplyWriter | None:
        """This request's writer for the API's thread: itself, unless no descriptor could be duplicated."""
        return self if self.protocol.thread_fd >= 0 else None

    def reply_now(self, status: int, headers: Headers, body: bytes) -> bool:
        """Write a whole response (head and body, ``content-length`` in ``headers``) in one write, on the loop.

        uvicorn's ``send`` of a start and a last body in one call: the same checks of names and values, its default
        headers, ``connection: close`` when the connection ends; then the cycle is complete. False when the response
        cannot go this way (client gone, writing paused, a response begun, a bad header): the caller sends through ASGI.
        """
        cycle = self._cycle()
        if (
            cycle is None
            or cycle is not self.protocol.cycle
            or cycle.response_started
            or cycle.disconnected
            or cycle.flow.write_paused
            or (data := response_bytes(cycle, status, headers, body)) is None
        ):
            return False
        self.complete(data)
        return True

    def write(self, status: int, headers: Headers, body: bytes) -> bytes | None:
        """On an API thread: write the response; the bytes the loop must still write, or None if not written."""
        cycle = self._cycle()
        if (
            cycle is None  # the request is over and gone
            or len(body) > THREAD_WRITE_LIMIT
            or cycle.response_started
            or cycle.disconnected
            or cycle.flow.write_paused
            or (data := response_bytes(cycle, status, headers, body)) is None
        ):
            return None
        protocol = self.protocol
        with protocol.thread_lock:
            transport = protocol.transport
            if protocol.thread_fd < 0 or transport.is_closing() or transport.get_write_buffer_size():
                return None
            cycle.response_started = True  # nothing else answers this request now
            try:
                written = os.write(protocol.thread_fd, data)
            except BlockingIOError:
                written = 0
            except OSError:  # the client has gone; the loop learns it from the connection
                return b""
            self.whole = written == len(data)
        return data[written:]

    def complete(self, rest: bytes) -> None:
        """On the event loop: write ``rest`` of the answer (what the thread could not), then ready the
        connection for its next request. Once only: after ``end_early`` it does nothing."""
        cycle = self._cycle()
        if cycle is None or cycle.response_complete:
            return
        self._end(cycle, rest)
        cycle.on_response()

    def end_early(self) -> None:
        """On the event loop, as the next request's head comes: end this answer if the API's thread wrote it
        whole and the connection stays open, so that the next request starts at once.

        What ``complete`` does but for the protocol's ``on_response``, which readies an idle connection
        (resumes reading, arms the keep-alive timer): the next request is here. Its count is kept.
        """
        cycle = self._cycle()
        if cycle is None or cycle.response_complete or not self.whole or not cycle.keep_alive:
            return
        self._end(cycle, b"")
        self.protocol.server_state.total_requests += 1  # as uvicorn's on_response_complete counts it

    def _end(self, cycle: RequestResponseCycle, rest: bytes) -> None:
        transport = self.protocol.transport
        cycle.response_started = cycle.response_complete = True
        cycle.waiting_for_100_continue = False
        if rest and not transport.is_closing():
            transport.write(rest)
        cycle.message_event.set()
        if not cycle.keep_alive:
            transport.close()


class OneWrite:
    """The transport as one response's writer: the head waits for the body so both go in one write.

    uvicorn writes a head and its body separately: two system calls and two TCP segments per small answer. The first
    write is held until the next one (the same step, when the body follows at once) or the loop's next turn; the bytes
    go out in order either way. Everything but ``write`` and ``close`` is the transport's own.
    """

    __slots__ = ("held", "loop", "state", "transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.held = b""
        self.state = 0  # 0: nothing written yet; 1: the first write is held; 2: writes go straight through

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Hold the first write for one turn of the loop; join it to the next."""
        if self.state == 2:
            self.transport.write(data)
        elif self.state == 1:
            self.state = 2
            held, self.held = self.held, b""
            self.transport.write(held + bytes(data))
        else:
            self.state = 1
            self.held = bytes(data)
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what is held (the body did not follow in the same step)."""
        if self.state == 1:
            self.state = 2
            held, self.held = self.held, b""
            if not self.transport.is_closing():
                self.transport.write(held)

    def close(self) -> None:
        """Close the transport after what is held."""
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)
