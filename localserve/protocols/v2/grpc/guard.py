"""What a gRPC call passes before its message is read: the API key, its connection's buffer, the message's timeout.

The gRPC port's counterpart of the HTTP connection's limits (``server/connection/``). grpcio reads a unary
call's message before its handler runs, opening the stream's HTTP/2 window to whatever size the client
announces; ``Guard`` serves every unary RPC as a request-streaming one instead, so that nothing is read
until it asks:

- ``--api-key`` is checked from the metadata, the message unread (UNAUTHENTICATED);
- a connection reads at most ``READS_AT_ONCE`` messages at once, and none while the messages its calls hold
  (read, not yet answered) reach ``--max-body-size`` (RESOURCE_EXHAUSTED, counted and logged): what its
  unanswered messages hold stays under ``READS_AT_ONCE + 1`` times ``--max-body-size``. Reads overlap because one
  at a time would make each call wait for the read before it (under load, a turn of the event loop) and a
  stalled message hold up every call behind it;
- the message must arrive within ``--body-timeout`` of the call's start (DEADLINE_EXCEEDED, counted and
  logged); the call ends and grpc frees what it had buffered. One timer of the guard's (``_sweep``, every
  eighth of the timeout, at most a second) watches every call being read, rather than a timer set and
  cancelled by each call on the event loop; a late message is refused at most that tick late.

Streams not yet read keep their initial window (``server.py`` turns grpc's window growing off).
"""

from __future__ import annotations

import asyncio
import collections
import hmac
import logging
import sys
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from localserve.config.options import ServeOptions
from localserve.errors import LocalServeError, RequestError, Unauthorized
from localserve.metrics.extras import ExtraMetrics
from localserve.protocols.v2.grpc.call import REQUEST_ID, Context, request_id_of_call
from localserve.protocols.v2.grpc.status import GrpcWire

log = logging.getLogger("localserve")

OPEN_RPCS = frozenset({"ServerLive", "ServerReady"})  # the health probes: no API key needed (as /healthz, /readyz)
READS_AT_ONCE = 4  # messages one connection reads at once
if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]


class _Connection:
    """One HTTP/2 connection's calls: how many are open, the bytes their messages hold, the reads it may start.

    ``free`` reads may start now; a call finding none waits in ``waiting`` (first come, first served) for one to end.
    A counter rather than an ``asyncio.Semaphore``: a read that need not wait, nearly every one, costs no coroutine.
    """

    __slots__ = ("calls", "free", "held", "waiting")

    def __init__(self) -> None:
        self.calls = 0
        self.held = 0
        self.free = READS_AT_ONCE
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    def take(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None] | None:
        """A read starts now (None; ``free`` counts it), or the future that its call awaits (``wait``) for its turn."""
        if self.free > 0 and not self.waiting:
            self.free -= 1
            return None
        turn = loop.create_future()
        self.waiting.append(turn)
        return turn

    async def wait(self, turn: asyncio.Future[None]) -> None:
        """Wait for ``turn``, handed on by a read that ends (``done``); a call cancelled meanwhile never loses it."""
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # handed this turn as it was cancelled: pass it on
                self.done()
            elif turn in self.waiting:  # else ``done`` has passed it over already
                self.waiting.remove(turn)
            raise

    def done(self) -> None:
        """A read ended: its turn goes to the first call still waiting, else back to ``free``."""
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1


def _uncancel(task: asyncio.Task[Any]) -> None:
    """Undo the cancellation ``Guard._sweep`` asked for, once handled (Python 3.10 counts none)."""
    if sys.version_info >= (3, 11):
        task.uncancel()


class Refusal(LocalServeError):
    """A call refused before its message was read; ``reason`` labels it in ``localserve_grpc_refusals_total``."""

    def __init__(self, message: str, status_code: int, reason: str) -> None:
        super().__init__(message, status_code=status_code)
        self.reason = reason


class Guard:
    """Every unary RPC of the gRPC server read under the limits above (``guarded``)."""

    def __init__(self, options: ServeOptions, wire: GrpcWire, extras: ExtraMetrics | None) -> None:
        self.expected_key = None if not options.api_key else b"bearer " + options.api_key.encode("utf-8")
        self.message_timeout = options.limits.body_timeout
        self.max_held = options.max_body_size
        self.wire = wire
        self.extras = extras
        self.connections: dict[str, _Connection] = {}
        self._reading: dict[asyncio.Task[Any], float] = {}  # the calls whose message is awaited: since (loop time)
        self._late: set[asyncio.Task[Any]] = set()  # those of them the sweep cancelled, past --body-timeout
        self._sweeping: asyncio.TimerHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the server's (``guarded``): not asked by every call
        self.tick = min(1.0, self.message_timeout / 8)  # how often _sweep looks at them

    def guarded(self, service: str, methods: dict[str, Handler]) -> grpc.GenericRpcHandler:
        """``service``'s generic handler with every unary method served as request-streaming, so that its message is
        read here: wrapped once, where an interceptor would be run by grpc on every call. Called on the server's
        event loop, as it starts."""
        self.loop = asyncio.get_running_loop()
        return grpc.method_handlers_generic_handler(
            service,
            {
                name: handler if handler.unary_unary is None else self._guard(handler, name)
                for name, handler in methods.items()
            },
        )

    def _guard(self, handler: Handler, rpc: str) -> Handler:
        behaviour, deserialize = handler.unary_unary, handler.request_deserializer
        assert behaviour is not None
        keyed = self.expected_key is not None and rpc not in OPEN_RPCS

        async def call(requests: Any, context: Context) -> Any:
            peer = context.peer()
            if keyed:
                await self.check_key(context, rpc)
            data = await self._read(context, rpc, peer)
            try:
                message = data if deserialize is None else deserialize(data)
                return await behaviour(message, context)  # type: ignore[arg-type]  # the stubs know the sync context only
            finally:
                self._release(peer, len(data))

        return grpc.stream_unary_rpc_method_handler(call, response_serializer=handler.response_serializer)

    async def _read(self, context: Context, rpc: str, peer: str) -> bytes:
        """The call's one message, read under its connection's limits; the bytes are held until ``_release``."""
        connection = self.connections.get(peer)
        if connection is None:
            connection = self.connections[peer] = _Connection()
        connection.calls += 1
        loop = self.loop
        assert loop is not None, "guarded() is called as the server starts, on its loop"
        task = asyncio.current_task(loop)
        assert task is not None
        reading = self._reading
        reading[task] = loop.time()
        if self._sweeping is None:
            self._sweeping = loop.call_later(self.tick, self._sweep)
        try:
            turn = connection.take(loop)
            if turn is not None:
                await connection.wait(turn)
            try:
                if connection.held >= self.max_held:
                    raise Refusal(
                        f"The connection holds {connection.held:,} bytes of messages not yet answered, the most "
                        f"one connection may (--max-body-size {self.max_held:,}); send again once some are "
                        "answered, or over another connection.",
                        413,
                        "connection_buffer",
                    )
                message = await context.read()
            finally:
                connection.done()
            if message is grpc.aio.EOF:
                raise RequestError(f"The {rpc} call ended without a request message; send one.")
            connection.held += len(message)  # before the next read of the connection checks it
            return bytes(message)
        except asyncio.CancelledError:
            self._release(peer, 0)
            if task not in self._late:  # the client's cancel, or the server stopping
                raise
            self._late.discard(task)
            _uncancel(task)
            message = f"The request message did not arrive within {self.message_timeout:g} s (--body-timeout)."
            await self._refuse(context, rpc, Refusal(message, 408, "message_timeout"))
        except LocalServeError as exc:
            self._release(peer, 0)
            await self._refuse(context, rpc, exc)
        finally:
            del reading[task]

    def _sweep(self) -> None:
        """Every ``tick`` while messages are awaited: cancel the reads past ``--body-timeout`` (``_read`` refuses them).

        ``_reading`` is in the order the reads began, so the sweep stops at the first one still in time."""
        reading = self._reading
        if not reading:
            self._sweeping = None
            return
        loop = asyncio.get_running_loop()
        began_by = loop.time() - self.message_timeout
        for task, since in reading.items():
            if since > began_by:
                break
            if task not in self._late:
                self._late.add(task)
                task.cancel()
        self._sweeping = loop.call_later(self.tick, self._sweep)

    def _release(self, peer: str, size: int) -> None:
        connection = self.connections[peer]
        connection.held -= size
        connection.calls -= 1
        if not connection.calls:
            del self.connections[peer]

    async def _refuse(self, context: Context, rpc: str, exc: LocalServeError) -> NoReturn:
        request_id = request_id_of_call(context)
        context.set_trailing_metadata(((REQUEST_ID, request_id),))  # as the RPCs answer, errors too
        code, details = self.wire.render(exc, request_id)
        if isinstance(exc, Refusal):
            log.warning(
                "gRPC call %s to %s from %s refused with %s: %s", request_id, rpc, context.peer(), code.name, exc
            )
            if self.extras is not None:
                self.extras.grpc_refused(exc.reason)
        await context.abort(code, details)

    async def check_key(self, context: Context, rpc: str) -> None:
        """``--api-key``: every RPC but the health probes needs ``authorization: Bearer <key>`` in its metadata."""
        if self.expected_key is None or rpc in OPEN_RPCS:
            return
        given = b""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                given = value.encode("utf-8") if isinstance(value, str) else value
                break
        if hmac.compare_digest(given[:7].lower() + given[7:], self.expected_key):
            return
        reason = "no authorization metadata" if not given else "the key is wrong or not a Bearer token"
        request_id = request_id_of_call(context)
        context.set_trailing_metadata(((REQUEST_ID, request_id),))
        log.warning("gRPC call %s to %s refused with UNAUTHENTICATED: %s", request_id, rpc, reason)
        message = (
            f"Unauthorized: this server requires 'authorization: Bearer <key>' metadata (--api-key); {reason}."
            if not given
            else f"Unauthorized: {reason}; expected 'authorization: Bearer <key>' with the server's --api-key."
        )
        code, details = self.wire.render(Unauthorized(message), request_id)
        await context.abort(code, details)
