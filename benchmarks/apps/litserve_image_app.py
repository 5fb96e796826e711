"""LitServe on the image workload, batched: the JPEG comes base64 in JSON (LitServe parses JSON or forms only).

python benchmarks/apps/litserve_image_app.py --model resnet50.onnx --device cuda --port 8000 \\
    [--max-batch-size 32 --batch-timeout 0.005 --workers 4]
"""

from __future__ import annotations

import argparse
import base64

import litserve as ls
import numpy as np
from image_handler import preprocess, top5
from ort_session import PROVIDERS, open_session


class ImageLitAPI(ls.LitAPI):
    def __init__(self, model_path: str, device: str, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.model_path = model_path
        self.onnx_device = device

    def setup(self, device: str) -> None:
        self.session = open_session(self.model_path, self.onnx_device)
        self.input_name = self.session.get_inputs()[0].name

    def decode_request(self, request: dict) -> np.ndarray:
        return preprocess(base64.b64decode(request["image"]))[0]

    def batch(self, inputs: list[np.ndarray]) -> np.ndarray:
        return np.stack(inputs)

    def predict(self, x: np.ndarray) -> np.ndarray:
        batch = x if x.ndim == 4 else x[None]
        out = self.session.run(None, {self.input_name: batch})[0]
        return out if x.ndim == 4 else out[0]

    def unbatch(self, output: np.ndarray) -> list[np.ndarray]:
        return list(output)

    def encode_response(self, logits: np.ndarray) -> dict:
        return {"top5": top5(logits)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", choices=list(PROVIDERS), default="cpu")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--batch-timeout", type=float, default=0.005)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    api = ImageLitAPI(args.model, args.device, max_batch_size=args.max_batch_size, batch_timeout=args.batch_timeout)
    # accelerator="cpu": the session picks the GPU itself; LitServe only runs the worker processes
    server = ls.LitServer(api, accelerator="cpu", devices=1, workers_per_device=args.workers)
    server.run(host="127.0.0.1", port=args.port, log_level="warning", num_api_servers=1, generate_client_file=False)


if __name__ == "__main__":
    main()
