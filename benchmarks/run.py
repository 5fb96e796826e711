"""Benchmark localserve against a minimal Starlette app and LitServe on two ONNX models.

    python benchmarks/run.py [--duration 5] [--only iris,mlp] [--concurrency 1,8,64] [--out results.json]

Prints one table per model; never asserts a time. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from pathlib import Path

import peers  # noqa: F401  (registers MLServer, BentoML, Ray Serve and localserve's V2 route in SERVERS)
from measure import add_common_args, check_common_args, csv, log, measure_rounds
from onnx_models import BUILDERS, build_models
from raw import run_raw
from report import format_report
from servers import SERVERS, baseline

DEFAULT_SERVERS = ["raw", "starlette", "litserve", "litserve-batched", "localserve", "localserve-batched"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, duration=5.0, concurrency="1,8,64")
    parser.add_argument("--only", type=csv, default=list(BUILDERS), help="models: iris,mlp")
    parser.add_argument(
        "--servers",
        type=csv,
        default=DEFAULT_SERVERS,
        help=f"of raw,{','.join(SERVERS)}, or all (default: {','.join(DEFAULT_SERVERS)})",
    )
    parser.add_argument(
        "--baseline-path",
        type=Path,
        help="another checkout (a worktree at the commit before a change): each localserve row is measured from it "
        "too, as <name>@base, alternated with this one's, and the report gives the ratios",
    )
    args = parser.parse_args(argv)
    check_common_args(parser, args)
    if args.servers == ["all"]:
        args.servers = ["raw", *SERVERS]
    for name in args.only:
        if name not in BUILDERS:
            parser.error(f"unknown model {name!r}; expected one of {', '.join(BUILDERS)}")
    for name in args.servers:
        if name != "raw" and name not in SERVERS:
            parser.error(f"unknown server {name!r}; expected raw or one of {', '.join(SERVERS)}")
    return args


def run(args: argparse.Namespace) -> dict:
    results: dict = {
        "meta": {
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "concurrency": args.concurrency,
            "loadgen": args.loadgen,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "localserve_path": str(args.localserve_path),
            "localserve_args": args.localserve_args,
            "baseline_path": None if args.baseline_path is None else str(args.baseline_path),
            "rounds": args.rounds,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "loadavg_start": os.getloadavg(),
        },
        "models": {},
    }
    with tempfile.TemporaryDirectory(prefix="localserve-bench-") as tmp:
        workdir = Path(tmp)
        models = build_models(args.only, workdir)
        for model in models.values():
            result: dict = {"servers": {}}
            results["models"][model.name] = result
            if "raw" in args.servers:
                log(f"{model.name}/raw: session.run at batch 1 and 32")
                try:
                    result["raw"] = run_raw(model.path, model.input_shape, args.duration / 2)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    result["raw_error"] = str(exc)
            specs = []
            for name in args.servers:
                if name != "raw":
                    specs.append(SERVERS[name])
                    if args.baseline_path is not None and name.startswith("localserve"):
                        specs.append(baseline(SERVERS[name], args.baseline_path.resolve()))
            result["servers"] = measure_rounds(args, specs, model, workdir, args.rounds)
    results["meta"]["loadavg_end"] = os.getloadavg()
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    print(format_report(results), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
