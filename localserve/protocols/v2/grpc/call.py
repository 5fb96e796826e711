"""One gRPC call as the engine and the records see it: its ``Client``, its request id, its deadline's error."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from localserve.engine.ports import Headers
from localserve.errors import LocalServeError
from localserve.protocols.http import request_id_of

Context = grpc.aio.ServicerContext[Any, Any]
REQUEST_ID = "x-request-id"  # the metadata key of a call's request id (kept when given, else made)


class ClientDeadline(LocalServeError):
    """The client's own gRPC deadline passed before the answer (504, DEADLINE_EXCEEDED)."""

    status_code = 504

    def __init__(self, api: str, seconds: float) -> None:
        super().__init__(
            f"api {api!r} did not answer within the client's deadline ({seconds:.3g} s were left when the call came "
            "in); work not yet started was dropped.",
        )


class GrpcClient:
    """The engine's ``Client`` over gRPC: the call ends (cancelled by the client, or past its deadline)."""

    __slots__ = ("context",)

    def __init__(self, context: Context) -> None:
        self.context = context

    async def left(self) -> None:
        """Return once the call has ended without our answer (it is listened to only while the request waits)."""
        gone: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def ended(_: object) -> None:
            gone.get_loop().call_soon_threadsafe(_settle, gone)

        self.context.add_done_callback(ended)  # type: ignore[arg-type]  # the stubs want a class, not a Protocol
        if not self.context.done():
            await gone

    async def stream_start(self, status: int, headers: Headers) -> None:
        """Never called: V2 answers are whole messages."""
        raise RuntimeError("gRPC answers of the Open Inference Protocol are never streamed")

    async def stream_chunk(self, data: bytes, more: bool) -> None:
        """Never called: V2 answers are whole messages."""
        raise RuntimeError("gRPC answers of the Open Inference Protocol are never streamed")


def _settle(gone: asyncio.Future[None]) -> None:
    if not gone.done():
        gone.set_result(None)


def request_id_of_call(context: Context) -> str:
    """The caller's ``x-request-id`` metadata, or a new id: the same rule as HTTP's header (``request_id_of``)."""
    for key, value in context.invocation_metadata() or ():
        if key == REQUEST_ID:
            raw = value.encode("utf-8") if isinstance(value, str) else value
            return request_id_of({"headers": [(REQUEST_ID.encode(), raw)]})
    return request_id_of({"headers": ()})
