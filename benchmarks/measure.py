"""One server measured on one model: start it, wait for a 200, warm up, one load cell per concurrency, stop.

Shared by run.py (JSON models) and images.py (JPEG models), with the command-line options they share.
"""

from __future__ import annotations

import argparse
import compileall
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import loadgen
from onnx_models import BenchModel
from procs import ServerProcess, check_output, free_port, thread_costs, tree_threads
from servers import HERE, Launch, ServerSpec, unavailable


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def add_common_args(parser: argparse.ArgumentParser, duration: float | None, concurrency: str | None) -> None:
    """The options of every runner: cell length, concurrency, load generator, localserve checkout.

    A default of None is the runner's to fill in after parsing (images.py: the workload's).
    """
    parser.add_argument(
        "--duration",
        type=float,
        default=duration,
        help=f"seconds per measured cell (default {duration:g})" if duration else "seconds per measured cell",
    )
    parser.add_argument(
        "--concurrency",
        type=csv,
        default=csv(concurrency) if concurrency else None,
        help=f"connections, e.g. {concurrency} (default)" if concurrency else "connections, e.g. 1,8,64",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure every server N times, alternating the order; report medians"
    )
    parser.add_argument("--out", type=Path, help="also write the results as JSON here")
    parser.add_argument("--loadgen", choices=["auto", "wrk", "python"], default="auto")
    parser.add_argument("--wrk-threads", type=int, help="wrk threads (default 1: the server has the other core)")
    parser.add_argument("--loadgen-processes", type=int, help="processes of the python load generator (default 1)")
    parser.add_argument("--warmup", type=float, help="seconds of load before measuring (default: min(1, duration))")
    parser.add_argument("--ready-timeout", type=float, default=90.0, help="seconds to wait for a server's first 200")
    parser.add_argument(
        "--localserve-path",
        type=Path,
        default=HERE.parent,
        help="directory holding the localserve package (default: this checkout)",
    )
    parser.add_argument(
        "--threads",
        action="store_true",
        help="also read each thread's CPU (/proc, the server's process tree) and print it a request, per cell",
    )
    parser.add_argument(
        "--localserve-args",
        type=shlex.split,
        default=[],
        help='extra flags for `localserve serve`, e.g. "--log-level warning" (default: none, as a user runs it)',
    )


def check_common_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Validate and complete what add_common_args parsed (exits through parser.error)."""
    try:
        args.concurrency = [int(c) for c in args.concurrency]
    except ValueError:
        parser.error(f"--concurrency takes whole numbers separated by commas; got {','.join(args.concurrency)!r}")
    if args.loadgen == "auto":
        args.loadgen = "wrk" if loadgen.wrk_available() else "python"
    elif args.loadgen == "wrk" and not loadgen.wrk_available():
        parser.error("--loadgen wrk: wrk is not on PATH (apt-get install -y wrk)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    args.wrk_threads = args.wrk_threads or 1
    args.loadgen_processes = args.loadgen_processes or 1
    if args.warmup is None:
        args.warmup = min(1.0, args.duration)
    args.localserve_path = args.localserve_path.resolve()


def generate(args: argparse.Namespace, port: int, launch: Launch, concurrency: int, duration: float) -> dict:
    assert launch.body is not None and launch.content_type is not None
    if args.loadgen == "wrk":
        result = loadgen.run_wrk(
            port, launch.path, launch.body, concurrency, duration, args.wrk_threads, launch.content_type
        )
    else:
        result = loadgen.run_python(
            port, launch.path, launch.body, concurrency, duration, launch.content_type, args.loadgen_processes
        )
    return result.to_dict()


def measure_server(args: argparse.Namespace, spec: ServerSpec, model: BenchModel, workdir: Path) -> dict:
    name = spec.name
    root = spec.root or args.localserve_path
    reason = unavailable(name, root)
    if reason:
        log(f"{model.name}/{name}: skipped: {reason}")
        return {"skipped": reason}
    port = free_port()
    launch = spec.launch(model, port, workdir, root)
    launch = replace(launch, body=launch.body or model.body, content_type=launch.content_type or model.content_type)
    if name.startswith("localserve"):
        launch = replace(launch, cmd=[*launch.cmd, *args.localserve_args])
    server = ServerProcess(launch.cmd, port, workdir / f"{model.name}-{name}.log", env=launch.env, cwd=launch.cwd)
    log(f"{model.name}/{name}: starting on port {port}")
    server.start()
    try:
        try:
            cold, _, content = server.wait_ready(launch.path, launch.body, args.ready_timeout, launch.content_type)
        except RuntimeError as exc:
            log(f"{model.name}/{name}: skipped: {exc}")
            return {"skipped": f"did not serve: {exc}", "log_tail": server.log_tail(20)}
        data: dict = {"cold_start_s": cold, "path": launch.path, "notes": []}
        problem = check_output(content, model.n_outputs, model.output_key)
        if problem and name != "floor":
            data["notes"].append(problem)
        if args.warmup > 0:
            try:
                generate(args, port, launch, max(args.concurrency), args.warmup)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                data["notes"].append(f"warm-up failed: {exc}")
        data["memory"] = server.memory()
        data["cells"] = []
        for concurrency in args.concurrency:
            try:
                before = tree_threads(server.proc.pid) if args.threads and server.proc is not None else None
                cell = generate(args, port, launch, concurrency, args.duration)
                if before is not None and server.proc is not None:
                    cell["threads"] = thread_costs(before, tree_threads(server.proc.pid), cell["requests"])
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                log(f"{model.name}/{name} c={concurrency}: load generator failed: {exc}")
                data["notes"].append(f"c={concurrency}: load generator failed: {str(exc)[:200]}")
                continue
            log(
                f"{model.name}/{name} c={concurrency}: {cell['rps']:,.0f} req/s, p50 {cell['p50_ms']:.2f} ms, "
                f"p99 {cell['p99_ms']:.2f} ms, non-2xx {cell['non2xx']}, errors {cell['errors']}"
            )
            if not cell["requests"]:
                data["notes"].append(f"c={concurrency}: no answer came back within the cell ({args.duration:g} s)")
            data["cells"].append(cell)
        if server.proc is not None and server.proc.poll() is not None:
            data["notes"].append(f"server exited with code {server.proc.returncode} during the run")
        return data
    finally:
        server.stop()


def compile_checkout(root: Path) -> None:
    """Byte-compile the localserve checkout that serves, as ``pip install`` does for an installed package (the
    Docker image's included): the cold start then measures localserve, not the compiler. With
    PYTHONDONTWRITEBYTECODE set, as on the development machine, a checkout without ``__pycache__`` would
    recompile its ~150 modules at every start (0.1 s of the mlp's 0.35 s there)."""
    package = Path(root) / "localserve"
    if package.is_dir():
        compileall.compile_dir(package, quiet=1, workers=1)


def measure_rounds(
    args: argparse.Namespace, specs: list[ServerSpec], model: BenchModel, workdir: Path, rounds: int
) -> dict[str, dict]:
    """Every server ``rounds`` times, the order reversed every other round; medians per server."""
    for root in {args.localserve_path, *(spec.root for spec in specs if spec.root is not None)}:
        compile_checkout(root)
    runs: dict[str, list[dict]] = {spec.name: [] for spec in specs}
    for i in range(rounds):
        for spec in specs if i % 2 == 0 else reversed(specs):
            if rounds > 1:
                log(f"{model.name}/{spec.name}: round {i + 1} of {rounds}")
            runs[spec.name].append(measure_server(args, spec, model, workdir))
    return {name: merge_rounds(r) for name, r in runs.items()}


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
        cell["p999_ms"] = statistics.median(c.get("p999_ms", 0.0) for c in same)
        cell.update({key: sum(c[key] for c in same) for key in ("requests", "duration_s", "non2xx", "errors")})
        if "threads" in same[-1]:
            cell["threads"] = same[-1]["threads"]  # the last round's: threads are not matched across servers' starts
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
