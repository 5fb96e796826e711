"""`/healthz` latency and server RSS during hostile clients: an endless trailer, gzip bombs, oversized outputs, unread answers.

Each attack runs against a fresh ``localserve serve`` of the checkout given (``--localserve-path``,
default this one), while a probe asks ``/healthz`` every 0.1 s and reads the server's RSS:

- ``trailer``: one chunked request whose trailer field never ends (64 KiB pieces);
- ``gzip``: 16 clients sending 200 KiB slices of a gzip bomb to a V2 model, over and over;
- ``outputs``: 2 clients asking a V2 model for one output 100 times over, on 40,000 rows (a
  1.6 MB request), over and over, reading each answer;
- ``unread``: 50 clients asking a 10 MB answer and reading none of it, then closing (three
  rounds of 20 more); the RSS after they closed is reported too.

Example (the checkout before the fixes, then this one; alternate them on a loaded machine)::

    python benchmarks/hostile.py --localserve-path /work/wt-hostile-before --seconds 20
    python benchmarks/hostile.py --seconds 20

``--attacks`` picks some of ``trailer,gzip,outputs,unread`` (all by default). Each phase gives
``/healthz``'s p50 and max, the seconds spent in answers over 0.1 s, and the largest and the last
RSS; ``<attack>: after`` is 2 s once the attack stopped and ``/healthz`` answers within 50 ms again.

Figures are ratios against a baseline of the same run: absolute times depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIG_HANDLER = 'def handler(request, context):\n    return {"content_type": "application/octet-stream", "content": b"x" * 10_000_000}\n'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(checkout: Path, *args: str) -> Iterator[tuple[int, int]]:
    """A server of ``checkout`` (its own ``localserve`` package first on the path): (port, pid)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    log = tempfile.TemporaryFile()  # noqa: SIM115
    cmd = [sys.executable, "-m", "localserve", "serve", "--port", str(port), *args]
    proc = subprocess.Popen(cmd, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while healthz(port, 1.0) is None:
            if proc.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                raise SystemExit(f"the server did not start: {log.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield port, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def healthz(port: int, timeout: float = 60.0) -> float | None:
    """Seconds ``GET /healthz`` took, or None when it failed."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
    except OSError:
        return None
    return time.perf_counter() - start if data.startswith(b"HTTP/1.1 200") else None


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def probe(port: int, pid: int, seconds: float) -> dict[str, float]:
    """``/healthz`` latency (p50, max, ms; the seconds spent in answers over 0.1 s) and RSS (max and last, MB,
    read every 0.1 s by a thread of its own, so a blocked server is measured too) over ``seconds``."""
    latencies: list[float] = []
    rss: list[float] = []
    done = threading.Event()

    def read_rss() -> None:
        while not done.wait(0.1):
            rss.append(rss_mb(pid))

    reader = threading.Thread(target=read_rss, daemon=True)
    reader.start()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        took = healthz(port)
        latencies.append(took * 1000 if took is not None else float("nan"))
        time.sleep(0.1)
    done.set()
    reader.join()
    return {
        "healthz_p50_ms": round(statistics.median(latencies), 1),
        "healthz_max_ms": round(max(latencies), 1),
        "healthz_slow_s": round(sum(t for t in latencies if t > 100) / 1000, 1),
        "rss_max_mb": round(max(rss, default=rss_mb(pid)), 1),
        "rss_end_mb": round(rss[-1] if rss else rss_mb(pid), 1),
    }


def settle(port: int) -> None:
    """Wait until ``/healthz`` answers within 50 ms again (the work an attack left behind is done)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        took = healthz(port)
        if took is not None and took < 0.05:
            return
        time.sleep(0.2)


def attack_trailer(port: int, stop: threading.Event) -> None:
    head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\nX-Trailer: "
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(head)
                while not stop.is_set():
                    sock.sendall(b"t" * 65536)
        except OSError:
            pass  # refused (431) or timed out: start again


def attack_gzip(port: int, stop: threading.Event) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    bomb = b"".join(packer.compress(b"\0" * (1 << 20)) for _ in range(400))[: 200 * 1024]
    request = (
        b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(bomb)
    ) + bomb
    send_until_stopped(port, request, stop, clients=16)


def outputs_request(rows: int = 40_000, copies: int = 100) -> bytes:
    data = [5.1, 3.5, 1.4, 0.2] * rows
    document = {
        "inputs": [{"name": "input", "shape": [rows, 4], "datatype": "FP32", "data": data}],
        "outputs": [{"name": "probabilities"}] * copies,
    }
    body = json.dumps(document).encode()
    return (
        b"POST /v2/models/iris/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    ) + body


def attack_outputs(port: int, stop: threading.Event) -> None:
    send_until_stopped(port, outputs_request(), stop, clients=2)


def send_until_stopped(port: int, request: bytes, stop: threading.Event, *, clients: int) -> None:
    """``clients`` threads send ``request`` again and again, each reading its whole answer, until ``stop``."""

    def one() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
                    sock.sendall(request)
                    while sock.recv(1 << 20):
                        pass
            except OSError:
                pass

    threads = [threading.Thread(target=one, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def unread_clients(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        socks.append(sock)
    return socks


def run_attack(port: int, pid: int, attack: Callable[[int, threading.Event], None], seconds: float) -> dict:
    stop = threading.Event()
    thread = threading.Thread(target=attack, args=(port, stop), daemon=True)
    thread.start()
    try:
        return probe(port, pid, seconds)
    finally:
        stop.set()
        thread.join(60)
        settle(port)


ATTACKS: dict[str, Callable[[int, threading.Event], None]] = {
    "trailer": attack_trailer,
    "gzip": attack_gzip,
    "outputs": attack_outputs,
}


def measure(checkout: Path, seconds: float, write_timeout: str | None, attacks: list[str]) -> dict[str, dict]:
    results: dict[str, dict] = {}
    on_iris = [name for name in attacks if name in ATTACKS]
    if on_iris:
        with serving(checkout, "--project", str(ROOT / "handlers_examples" / "iris_onnx")) as (port, pid):
            for name in on_iris:
                results[f"{name}: idle"] = probe(port, pid, 2)
                results[f"{name}: attack"] = run_attack(port, pid, ATTACKS[name], seconds)
                results[f"{name}: after"] = probe(port, pid, 2)  # once /healthz is quick again
    if "unread" in attacks:
        results.update(measure_unread(checkout, seconds, write_timeout))
    return results


def measure_unread(checkout: Path, seconds: float, write_timeout: str | None) -> dict[str, dict]:
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as project:
        Path(project, "main.py").write_text(BIG_HANDLER)
        extra = ("--write-timeout", write_timeout) if write_timeout else ()
        with serving(checkout, "-p", project, "--handler", "main:handler", *extra) as (port, pid):
            results["unread: idle"] = probe(port, pid, 2)
            socks = unread_clients(port, 50)
            results["unread: 50 open"] = probe(port, pid, seconds)
            for sock in socks:
                sock.close()
            for _ in range(3):
                socks = unread_clients(port, 20)
                probe(port, pid, 1)
                for sock in socks:
                    sock.close()
            results["unread: after closing"] = probe(port, pid, 2)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--localserve-path", type=Path, default=ROOT, help="the checkout whose server is measured")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each attack lasts")
    parser.add_argument("--write-timeout", help="--write-timeout for the 'unread' server (a checkout that has it)")
    parser.add_argument("--attacks", default="trailer,gzip,outputs,unread", help="which attacks, comma-separated")
    args = parser.parse_args()
    attacks = args.attacks.split(",")
    unknown = set(attacks) - {*ATTACKS, "unread"}
    if unknown:
        parser.error(f"unknown attacks {sorted(unknown)}; choose from trailer, gzip, outputs, unread")
    results = measure(args.localserve_path.resolve(), args.seconds, args.write_timeout, attacks)
    print(json.dumps({"checkout": str(args.localserve_path), "seconds": args.seconds, "results": results}, indent=1))


if __name__ == "__main__":
    main()
