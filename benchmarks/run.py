"""Benchmark localserve against a minimal Starlette app and LitServe on two ONNX models.

    python benchmarks/run.py [--duration 5] [--only iris,mlp] [--concurrency 1,8,64] [--out results.json]

Prints one table per model; never asserts a time. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import loadgen
from onnx_models import BUILDERS, BenchModel, build_models
from procs import ServerProcess, check_output, free_port
from report import format_report
from servers import HERE, SERVERS, unavailable

DEFAULT_SERVERS = ["raw", "starlette", "litserve", "litserve-batched", "localserve", "localserve-batched"]


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measured cell (default 5)")
    parser.add_argument("--only", type=csv, default=list(BUILDERS), help="models: iris,mlp")
    parser.add_argument("--concurrency", type=csv, default=["1", "8", "64"], help="connections, e.g. 1,8,64")
    parser.add_argument(
        "--servers", type=csv, default=DEFAULT_SERVERS, help=f"of raw,{','.join(SERVERS)} (default: all but floor)"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure every server N times, alternating the order; report medians"
    )
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--loadgen", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--wrk-threads", type=int, default=1, help="wrk threads (the server has the other core)")
    parser.add_argument("--warmup", type=float, help="seconds of load before measuring (default: min(1, duration))")
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="seconds to wait for a server's first 200")
    parser.add_argument(
        "--localserve-path",
        type=Path,
        default=HERE.parent,
        help="directory holding the localserve package (default: this checkout)",
    )
    parser.add_argument(
        "--localserve-args",
        type=shlex.split,
        default=[],
        help='extra flags for `localserve serve`, e.g. "--log-level warning" (default: none, as a user runs it)',
    )
    args = parser.parse_args(argv)
    args.concurrency = [int(c) for c in args.concurrency]
    for name in args.only:
        if name not in BUILDERS:
            parser.error(f"unknown model {name!r}; expected one of {', '.join(BUILDERS)}")
    for name in args.servers:
        if name != "raw" and name not in SERVERS:
            parser.error(f"unknown server {name!r}; expected raw or one of {', '.join(SERVERS)}")
    if args.loadgen == "auto":
        args.loadgen = "wrk" if loadgen.wrk_available() else "python"
    elif args.loadgen == "wrk" and not loadgen.wrk_available():
        parser.error("--loadgen wrk: wrk is not on PATH (apt-get install -y wrk)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.warmup is None:
        args.warmup = min(1.0, args.duration)
    args.localserve_path = args.localserve_path.resolve()
    return args


def generate(args: argparse.Namespace, port: int, path: str, body: bytes, concurrency: int, duration: float) -> dict:
    if args.loadgen == "wrk":
        result = loadgen.run_wrk(port, path, body, concurrency, duration, threads=args.wrk_threads)
    else:
        result = loadgen.run_python(port, path, body, concurrency, duration)
    return result.to_dict()


def measure_raw(model: BenchModel, duration: float) -> list[dict]:
    cmd = [sys.executable, str(HERE / "raw.py"), "--model", str(model.path), "--inputs", str(model.n_inputs)]
    cmd += ["--duration", str(duration)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration * 2 + 120)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"rc {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_server(args: argparse.Namespace, name: str, model: BenchModel, workdir: Path) -> dict:
    reason = unavailable(name, args.localserve_path)
    if reason:
        log(f"{model.name}/{name}: skipped: {reason}")
        return {"skipped": reason}
    port = free_port()
    launch = SERVERS[name].launch(model, port, workdir, args.localserve_path)
    if name.startswith("localserve"):
        launch = replace(launch, cmd=[*launch.cmd, *args.localserve_args])
    server = ServerProcess(launch.cmd, port, workdir / f"{model.name}-{name}.log", env=launch.env, cwd=launch.cwd)
    log(f"{model.name}/{name}: starting on port {port}")
    server.start()
    try:
        try:
            cold, _, content = server.wait_ready(launch.path, model.body, args.ready_timeout)
        except RuntimeError as exc:
            log(f"{model.name}/{name}: skipped: {exc}")
            return {"skipped": f"did not serve: {exc}", "log_tail": server.log_tail(20)}
        data: dict = {"cold_start_s": cold, "path": launch.path, "notes": []}
        problem = check_output(content, model.n_outputs)
        if problem and name != "floor":
            data["notes"].append(problem)
        if args.warmup > 0:
            try:
                generate(args, port, launch.path, model.body, max(args.concurrency), args.warmup)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                data["notes"].append(f"warm-up failed: {exc}")
        data["memory"] = server.memory()
        data["cells"] = []
        for concurrency in args.concurrency:
            try:
                cell = generate(args, port, launch.path, model.body, concurrency, args.duration)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                log(f"{model.name}/{name} c={concurrency}: load generator failed: {exc}")
                data["notes"].append(f"c={concurrency}: load generator failed: {str(exc)[:200]}")
                continue
            log(
                f"{model.name}/{name} c={concurrency}: {cell['rps']:,.0f} req/s, p50 {cell['p50_ms']:.2f} ms, "
                f"p99 {cell['p99_ms']:.2f} ms, non-2xx {cell['non2xx']}, errors {cell['errors']}"
            )
            data["cells"].append(cell)
        if server.proc is not None and server.proc.poll() is not None:
            data["notes"].append(f"server exited with code {server.proc.returncode} during the run")
        return data
    finally:
        server.stop()


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
                    result["raw"] = measure_raw(model, args.duration / 2)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    result["raw_error"] = str(exc)
            names = [s for s in args.servers if s != "raw"]
            rounds: dict[str, list[dict]] = {name: [] for name in names}
            for i in range(args.rounds):
                for name in names if i % 2 == 0 else reversed(names):
                    if args.rounds > 1:
                        log(f"{model.name}/{name}: round {i + 1} of {args.rounds}")
                    rounds[name].append(measure_server(args, name, model, workdir))
            result["servers"] = {name: merge_rounds(rounds[name]) for name in names}
    results["meta"]["loadavg_end"] = os.getloadavg()
    return results


def merge_rounds(runs: list[dict]) -> dict:
    """One server's rounds as one: medians of rates and latencies, sums of counts."""
    served = [r for r in runs if "skipped" not in r]
    if len(runs) == 1 or not served:
        return runs[-1]
    notes = [note for r in served for note in r["notes"]]
    if len(served) < len(runs):
        notes.append(f"did not serve in {len(runs) - len(served)} of {len(runs)} rounds")
    cells = []
    for concurrency in dict.fromkeys(c["concurrency"] for r in served for c in r["cells"]):
        same = [c for r in served for c in r["cells"] if c["concurrency"] == concurrency]
        cell = {key: statistics.median(c[key] for c in same) for key in ("rps", "p50_ms", "p99_ms")}
        cell.update({key: sum(c[key] for c in same) for key in ("requests", "duration_s", "non2xx", "errors")})
        cells.append({"concurrency": concurrency, **cell, "rps_rounds": [c["rps"] for c in same]})
    memory = {key: statistics.median(r["memory"][key] for r in served) for key in served[0]["memory"]}
    memory["processes"] = max(r["memory"]["processes"] for r in served)
    return {
        "cold_start_s": statistics.median(r["cold_start_s"] for r in served),
        "cold_start_rounds": [r["cold_start_s"] for r in served],
        "path": served[0]["path"],
        "notes": list(dict.fromkeys(notes)),
        "memory": memory,
        "cells": cells,
        "rounds": len(served),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    results = run(args)
    print(format_report(results), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
