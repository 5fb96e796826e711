"""The image workload's user code: JPEG bytes in, the top 5 ImageNet classes out.

localserve serves it as a Cortex ``request_handler`` (copied into the project as handler.py);
the peer apps and raw.py import ``preprocess`` and ``top5`` from it, so every server does the
same work. Pillow's decoder and resize and numpy's arithmetic release the GIL, so several threads
can run it at once.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image

SIZE = 224
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1) * 255
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1) * 255


def preprocess(data: bytes) -> np.ndarray:
    """JPEG bytes -> float32 [1, 3, 224, 224], normalised with ImageNet's mean and std."""
    image = Image.open(io.BytesIO(data)).convert("RGB").resize((SIZE, SIZE))
    chw = np.asarray(image).transpose(2, 0, 1).astype(np.float32, order="C")
    return ((chw - MEAN) / STD)[None]


def top5(logits: np.ndarray) -> list[int]:
    return [int(i) for i in np.argsort(logits)[-5:][::-1]]


def pre_inference(sample: bytes, signature: Any, metadata: Any) -> dict[str, np.ndarray]:
    return {signature[0].name: preprocess(sample)}


def post_inference(prediction: list[np.ndarray], signature: Any, metadata: Any) -> dict[str, list[int]]:
    return {"top5": top5(prediction[0][0])}
