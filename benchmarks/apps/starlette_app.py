"""The baseline: a minimal Starlette app that runs the ONNX session inline on the event loop.

Written as a plain user would: parse JSON, call session.run, return JSON. With --no-model it
skips the model call and answers a constant, which measures the HTTP + JSON floor. With --thread
the same work (parse, session.run, encode) runs on one worker thread instead, one hop there and
one back per request, as DESIGN.md keeps user code off the event loop: what the structure costs,
with none of localserve's own work.

    python benchmarks/apps/starlette_app.py --model iris.onnx --port 8000 [--no-model | --thread]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import threading
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def create_app(model_path: str, no_model: bool, thread: bool = False) -> Starlette:
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

    if not thread:
        return Starlette(routes=[Route("/predict", predict, methods=["POST"])])

    def answer(body: bytes) -> bytes:  # JSONResponse's encoding, on the worker thread
        x = np.asarray([json.loads(body)["input"]], dtype=np.float32)
        output = session.run(None, {input_name: x})[0][0].tolist()
        return json.dumps({"output": output}, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()

    jobs: queue.SimpleQueue[tuple[bytes, asyncio.Future[bytes], asyncio.AbstractEventLoop]] = queue.SimpleQueue()

    def work() -> None:
        while True:
            body, future, loop = jobs.get()
            settle: Callable[..., None]
            try:
                result, settle = answer(body), future.set_result
            except Exception as exc:
                result, settle = exc, future.set_exception
            loop.call_soon_threadsafe(_unless_done, future, settle, result)

    threading.Thread(target=work, name="worker", daemon=True).start()

    async def predict_on_thread(request: Request) -> Response:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes] = loop.create_future()
        jobs.put((await request.body(), future, loop))
        return Response(await future, media_type="application/json")

    return Starlette(routes=[Route("/predict", predict_on_thread, methods=["POST"])])


def _unless_done(future: asyncio.Future[bytes], settle: Callable[..., None], result: object) -> None:
    if not future.done():
        settle(result)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--thread", action="store_true", help="run the model (and the JSON) on one worker thread")
    args = parser.parse_args()
    app = create_app(args.model, args.no_model, args.thread)
    uvicorn.run(
        app, host="127.0.0.1", port=args.port, loop="uvloop", http="httptools", log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
