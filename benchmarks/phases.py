"""Where a request's time goes inside localserve, read from its own /metrics, beside the client's view.

    python benchmarks/phases.py                       # GPU: ResNet-50, starlette, localserve, localserve-batched, c=1
    python benchmarks/phases.py --device cpu --model tinynet --servers localserve --duration 1

Starts each image server of images.py in turn, warms it for a second, reads ``/metrics``, loads it
for ``--duration`` seconds at ``--concurrency`` with the Python load generator, reads ``/metrics``
again, and prints one line per server: req/s and the client's p50, then, for localserve's servers,
the mean of the request's duration as the server saw it and of its four phases over that window
(``localserve_request_phase_seconds``: queue, prepare, model, finish). The peers have no phases.
Never asserts a time.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import urllib.request
from pathlib import Path

from image_models import IMAGE_BUILDERS, build_image_model
from image_servers import image_servers
from loadgen import run_python
from measure import csv
from procs import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = re.compile(r"^localserve_request_(duration|phase)_seconds_(sum|count)\{([^}]*)\} (\S+)$", re.M)
PHASES = ("queue", "prepare", "model", "finish")


def scrape(port: int) -> dict[tuple[str, str], float]:
    """{(phase or "duration", "sum" | "count"): value}, added up over the APIs (there is one)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    totals: dict[tuple[str, str], float] = {}
    for kind, stat, labels, value in SAMPLE.findall(text):
        phase = re.search(r'phase="(\w+)"', labels)
        key = (phase.group(1) if kind == "phase" and phase else "duration", stat)
        totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def means_us(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float]) -> dict[str, float]:
    """Mean microseconds per request of the duration and each phase, over what happened between the reads."""
    out = {}
    for name in ("duration", *PHASES):
        count = after.get((name, "count"), 0.0) - before.get((name, "count"), 0.0)
        if count:
            out[name] = (after[(name, "sum")] - before.get((name, "sum"), 0.0)) / count * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--model", choices=["auto", *IMAGE_BUILDERS], default="auto")
    parser.add_argument("--servers", type=csv, default=["starlette", "localserve", "localserve-batched"])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--replicas", type=int, help="--replicas of localserve-batched (default 4 on cuda, 2 on cpu)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    specs = image_servers(args.device, args.replicas or (4 if cuda else 2), 8 if cuda else 2)
    unknown = [name for name in args.servers if name not in specs]
    if unknown:
        parser.error(f"unknown server(s) {', '.join(unknown)}; expected some of {', '.join(specs)}")
    with tempfile.TemporaryDirectory(prefix="localserve-phases-") as tmp:
        workdir = Path(tmp)
        model = build_image_model(args.model, workdir)
        print(f"{model.name} on {args.device}, c={args.concurrency}, {args.duration:g} s; means in us", flush=True)
        for name in args.servers:
            port = free_port()
            launch = specs[name].launch(model, port, workdir, ROOT)
            server = ServerProcess(launch.cmd, port, workdir / f"{name}.log", env=launch.env, cwd=launch.cwd)
            body, content_type = launch.body or model.body, launch.content_type or model.content_type
            server.start()
            try:
                server.wait_ready(launch.path, body, 120.0, content_type)
                run_python(port, launch.path, body, args.concurrency, 1.0, content_type)  # warm-up
                ours = name.startswith("localserve")
                before = scrape(port) if ours else {}
                result = run_python(port, launch.path, body, args.concurrency, args.duration, content_type)
                means = means_us(before, scrape(port)) if ours else {}
            except RuntimeError as exc:
                print(f"{name:<22}failed: {exc}", flush=True)
                continue
            finally:
                server.stop()
            line = f"{name:<22}{result.rps:8,.0f} req/s  client p50 {result.p50_ms * 1000:7,.0f}"
            if result.non2xx or result.errors:
                line += f"  ({result.non2xx} non-2xx, {result.errors} errors)"
            line += "".join(f"  {key} {value:,.0f}" for key, value in means.items())
            print(line, flush=True)


if __name__ == "__main__":
    main()
