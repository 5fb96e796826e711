"""The baseline: a minimal Starlette app that runs the ONNX session inline on the event loop.

Written as a plain user would: parse JSON, call session.run, return JSON. With --no-model it
skips the model call and answers a constant, which measures the HTTP + JSON floor.

    python benchmarks/apps/starlette_app.py --model iris.onnx --port 8000
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import onnxruntime as ort
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def create_app(model_path: str, no_model: bool) -> Starlette:
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    n_out = session.get_outputs()[0].shape[-1]

    async def predict(request: Request) -> JSONResponse:
        body = await request.json()
        if no_model:
            return JSONResponse({"output": [0.0] * n_out})
        x = np.asarray([body["input"]], dtype=np.float32)
        outputs = session.run(None, {input_name: x})
        return JSONResponse({"output": outputs[0][0].tolist()})

    return Starlette(routes=[Route("/predict", predict, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-model", action="store_true")
    args = parser.parse_args()
    app = create_app(args.model, args.no_model)
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools", log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
