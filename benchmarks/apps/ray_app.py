"""Ray Serve 2.x serving an ONNX model with onnxruntime, with or without ``@serve.batch``.

    python benchmarks/apps/ray_app.py --model mlp.onnx --port 8000 [--batched]

One local Ray instance with the machine's CPUs, one replica, the HTTP proxy on ``--port``, as Ray's
docs start a deployment; the request body is ``{"input": [...]}``, the answer ``{"output": [...]}``.
"""

from __future__ import annotations

import argparse
import os
import signal

import numpy as np
import ray
from ray import serve
from starlette.requests import Request


def deployment(model_path: str, batched: bool):  # type: ignore[no-untyped-def]
    @serve.deployment(num_replicas=1)
    class Onnx:
        def __init__(self) -> None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.intra_op_num_threads = os.cpu_count() or 1
            self.session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
            self.input_name = self.session.get_inputs()[0].name

        async def __call__(self, request: Request) -> dict:
            sample = np.asarray((await request.json())["input"], dtype=np.float32)
            if batched:
                output = await self.run_batch(sample)
            else:
                output = self.session.run(None, {self.input_name: sample[None, :]})[0][0]
            return {"output": output.tolist()}

        @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.002)
        async def run_batch(self, samples: list[np.ndarray]) -> list[np.ndarray]:
            return list(self.session.run(None, {self.input_name: np.stack(samples)})[0])

    return Onnx


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--batched", action="store_true")
    args = parser.parse_args()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": args.port})
    serve.run(deployment(args.model, args.batched).bind(), route_prefix="/predict")
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})  # after Ray's processes started
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
