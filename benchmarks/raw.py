"""The limit: session.run in-process, no HTTP. Prints one JSON line.

python benchmarks/raw.py --model mlp.onnx --inputs 256 --duration 5 --batches 1,32
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def measure(session: object, input_name: str, x: np.ndarray, duration: float) -> dict:
    feed = {input_name: x}
    for _ in range(20):
        session.run(None, feed)  # type: ignore[attr-defined]
    calls = 0
    start = time.perf_counter()
    deadline = start + duration
    while True:
        for _ in range(10):
            session.run(None, feed)  # type: ignore[attr-defined]
        calls += 10
        now = time.perf_counter()
        if now >= deadline:
            break
    elapsed = now - start
    return {
        "batch": int(x.shape[0]),
        "calls_per_s": calls / elapsed,
        "rows_per_s": calls * x.shape[0] / elapsed,
        "us_per_call": elapsed / calls * 1e6,
    }


def main() -> None:
    import onnxruntime as ort

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--inputs", type=int, required=True)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--batches", default="1,32")
    args = parser.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    rng = np.random.default_rng(0)
    results = []
    for batch in (int(b) for b in args.batches.split(",")):
        x = rng.standard_normal((batch, args.inputs)).astype(np.float32)
        results.append(measure(session, input_name, x, args.duration))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
