"""Image workloads: clients POST a JPEG, pre_inference decodes it, the model runs, post_inference returns the top 5.

    python benchmarks/images.py gpu            # CUDA machine: ResNet-50 (torch export), every server
    python benchmarks/images.py gpu --device cpu --duration 1 --concurrency 1,4    # the same plumbing on CPU
    python benchmarks/images.py pipeline       # CPU: localserve with threads_per_process 1 against 2

Prints one table; never asserts a time. See benchmarks/README.md ("Image workloads").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from image_models import IMAGE_BUILDERS, JPEG, build_image_model
from image_report import format_images
from image_servers import image_servers
from measure import add_common_args, check_common_args, csv, log, measure_rounds
from raw import PROVIDERS, run_raw


@dataclass(frozen=True)
class Workload:
    device: str
    model: str
    servers: tuple[str, ...]
    concurrency: str
    duration: float
    peers: tuple[str, ...]  # a column "x PEER" per peer: a row's req/s over the peer's at the same concurrency
    headlines: tuple[tuple[str, str], ...]  # (server, base): one line of req/s ratios per pair


WORKLOADS = {
    "gpu": Workload(
        device="cuda",
        model="auto",
        servers=("raw", "starlette", "starlette-workers", "litserve-batched", "localserve", "localserve-batched"),
        concurrency="1,16,64,128,256",
        duration=8.0,
        peers=("starlette", "localserve"),
        headlines=(("localserve-batched", "localserve"), ("localserve-batched", "starlette-workers")),
    ),
    "pipeline": Workload(
        device="cpu",
        model="tinynet",
        servers=("localserve-t1", "localserve-t2"),
        concurrency="8,32",
        duration=5.0,
        peers=("localserve-t1",),
        headlines=(("localserve-t2", "localserve-t1"),),
    ),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workload", choices=list(WORKLOADS))
    add_common_args(parser, duration=None, concurrency=None)
    parser.add_argument("--device", choices=list(PROVIDERS), help="default: cuda for gpu, cpu for pipeline")
    parser.add_argument(
        "--model",
        choices=["auto", *IMAGE_BUILDERS],
        help="default: auto for gpu (resnet50 where torch and torchvision are installed, else tinynet), "
        "tinynet for pipeline",
    )
    names = sorted({"raw", *image_servers("cpu", 1, 1)})
    parser.add_argument("--servers", type=csv, help=f"of {','.join(names)} (default: the workload's)")
    parser.add_argument("--replicas", type=int, help="--replicas of localserve-batched (default 4 on cuda, 2 on cpu)")
    parser.add_argument(
        "--workers", type=int, help="uvicorn workers of starlette-workers (default 8 on cuda, 2 on cpu)"
    )
    args = parser.parse_args(argv)
    workload = WORKLOADS[args.workload]
    args.device = args.device or workload.device
    args.model = args.model or workload.model
    args.servers = args.servers or list(workload.servers)
    args.duration = args.duration or workload.duration
    args.concurrency = args.concurrency or csv(workload.concurrency)
    cuda = args.device == "cuda"
    cpus = os.cpu_count() or 1
    args.replicas = args.replicas or (4 if cuda else 2)
    args.workers = args.workers or (8 if cuda else 2)
    # on a GPU machine the clients need several cores to keep 256 connections busy
    args.wrk_threads = args.wrk_threads or (max(1, min(4, cpus // 4)) if cuda else 1)
    args.loadgen_processes = args.loadgen_processes or (max(1, min(8, cpus // 2)) if cuda else 1)
    check_common_args(parser, args)
    for name in args.servers:
        if name not in names:
            parser.error(f"unknown server {name!r}; expected one of {', '.join(names)}")
    return args


def run(args: argparse.Namespace) -> dict:
    workload = WORKLOADS[args.workload]
    results: dict = {
        "meta": {
            "workload": args.workload,
            "device": args.device,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "concurrency": args.concurrency,
            "loadgen": args.loadgen,
            "wrk_threads": args.wrk_threads,
            "loadgen_processes": args.loadgen_processes,
            "replicas": args.replicas,
            "workers": args.workers,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "localserve_path": str(args.localserve_path),
            "localserve_args": args.localserve_args,
            "rounds": args.rounds,
            "peers": list(workload.peers),
            "headlines": [list(pair) for pair in workload.headlines],
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "loadavg_start": os.getloadavg(),
        },
    }
    with tempfile.TemporaryDirectory(prefix="localserve-images-") as tmp:
        workdir = Path(tmp)
        log(f"building the {args.model} model")
        model = build_image_model(args.model, workdir)
        results["meta"]["model"] = model.name
        if "raw" in args.servers:
            log(f"{model.name}/raw: session.run at batch 1 and 32 on {args.device}, preprocess on one thread")
            try:
                results["raw"] = run_raw(model.path, model.input_shape, args.duration / 2, args.device, JPEG)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                results["raw_error"] = str(exc)
        servers = image_servers(args.device, args.replicas, args.workers)
        specs = [servers[name] for name in args.servers if name != "raw"]
        results["servers"] = measure_rounds(args, specs, model, workdir, args.rounds)
        results["descriptions"] = {spec.name: spec.description for spec in specs}
    results["meta"]["loadavg_end"] = os.getloadavg()
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    print(format_images(results), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
