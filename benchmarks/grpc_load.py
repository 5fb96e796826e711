"""A gRPC load generator for ModelInfer: ``concurrency`` calls in flight for ``duration`` seconds, in its own process.

The message is serialized once (raw contents, as tritonclient sends them) and sent as bytes on
``grpc.aio`` channels (one HTTP/2 connection per 16 calls in flight, as a client pool would), so
the generator spends nothing on protobuf per call. A status other than OK counts as non-2xx.
Prints one JSON line with the latencies, as ``loadgen.py``'s python generator does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from loadgen import LoadResult, summarize

METHOD = "/inference.GRPCInferenceService/ModelInfer"
CALLS_PER_CHANNEL = 16


def model_infer_message(model: str, input_name: str, features: list[float]) -> bytes:
    """A serialized ModelInferRequest of one FP32 row, its values in raw_input_contents."""
    import struct

    from localserve.protocols.v2.grpc import inference_pb2 as pb

    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name=input_name, datatype="FP32", shape=[1, len(features)])
    request.raw_input_contents.append(struct.pack(f"<{len(features)}f", *features))
    return request.SerializeToString()


def run_grpc(port: int, message: bytes, concurrency: int, duration: float) -> LoadResult:
    """Load ``127.0.0.1:port`` with ``message`` from a generator process; its summary."""
    with tempfile.NamedTemporaryFile("wb", suffix=".msg", delete=False) as f:
        f.write(message)
    cmd = [sys.executable, __file__, "--port", str(port), "--message-file", f.name]
    cmd += ["--concurrency", str(concurrency), "--duration", str(duration)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60, check=False)
    finally:
        Path(f.name).unlink()
    if done.returncode != 0:
        raise RuntimeError(f"gRPC load generator failed (rc {done.returncode}): {done.stderr.strip()}")
    part = json.loads(done.stdout.strip().splitlines()[-1])
    return summarize(concurrency, part["latencies_ms"], part["duration_s"], part["non2xx"], part["errors"])


async def _generate(port: int, message: bytes, concurrency: int, duration: float) -> dict[str, object]:
    import grpc

    channels = [
        grpc.aio.insecure_channel(f"127.0.0.1:{port}") for _ in range(max(1, -(-concurrency // CALLS_PER_CHANNEL)))
    ]
    calls = [channel.unary_unary(METHOD) for channel in channels]
    latencies: list[float] = []
    counts = {"non2xx": 0, "errors": 0}
    start = time.perf_counter()
    deadline = start + duration

    async def caller(index: int) -> None:
        call = calls[index % len(calls)]
        while time.perf_counter() < deadline:
            began = time.perf_counter()
            try:
                await call(message)
            except grpc.aio.AioRpcError as exc:
                counts["errors" if exc.code() == grpc.StatusCode.UNAVAILABLE else "non2xx"] += 1
                continue
            latencies.append(time.perf_counter() - began)

    await asyncio.gather(*(caller(i) for i in range(concurrency)))
    elapsed = time.perf_counter() - start
    for channel in channels:
        await channel.close()
    return {"latencies_ms": [round(s * 1000, 3) for s in latencies], "duration_s": elapsed, **counts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--message-file", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    args = parser.parse_args()
    message = Path(args.message_file).read_bytes()
    print(json.dumps(asyncio.run(_generate(args.port, message, args.concurrency, args.duration))))


if __name__ == "__main__":
    main()
