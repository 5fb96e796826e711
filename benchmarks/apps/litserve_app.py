"""LitServe serving the same ONNX model, one inference worker on CPU, with or without batching.

python benchmarks/apps/litserve_app.py --model iris.onnx --port 8000 [--max-batch-size 16 --batch-timeout 0.005]
"""

from __future__ import annotations

import argparse
import os

import litserve as ls
import numpy as np


class OnnxLitAPI(ls.LitAPI):
    def __init__(self, model_path: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.model_path = model_path

    def setup(self, device: str) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = os.cpu_count() or 1
        self.session = ort.InferenceSession(self.model_path, options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name

    def decode_request(self, request: dict) -> np.ndarray:
        return np.asarray(request["input"], dtype=np.float32)

    def batch(self, inputs: list[np.ndarray]) -> np.ndarray:
        return np.stack(inputs)

    def predict(self, x: np.ndarray) -> np.ndarray:
        batch = x if x.ndim == 2 else x[None, :]
        out = self.session.run(None, {self.input_name: batch})[0]
        return out if x.ndim == 2 else out[0]

    def unbatch(self, output: np.ndarray) -> list[np.ndarray]:
        return list(output)

    def encode_response(self, output: np.ndarray) -> dict:
        return {"output": output.tolist()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-batch-size", type=int, default=1)
    parser.add_argument("--batch-timeout", type=float, default=0.0)
    args = parser.parse_args()
    api = OnnxLitAPI(args.model, max_batch_size=args.max_batch_size, batch_timeout=args.batch_timeout)
    server = ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=1)
    server.run(host="127.0.0.1", port=args.port, log_level="warning", num_api_servers=1, generate_client_file=False)


if __name__ == "__main__":
    main()
