"""Cold starts only: each server started N times, alternated, from process start to its first 200 on a predict.

    python benchmarks/coldstart.py [--only iris,mlp] [--servers floor,localserve,localserve-batched] [--rounds 7]
                                   [--baseline-path ../other-checkout]

Start-up is sensitive to whatever else the machine runs, so the servers take turns (the order reversed every other
round) and the medians are printed, with each server's ratio to the floor's, and the CPU time of each start (its
process tree's, until stopped just after the first answer: the stop's included), which other load disturbs less than
the wall clock. Never asserts a time.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
from pathlib import Path

from measure import compile_checkout, csv
from onnx_models import BUILDERS, build_models
from procs import ServerProcess, free_port
from servers import SERVERS, baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", type=csv, default=list(BUILDERS))
    parser.add_argument("--servers", type=csv, default=["floor", "localserve", "localserve-batched"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--localserve-path", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--baseline-path", type=Path, help="another checkout: its localserve rows too, as <name>@base")
    args = parser.parse_args()
    root = args.localserve_path.resolve()
    specs = [SERVERS[name] for name in args.servers]
    if args.baseline_path is not None:
        specs += [baseline(s, args.baseline_path.resolve()) for s in specs if s.name.startswith("localserve")]
    for checkout in {root, *(s.root for s in specs if s.root is not None)}:
        compile_checkout(checkout)
    with tempfile.TemporaryDirectory(prefix="localserve-cold-") as tmp:
        workdir = Path(tmp)
        for model in build_models(args.only, workdir).values():
            times: dict[str, list[float]] = {s.name: [] for s in specs}
            cpu: dict[str, list[float]] = {s.name: [] for s in specs}
            for i in range(args.rounds):
                for spec in specs if i % 2 == 0 else reversed(specs):
                    port = free_port()
                    launch = spec.launch(model, port, workdir, spec.root or root)
                    log = workdir / f"{model.name}-{spec.name}.log"
                    server = ServerProcess(launch.cmd, port, log, env=launch.env, cwd=launch.cwd)
                    used = _children_cpu()
                    server.start()
                    try:
                        cold, _, _ = server.wait_ready(
                            launch.path, launch.body or model.body, 60.0, launch.content_type or model.content_type
                        )
                    finally:
                        server.stop()
                    times[spec.name].append(cold)
                    cpu[spec.name].append(_children_cpu() - used)
            floor = statistics.median(times["floor"]) if "floor" in times else None
            for name, values in times.items():
                median = statistics.median(values)
                ratio = f"  {median / floor:.2f}x floor" if floor else ""
                rounds = " ".join(f"{v:.3f}" for v in values)
                busy = statistics.median(cpu[name])
                print(
                    f"{model.name:5} {name:24} median {median:.3f} s{ratio}, CPU {busy:.3f} s   ({rounds})", flush=True
                )


def _children_cpu() -> float:
    """CPU seconds (user + system) of the child processes waited for so far: a started server's, once stopped."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
