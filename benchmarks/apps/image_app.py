"""The image baseline: a minimal Starlette app that decodes the JPEG and runs the session inline on the loop.

Written as a plain user would. Run by uvicorn as a factory, so that ``--workers N`` works; the
model and device come from the environment the launcher gives the process:

    IMAGE_MODEL=resnet50.onnx IMAGE_DEVICE=cuda python -m uvicorn image_app:create_app --factory \\
        --app-dir benchmarks/apps --port 8000 [--workers 4]
"""

from __future__ import annotations

import os

from image_handler import preprocess, top5
from ort_session import open_session
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def create_app() -> Starlette:
    threads = max(1, (os.cpu_count() or 1) // int(os.environ.get("IMAGE_WORKERS", "1")))
    session = open_session(os.environ["IMAGE_MODEL"], os.environ.get("IMAGE_DEVICE", "cpu"), threads)
    input_name = session.get_inputs()[0].name

    async def predict(request: Request) -> JSONResponse:
        x = preprocess(await request.body())
        logits = session.run(None, {input_name: x})[0][0]
        return JSONResponse({"top5": top5(logits)})

    return Starlette(routes=[Route("/predict", predict, methods=["POST"])])
