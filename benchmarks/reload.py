"""How long ``serve --reload`` takes from a save to the new code answering, against a restart.

    python benchmarks/reload.py [--rounds 5] [--only iris,tf]

For each project (the iris ONNX example, and the TensorFlow SavedModel example when TensorFlow
is installed), copied to a temporary folder: one ``serve --reload`` process; each round saves
``handler.py`` with a new field in its answer and times, from the save, the first answer that
carries it (a client asking without pause), then times a restart (a fresh ``serve`` without
``--reload``: its start to its first 200), so reloads and restarts alternate in one process tree.
It prints medians and the ratio, and never asserts a time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path

from procs import ServerProcess, free_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "handlers_examples"
# name: (example folder, API path, the line of handler.py a round rewrites, what it becomes with the round's field)
PROJECTS = {
    "iris": ("iris_onnx", "/iris", '"probabilities": probabilites,', '"probabilities": probabilites, "round": {n},'),
    "tf": (
        "tf_savedmodel",
        "/iris-tf",
        '"class_label": metadata["labels"][class_id],',
        '"class_label": metadata["labels"][class_id], "round": {n},',
    ),
}
DESCRIPTION = {
    "iris": "iris ONNX (handlers_examples/iris_onnx)",
    "tf": "TF SavedModel (handlers_examples/tf_savedmodel)",
}
POLL = 0.002  # seconds between two asks while nothing answers yet (connection refused, 503 loading)


def ask(port: int, path: str, body: bytes) -> tuple[int, dict | None]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if response.status == 200 else None
    finally:
        conn.close()


def first_answer(port: int, path: str, body: bytes, round_: int | None, since: float, timeout: float = 300) -> float:
    """Seconds from ``since`` to the first 200 (whose ``round`` field is ``round_``, unless None)."""
    while time.perf_counter() - since < timeout:
        try:
            status, answer = ask(port, path, body)
        except OSError:
            status, answer = 0, None
        if status == 200 and (round_ is None or (answer or {}).get("round") == round_):
            return time.perf_counter() - since
        if status != 200:
            time.sleep(POLL)
    raise RuntimeError(f"no answer of round {round_} on {path} within {timeout:.0f} s")


def serve_command(project: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "localserve", "serve", "-p", str(project), "--port", str(port), *extra]


def measure(name: str, rounds: int, work: Path) -> dict:
    folder, path, line, changed = PROJECTS[name]
    project = work / name
    shutil.copytree(EXAMPLES / folder, project)
    handler = project / "handler.py"
    original = handler.read_text()
    assert line in original, f"{handler} changed: the benchmark rewrites {line!r}"
    body = (project / "sample.json").read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["LOCALSERVE_CACHE_DIR"] = str(work / "cache")
    port = free_port()
    log = work / f"{name}-reload.log"
    reloading = ServerProcess(serve_command(project, port, "--reload", "--log-format", "text"), port, log, env=env)
    reloading.start()
    reloads, loads, restarts = [], [], []
    try:
        first_answer(port, path, body, None, time.perf_counter())
        for n in range(1, rounds + 1):
            saving = project / ".handler.py.saving"
            saving.write_text(original.replace(line, changed.format(n=n)))
            start = time.perf_counter()
            os.replace(saving, handler)
            reloads.append(first_answer(port, path, body, n, start))
            found = re.findall(r"reloaded .* in ([\d.]+) s after", log.read_text(errors="replace"))
            loads.append(float(found[-1]) if found else float("nan"))
            restart_port = free_port()
            fresh = ServerProcess(
                serve_command(project, restart_port), restart_port, work / f"{name}-restart.log", env=env
            )
            fresh.start()
            try:
                restarts.append(first_answer(restart_port, path, body, n, fresh.started_at))
            finally:
                fresh.stop()
    finally:
        reloading.stop()
    return {"reload": reloads, "server_reload": loads, "restart": restarts}


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:,.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="saves (and restarts) per project")
    parser.add_argument("--only", default="iris,tf", help="projects: iris, tf (tf needs TensorFlow)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = [n for n in names if n not in PROJECTS]
    if unknown:
        parser.error(f"unknown project {unknown[0]!r}; the projects: {', '.join(PROJECTS)}")
    if "tf" in names and find_spec("tensorflow") is None:
        print("tf: skipped, TensorFlow is not installed (pip install 'localserve[tensorflow]')")
        names.remove("tf")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"localserve reload benchmark: {args.rounds} save(s) per project, {cores} cores, reloads and restarts alternated"
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="localserve-reload-") as work:
        for name in names:
            figures = results[name] = measure(name, args.rounds, Path(work))
            reload, restart = statistics.median(figures["reload"]), statistics.median(figures["restart"])
            print(
                f"{DESCRIPTION[name]}: save -> new code answering {ms(figures['reload'])} "
                f"(min {min(figures['reload']) * 1000:,.0f}, max {max(figures['reload']) * 1000:,.0f}; "
                f"the server's reload {ms(figures['server_reload'])}); "
                f"restart -> first answer {ms(figures['restart'])}; reload / restart {reload / restart:.2f}x"
            )
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
