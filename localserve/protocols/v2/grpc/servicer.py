"""The RPCs of ``inference.GRPCInferenceService``: a front door onto the same engine as the REST routes.

``ModelInfer`` is one ``Engine.submit`` of a ``GrpcExchange``, as ``V2Routes.infer`` is over REST.
The message arrives as bytes, read by ``guard.Guard`` once the API key and the connection's limits
passed (grpc's own limit, ``--max-body-size``, refused a larger one before this code ran); only the
model's name is read on the event loop (``head.peek_model``). The whole message is parsed, checked
and decoded on the API's threads (``_Infer.prepare``), so gRPC, REST and native requests share the
API's queue and batches; the outputs are encoded there too (``_Infer.finish``). The client's
deadline is the engine's (work not started is dropped, as at the API's own timeout) and a call the
client cancels is dropped the same way. Errors are rendered by the door's ``status.GrpcWire``, with REST's
words.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import grpc
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from localserve import __version__
from localserve.engine.core import Engine
from localserve.errors import LocalServeError, NotFound, NotReady, RequestError, ShuttingDown
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.protocols.v2.grpc import inference_pb2 as pb
from localserve.protocols.v2.grpc.call import (
    INFER_PATH,
    REQUEST_ID,
    Context,
    GrpcExchange,
    request_id_of_call,
)
from localserve.protocols.v2.grpc.head import peek_model
from localserve.protocols.v2.grpc.outputs import encode_response
from localserve.protocols.v2.grpc.status import GrpcWire, details
from localserve.protocols.v2.grpc.tensors import Decoded, decode_request
from localserve.protocols.v2.models import V2Models
from localserve.protocols.v2.multi import routed
from localserve.protocols.v2.stats import every_model_stats, model_stats
from localserve.protocols.v2.view import VERSION, V2Model

log = logging.getLogger("localserve")


class Unparsable:
    """A request message that did not parse: its handler answers INVALID_ARGUMENT with ``reason``."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Servicer:
    """Every RPC of the service, onto one replica's engine."""

    def __init__(self, engine: Engine, wire: GrpcWire) -> None:
        self.engine = engine
        self.models = V2Models(engine.apis)
        self.wire = wire
        self.stopping = False  # a stop was asked for: new ModelInfer calls are UNAVAILABLE, ServerReady false

    def methods(self) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
        """The service's method handlers, by the protocol's names of its RPCs (``SERVICE``'s)."""

        def unary(
            fn: Callable[[Any, Context], Awaitable[Any]], request: type[Message]
        ) -> grpc.RpcMethodHandler[Any, Any]:
            def parse(data: bytes) -> Any:  # grpc's own answer to a message that fails to parse is UNKNOWN
                try:
                    return request.FromString(data)
                except DecodeError as exc:
                    return Unparsable(f"The {request.__name__} message could not be parsed: {exc}.")

            async def call(message: Any, context: Context) -> Any:
                if isinstance(message, Unparsable):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details(message.reason))
                return await fn(message, context)

            return grpc.unary_unary_rpc_method_handler(call, request_deserializer=parse, response_serializer=_serialize)

        methods = {
            "ServerLive": unary(self.server_live, pb.ServerLiveRequest),
            "ServerReady": unary(self.server_ready, pb.ServerReadyRequest),
            "ModelReady": unary(self.model_ready, pb.ModelReadyRequest),
            "ServerMetadata": unary(self.server_metadata, pb.ServerMetadataRequest),
            "ModelMetadata": unary(self.model_metadata, pb.ModelMetadataRequest),
            "ModelConfig": unary(self.model_config, pb.ModelConfigRequest),
            "ModelStatistics": unary(self.model_statistics, pb.ModelStatisticsRequest),
            "RepositoryIndex": unary(self.repository_index, pb.RepositoryIndexRequest),
            # bytes in and out: parsed and serialized on the API's threads, not on the event loop
            "ModelInfer": grpc.unary_unary_rpc_method_handler(self.model_infer),
        }
        return methods

    # -- health and metadata ----------------------------------------------------------------------
    async def server_live(self, request: pb.ServerLiveRequest, context: Context) -> pb.ServerLiveResponse:
        """Live while the process answers."""
        return pb.ServerLiveResponse(live=True)

    async def server_ready(self, request: pb.ServerReadyRequest, context: Context) -> pb.ServerReadyResponse:
        """Ready once every API is loaded (as /readyz), until a stop is asked for."""
        return pb.ServerReadyResponse(ready=self.engine.ready and not self.stopping)

    async def model_ready(self, request: pb.ModelReadyRequest, context: Context) -> pb.ModelReadyResponse:
        """Ready once the model is loaded; NOT_FOUND for no such model (or version)."""
        try:
            await self.models.locate(request.name, request.version or None)
        except NotReady:
            return pb.ModelReadyResponse(ready=False)
        except LocalServeError as exc:
            await self._abort(context, exc)
        return pb.ModelReadyResponse(ready=True)

    async def server_metadata(self, request: pb.ServerMetadataRequest, context: Context) -> pb.ServerMetadataResponse:
        """The server's name, version and extensions (those of the gRPC protocol: no binary_tensor_data)."""
        extensions = ["model_configuration"] + (["statistics"] if self.engine.metrics is not None else [])
        return pb.ServerMetadataResponse(name="localserve", version=__version__, extensions=extensions)

    async def model_metadata(self, request: pb.ModelMetadataRequest, context: Context) -> pb.ModelMetadataResponse:
        """A model's metadata, as GET /v2/models/{m} gives it."""
        model = await self._model(context, "ModelMetadata", request.name, request.version)
        return json_format.ParseDict(model.metadata(), pb.ModelMetadataResponse())

    async def model_config(self, request: pb.ModelConfigRequest, context: Context) -> pb.ModelConfigResponse:
        """Triton's model configuration, as GET /v2/models/{m}/config gives it."""
        model = await self._model(context, "ModelConfig", request.name, request.version)
        return pb.ModelConfigResponse(config=json_format.ParseDict(model.config(), pb.ModelConfig()))

    async def model_statistics(
        self, request: pb.ModelStatisticsRequest, context: Context
    ) -> pb.ModelStatisticsResponse:
        """Triton's statistics of one model, or of every model when no name is given."""
        try:
            model = self.models.find(request.name, request.version or None)[1] if request.name else None
            metrics = self.engine.metrics
            if metrics is None:
                raise NotFound("Statistics come from the server's metrics, which are off (--no-metrics).")
            models = self.models
            if model is None:
                entries = every_model_stats(metrics, [(name, models.where(name)) for name in models.names()])
            else:
                version = model.shown_version(request.version)
                entries = [model_stats(metrics, model.name, version, models.where(model.name))]
        except LocalServeError as exc:
            await self._abort(context, exc)
        return json_format.ParseDict({"model_stats": entries}, pb.ModelStatisticsResponse())

    async def repository_index(
        self, request: pb.RepositoryIndexRequest, context: Context
    ) -> pb.RepositoryIndexResponse:
        """Triton's repository index, as POST /v2/repository/index gives it (``ready``: the ready models only)."""
        entries = await asyncio.to_thread(self.models.index)  # a remote model's versions may need its copy
        if request.ready:
            entries = [entry for entry in entries if entry["state"] == "READY"]
        return pb.RepositoryIndexResponse(models=[pb.RepositoryIndexResponse.ModelIndex(**e) for e in entries])

    async def _model(self, context: Context, rpc: str, name: str, version: str) -> V2Model:
        try:
            return (await self.models.locate(name, version or None))[1]
        except LocalServeError as exc:
            await self._abort(context, exc)

    # -- inference --------------------------------------------------------------------------------
    async def model_infer(self, data: bytes, context: Context) -> bytes:
        """Answer one inference request: one call into the engine, as over REST."""
        start = time.perf_counter()
        request_id = request_id_of_call(context)
        context.set_trailing_metadata(((REQUEST_ID, request_id),))  # as HTTP echoes X-Request-ID, errors too
        try:
            name, version = peek_model(data)
            rt = self.models.api_of(name)
            if rt is None:
                raise self.models.no_model(name)
        except LocalServeError as exc:  # no API to count it under: its access line alone
            self.engine.unrouted("POST", INFER_PATH, exc.status_code, time.perf_counter() - start, request_id)
            await self._abort(context, exc, request_id)
        receive = functools.partial(self._receive, name, version, data, request_id)
        call = GrpcExchange(context, request_id, receive, (name, version))
        reply = await self.engine.submit(rt, call)
        if call.failure is not None:
            await self._abort(context, call.failure, request_id, api=name)
        return reply.body

    async def _receive(self, name: str, version: str, data: bytes, request_id: str) -> tuple[Request, _Infer]:
        if self.stopping:
            raise ShuttingDown()
        _, model = await self.models.locate(name, version or None)
        return Request("POST", [], data, request_id=request_id, path=INFER_PATH), _Infer(model, name, version)

    # -- errors ---------------------------------------------------------------------------------
    async def _abort(
        self, context: Context, exc: LocalServeError, request_id: str = "", api: str | None = None
    ) -> NoReturn:
        code, details = self.wire.render(exc, request_id or request_id_of_call(context), api)
        await context.abort(code, details)


class _Infer:
    """One ModelInfer call's own stages, run on the API's threads: parse and decode the message, encode the outputs."""

    __slots__ = ("decoded", "model", "name", "ran", "rows", "version")

    def __init__(self, model: V2Model, name: str, version: str) -> None:
        self.model = model
        self.name = name
        self.version = version
        self.decoded: Decoded | None = None
        self.rows = 1  # its inferences, once decoded (Stages.rows)
        self.ran: tuple[str, str] | None = None  # a multi-model API's model version that runs it (Stages.ran)

    def prepare(self, request: Request) -> Any:
        try:
            message = pb.ModelInferRequest.FromString(request.body)
        except DecodeError as exc:
            raise RequestError(f"The ModelInferRequest is not a valid protobuf message: {exc}.") from None
        if (message.model_name, message.model_version) != (self.name, self.version):
            raise RequestError(
                f"The ModelInferRequest names model {message.model_name!r} version {message.model_version!r} in fields "
                "that do not come first; put model_name and model_version first, once, as protobuf serializers do."
            )
        model = self.model
        self.decoded = decode_request(message, model.inputs, model.outputs, keep_bytes=model.keep_bytes)
        feed, self.rows, self.ran = routed(model, self.decoded.feed)
        return feed

    def finish(self, request: Request, output: Any) -> Reply:
        decoded = self.decoded
        assert decoded is not None
        model = self.model
        values = output if isinstance(output, dict) else dict(zip(model.output_order, output, strict=False))
        chosen = [(name, values[name]) for name in decoded.outputs]
        response = encode_response(
            model.name, decoded.id, chosen, raw=decoded.raw, version=VERSION if self.ran is None else self.ran[1]
        )
        return Reply(status=200, body=response.SerializeToString())


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
