"""The gRPC floor: a bare ``grpc.aio`` server on uvloop that answers every ModelInfer with a constant message.

No model, no engine, no parsing of the request: what the Python gRPC server itself costs a call,
the ceiling of any gRPC front door built on ``grpcio``'s asyncio server (as localserve's is). The
answer is the MLP's (one FP32 row of 10 in ``raw_output_contents``), made once.

    python benchmarks/apps/grpc_floor.py --port 8081
"""

from __future__ import annotations

import argparse
import struct
from typing import Any

import grpc
import uvloop

from localserve.protocols.v2.grpc import inference_pb2 as pb


def answer() -> bytes:
    response = pb.ModelInferResponse(model_name="mlp", model_version="1")
    response.outputs.add(name="output", datatype="FP32", shape=[1, 10])
    response.raw_output_contents.append(struct.pack("<10f", *([0.0] * 10)))
    return response.SerializeToString()


async def serve(port: int) -> None:
    reply = answer()

    async def model_infer(request: bytes, context: Any) -> bytes:
        return reply

    handler = grpc.method_handlers_generic_handler(
        "inference.GRPCInferenceService", {"ModelInfer": grpc.unary_unary_rpc_method_handler(model_infer)}
    )
    server = grpc.aio.server(options=[("grpc.max_concurrent_streams", 1024)])
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvloop.run(serve(args.port))


if __name__ == "__main__":
    main()
