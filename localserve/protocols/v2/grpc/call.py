"""One gRPC call as the engine sees it: its ``Exchange``, its ``Client``, its request id."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from localserve.engine.ports import Headers, Stages
from localserve.errors import LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.protocols.http import new_request_id, request_id_of
from localserve.protocols.v2.grpc.status import CODES, code_of
from localserve.tracing import Traced, carrier_of

Context = grpc.aio.ServicerContext[Any, Any]
REQUEST_ID = "x-request-id"  # the metadata key of a call's request id (kept when given, else made)


SERVICE = "inference.GRPCInferenceService"  # the protocol's name for it (KServe, Triton): what clients call
INFER_PATH = f"/{SERVICE}/ModelInfer"  # the HTTP/2 path of a ModelInfer call: its access log line and figures


class GrpcExchange:
    """One ModelInfer call as the engine's ``Exchange``: the message already read by grpc, the client's deadline
    the engine's, the answer's bytes left in the Reply for the RPC to return, an error kept for it to abort with
    (after the engine has recorded the call, so that a client reading the status finds it counted)."""

    __slots__ = ("_receive", "client", "context", "failure", "model", "request_id")

    method = "POST"
    path = INFER_PATH
    writer = None
    tracked = False  # V2 feeds the model directly: no prediction for the tracker

    def __init__(
        self,
        context: Context,
        request_id: str,
        receive: Callable[[], Awaitable[tuple[Request, Stages]]],
        model: tuple[str, str] = ("", ""),
    ) -> None:
        self.context = context
        self.model = model  # the name and version the call names
        self.request_id = request_id
        self._receive = receive
        self.client = GrpcClient(context)
        self.failure: LocalServeError | None = None

    @property
    def deadline(self) -> float | None:
        """The seconds left before the client's deadline, as the engine queues the call."""
        return self.context.time_remaining()

    async def receive(self) -> tuple[Request, Stages]:
        return await self._receive()

    async def send(self, reply: Reply) -> None:
        pass

    def render(self, error: LocalServeError) -> Reply:
        self.failure = error
        return Reply(status=error.status_code)

    def traced(self) -> Traced:
        attributes = {"rpc.system": "grpc", "rpc.service": SERVICE, "rpc.method": "ModelInfer"}
        attributes["localserve.model"], attributes["localserve.model.version"] = self.model
        carrier = carrier_of(self.context.invocation_metadata() or ())
        return Traced(carrier, f"{SERVICE}/ModelInfer", attributes, answered)


def answered(status: int, error: BaseException | None) -> dict[str, int]:
    """The gRPC status code of an answer, as its span's ``rpc.grpc.status_code`` (what ``render_status`` sends)."""
    if isinstance(error, LocalServeError):
        code = code_of(error)
    elif status < 400:
        code = grpc.StatusCode.OK
    else:
        code = CODES.get(status, grpc.StatusCode.INTERNAL if status >= 500 else grpc.StatusCode.INVALID_ARGUMENT)
    return {"rpc.grpc.status_code": code.value[0]}


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
    return new_request_id()
