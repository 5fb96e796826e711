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
import sys
import tempfile
import time
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
    server = ServerProcess(launch.cmd, port, workdir / f"{model.name}-{name}.log", env=launch.env, cwd=launch.cwd)
    log(f"{model.name}/{name}: starting on port {port}")
    server.start()
    try:
        try:
            cold, _, content = server.wait_ready(launch.path, model.body, args.ready_timeout)
        except RuntimeError as exc:
            log(f"{model.name}/{name}: skipped: {exc}")
            return {"skipped": f"did not serve: {exc}"[:400]}
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
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
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
            for name in (s for s in args.servers if s != "raw"):
                result["servers"][name] = measure_server(args, name, model, workdir)
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
