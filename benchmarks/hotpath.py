"""CPU time per request on each of localserve's threads: the event loop's and the API's worker's.

    python benchmarks/hotpath.py [--model iris] [--concurrency 1] [--duration 4] [--localserve-path DIR]
    python benchmarks/hotpath.py --batched --concurrency 8      # the batcher's thread shows too
    python benchmarks/hotpath.py --timeline --no-stages         # one request's path in wall time (timeline.py)
    python benchmarks/hotpath.py --grpc --batched --concurrency 64 --no-stages   # gRPC ModelInfer (grpc_load.py)

Serves the model of ``benchmarks/run.py`` (same project, same handler) with ``localserve serve``
*in this process*, loads it with wrk from another process, and reads ``time.thread_time()`` on
each thread before and after: (CPU seconds of the thread) / (requests answered) is that thread's
cost of one request, whatever it was doing (the model call included on the worker). wrk and the
other processes of the machine do not count. The thread that runs the model's intra-op pool
(onnxruntime's own threads) is not a Python thread and is not shown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import stages  # noqa: E402
import timeline  # noqa: E402
from onnx_models import BUILDERS, build_models  # noqa: E402
from peers import v2_body  # noqa: E402
from servers import HANDLER, LOCALSERVE_BATCHING, LOCALSERVE_YAML  # noqa: E402

WRK_LUA = 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n'
CLOSE_LUA = 'wrk.headers["Connection"] = "close"\n'  # --connection-close: a new connection per request


def app_threads(app: Any) -> dict[str, threading.Thread]:
    """The threads that serve: the event loop's (this process's main thread), each API's workers and batcher."""
    found = {"event loop": threading.main_thread()}
    for name, rt in app.apis.items():
        for index, thread in enumerate(getattr(rt.pipeline, "_workers", [])):
            found[f"{name} worker{index or ''}"] = thread
        batcher = getattr(rt.pipeline, "batcher", None)
        if batcher is not None and getattr(batcher, "thread", None) is not None:
            found[f"{name} batcher"] = batcher.thread
    return found


def thread_times(threads: dict[str, threading.Thread]) -> dict[str, float]:
    """CPU seconds so far of each thread (read from this thread: no hop onto the measured ones)."""
    return {k: time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for k, t in threads.items() if t.ident}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="iris", choices=list(BUILDERS))
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=int, default=4)
    parser.add_argument("--batched", action="store_true", help="max_batch_size 32, 2 ms (as run.py's)")
    parser.add_argument("--localserve-path", type=Path, help="a checkout to measure (default: this one)")
    parser.add_argument("--config-extra", default="", help="lines added to the API's config, e.g. '  model_threads: 1'")
    parser.add_argument("--serve-args", default="", help="extra flags for serve, e.g. '--no-access-log'")
    parser.add_argument("--v2", action="store_true", help="the model raw, on its V2 route (MLServer's body)")
    parser.add_argument("--grpc", action="store_true", help="the model raw, over gRPC ModelInfer (grpc_load.py)")
    parser.add_argument("--connection-close", action="store_true", help="a new connection per request (no keep-alive)")
    parser.add_argument("--gc-threshold", type=int, help="gc.set_threshold(N) once serving (an experiment)")
    parser.add_argument("--no-stages", action="store_true", help="no timers around the stages: threads' totals only")
    parser.add_argument("--profile", choices=["loop", "worker"], help="cProfile one thread (slower)")
    parser.add_argument("--timeline", action="store_true", help="each step's wall time at c=1 (timeline.py)")
    opts = parser.parse_args()
    if opts.timeline and opts.concurrency != 1:
        parser.error("--timeline pairs each step with its request: it needs --concurrency 1")
    if not shutil.which("wrk"):
        print("wrk not found", file=sys.stderr)
        return 1
    root = (opts.localserve_path or HERE.parent).resolve()
    sys.path.insert(0, str(root))
    import localserve
    from localserve.cli import main as cli

    print(f"localserve from {Path(localserve.__file__).parent}", flush=True)
    if opts.timeline:
        timeline.install()
    captured: list[Any] = []
    try:  # the Runner builds the App; in older checkouts the supervisor called create_app
        import localserve.server.runner as where

        name = "App"
    except ImportError:
        import localserve.processes.supervisor as where  # type: ignore[no-redef]

        name = "create_app"
    original = getattr(where, name)

    def create_app(*args: Any, **kwargs: Any) -> Any:
        app = original(*args, **kwargs)
        captured.append(app)
        return app

    setattr(where, name, create_app)
    with tempfile.TemporaryDirectory(prefix="localserve-hotpath-") as tmp:
        work = Path(tmp)
        model = build_models([opts.model], work)[opts.model]
        project = work / "project"
        project.mkdir()
        (project / model.path.name).write_bytes(model.path.read_bytes())
        (project / "handler.py").write_text(HANDLER)
        config = LOCALSERVE_YAML.format(name=model.name, model=model.path.name)
        if (
            opts.v2 or opts.grpc
        ):  # the model served raw, loaded on its V2 route with MLServer's body (run.py's localserve-v2)
            config = config.replace("  request_handler: handler.py\n", "")
        (project / "localserve.yaml").write_text(
            config + (LOCALSERVE_BATCHING if opts.batched else "") + opts.config_extra.replace("\\n", "\n") + "\n"
        )
        lua = work / "post.lua"
        body = v2_body(model) if opts.v2 else model.body
        lua.write_text(WRK_LUA % json.dumps(body.decode()) + (CLOSE_LUA if opts.connection_close else ""))
        port = 18000 + (hash(tmp) % 2000)
        grpc_port = port + 2000
        result: dict[str, Any] = {}
        message = work / "infer.msg"
        if opts.grpc:
            from grpc_load import model_infer_message

            features = json.loads(model.body)["input"]
            message.write_bytes(model_infer_message(model.name, "input", features))

        def drive() -> None:
            url = f"http://127.0.0.1:{port}" + (f"/v2/models/{model.name}/infer" if opts.v2 else f"/{model.name}")
            while not captured or not captured[0].ready:
                time.sleep(0.05)
            app = captured[0]
            if not opts.no_stages:
                result["stages"] = stages.instrument(app)
            if opts.gc_threshold:
                import gc

                gc.set_threshold(opts.gc_threshold, *gc.get_threshold()[1:])
            wrk = ["wrk", "-t1", f"-c{opts.concurrency}", "-s", str(lua)]
            if opts.grpc:  # grpc_load.py prints what wrk would: its summary is read below
                load = [sys.executable, str(HERE / "grpc_load.py"), "--port", str(grpc_port)]
                wrk = [*load, "--message-file", str(message), "--concurrency", str(opts.concurrency), "--duration"]
                url = "1"
            subprocess.run([*wrk, "-d1s", url] if not opts.grpc else [*wrk, "1"], capture_output=True, check=True)
            profile = None
            if opts.profile:
                import cProfile

                profile = cProfile.Profile()
                # A profile sees the thread that enables it.
                on = (
                    (app.engine.loop if hasattr(app, "engine") else app.loop).call_soon_threadsafe
                    if opts.profile == "loop"
                    else next(iter(app.apis.values())).pipeline.call
                )
                on(profile.enable)
            threads = app_threads(app)
            before, spent_before = thread_times(threads), stages.snapshot()
            result["timeline_start"] = len(stages.TIMELINE)
            while opts.timeline and any(rt.in_flight for rt in app.apis.values()):
                time.sleep(0.001)  # the warm-up's last requests: noted, they would pair with the wrong ones
            watch.on, timeline.ON[0] = True, opts.timeline
            cmd = [*wrk, f"-d{opts.duration}s", url] if not opts.grpc else [*wrk, str(opts.duration)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            if opts.grpc:  # the generator's JSON line, read as wrk's summary
                part = json.loads(done.stdout.strip().splitlines()[-1])
                n = len(part["latencies_ms"])
                done.stdout = f"{n} requests in\nRequests/sec: {n / part['duration_s']:.1f}\n"
                result["grpc_failed"] = (part["non2xx"], part["errors"])  # errors: UNAVAILABLE (refused streams)
            after, spent_after = thread_times(threads), stages.snapshot()
            watch.on = timeline.ON[0] = False
            if profile is not None:
                on(profile.disable)
                time.sleep(0.2)
                result["profile"] = profile
            if "Non-2xx" in done.stdout:
                result["error"] = done.stdout
            m = re.search(r"(\d+) requests in", done.stdout)
            rps = re.search(r"Requests/sec:\s*([\d.]+)", done.stdout)
            result.update(requests=int(m.group(1)) if m else 0, rps=float(rps.group(1)) if rps else 0.0)
            result["cost"] = {k: (threads[k].name, after[k] - before[k]) for k in after}
            result["spent"] = (spent_before, spent_after)
            result["cmd"] = " ".join(cmd)
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)

        watch = stages.GcWatch()
        import gc

        gc.callbacks.append(watch)
        if stages.DIAG:
            gc.set_debug(gc.DEBUG_SAVEALL)
        threading.Thread(target=drive, daemon=True).start()
        args = ["serve", "--project", str(project), "--port", str(port), "--no-install", *opts.serve_args.split()]
        if opts.grpc:
            args += ["--grpc-port", str(grpc_port)]
        try:
            cli.main(args, standalone_mode=False)
        except SystemExit:
            pass
        asyncio.set_event_loop(None)
    return show(opts, result, watch)


def show(opts: argparse.Namespace, result: dict[str, Any], watch: stages.GcWatch) -> int:
    """Print what the run measured; 1 when it answered nothing, or not only 2xx."""
    if "error" in result:
        print(f"some answers were not 2xx:\n{result['error']}", file=sys.stderr)
        return 1
    n = result.get("requests", 0)
    if not n:
        print("no requests were answered", file=sys.stderr)
        return 1
    print(f"$ {result['cmd']}")
    if result.get("grpc_failed", (0, 0)) != (0, 0):
        failed, unavailable = result["grpc_failed"]
        print(f"gRPC calls failed (other status / UNAVAILABLE): {failed} / {unavailable}")
    print(
        f"{opts.model} c={opts.concurrency}{' batched' if opts.batched else ''}: {n} requests, {result['rps']:.0f} req/s"
    )
    if opts.no_stages:
        for thread, (_, seconds) in result["cost"].items():
            print(f"  {thread:<16} {1e6 * seconds / n:8.1f} us CPU per request")
    else:
        print("\n".join(stages.report(*result["spent"], result["cost"], n)))
    # Where the loop and the API's thread share one pinned core (the default at c=1), this is that core's load.
    cpu = sum(seconds for _, seconds in result["cost"].values()) / n
    print(f"  all these threads: {1e6 * cpu:.1f} us CPU a request, {100 * cpu * result['rps']:.0f}% of one core")
    print("\n".join(watch.lines(n)))
    if not opts.no_stages:
        print(stages.timeline_line(result["timeline_start"]))
    if opts.timeline:
        print("\n".join(timeline.report()))
    if "profile" in result:
        import pstats

        pstats.Stats(result["profile"]).sort_stats("tottime").print_stats(35)
    return 0


if __name__ == "__main__":
    sys.exit(main())
