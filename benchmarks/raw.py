"""The limit: session.run in-process, no HTTP. Prints one JSON line.

python benchmarks/raw.py --model mlp.onnx --shape 256 --duration 5 --batches 1,32
python benchmarks/raw.py --model resnet50.onnx --shape 3,224,224 --device cuda --jpeg cat.jpg

With --jpeg it also measures the image handler's preprocess (decode, resize, normalise) on one thread.
run_raw() starts this script as its own process and returns what it printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "apps"))
from ort_session import PROVIDERS, open_session  # noqa: E402


def run_raw(
    model: Path, shape: tuple[int, ...], duration: float, device: str = "cpu", jpeg: Path | None = None
) -> list[dict]:
    cmd = [sys.executable, __file__, "--model", str(model), "--shape", ",".join(map(str, shape))]
    cmd += ["--duration", str(duration), "--device", device]
    if jpeg is not None:
        cmd += ["--jpeg", str(jpeg)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 4 + 180)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def repeat(call: Callable[[], object], duration: float, warmup: int = 20) -> tuple[int, float]:
    """(calls, seconds) of calling ``call`` for about ``duration`` seconds after ``warmup`` calls."""
    for _ in range(warmup):
        call()
    calls = 0
    start = time.perf_counter()
    deadline = start + duration
    while True:
        for _ in range(10):
            call()
        calls += 10
        now = time.perf_counter()
        if now >= deadline:
            return calls, now - start


def measure(session: object, input_name: str, x: np.ndarray, duration: float) -> dict:
    feed = {input_name: x}
    calls, elapsed = repeat(lambda: session.run(None, feed), duration)  # type: ignore[attr-defined]
    return {
        "batch": int(x.shape[0]),
        "calls_per_s": calls / elapsed,
        "rows_per_s": calls * x.shape[0] / elapsed,
        "us_per_call": elapsed / calls * 1e6,
    }


def measure_preprocess(jpeg: Path, duration: float) -> dict:
    from image_handler import preprocess

    body = jpeg.read_bytes()
    calls, elapsed = repeat(lambda: preprocess(body), duration, warmup=5)
    return {"preprocess": "one thread", "calls_per_s": calls / elapsed, "us_per_call": elapsed / calls * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--shape", required=True, help="one sample's shape, e.g. 4 or 3,224,224")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--device", choices=list(PROVIDERS), default="cpu")
    parser.add_argument("--jpeg", type=Path, help="also time the image handler's preprocess on this file")
    args = parser.parse_args()
    shape = tuple(int(d) for d in args.shape.split(","))
    session = open_session(args.model, args.device, os.cpu_count() or 1)
    input_name = session.get_inputs()[0].name
    rng = np.random.default_rng(0)
    results = []
    for batch in (int(b) for b in args.batches.split(",")):
        x = rng.standard_normal((batch, *shape)).astype(np.float32)
        results.append(measure(session, input_name, x, args.duration))
    if args.jpeg:
        results.append(measure_preprocess(args.jpeg, args.duration))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
