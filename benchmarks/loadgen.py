"""Load generators: wrk with a Lua script (preferred), or a small asyncio generator as a fallback.

Both run in their own process, keep connections alive, POST one JSON body for a fixed duration
and report the same figures: requests, req/s, p50/p99 latency, non-2xx responses, socket errors.

The fallback is also a script, run as its own process by run_python():

    python benchmarks/loadgen.py --port 8000 --path /predict --body-file body.json --concurrency 8 --duration 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class LoadResult:
    concurrency: int
    requests: int
    duration_s: float
    rps: float
    p50_ms: float
    p99_ms: float
    non2xx: int
    errors: int

    def to_dict(self) -> dict:
        return asdict(self)


# Counting statuses in response() costs wrk a Lua call per response; it is the only way to count
# non-2xx exactly (wrk's own errors.status counts only >= 400), and it costs every server the same.
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [==[%(body)s]==]

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  non2xx = 0
end

function response(status, headers, body)
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
  end
end

function done(summary, latency, requests)
  local bad = 0
  for _, t in ipairs(threads) do
    bad = bad + t:get("non2xx")
  end
  local e = summary.errors
  io.write(string.format(
    "WRK_RESULT {\\"requests\\": %%d, \\"duration_us\\": %%d, \\"p50_us\\": %%d, \\"p99_us\\": %%d, " ..
    "\\"non2xx\\": %%d, \\"errors\\": %%d}\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    bad, e.connect + e.read + e.write + e.timeout))
end
"""


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(port: int, path: str, body: bytes, concurrency: int, duration: float, threads: int = 1) -> LoadResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT % {"body": body.decode()})
    try:
        cmd = [
            "wrk",
            f"-t{min(threads, concurrency)}",
            f"-c{concurrency}",
            f"-d{max(1, round(duration))}s",  # wrk takes whole seconds
            "--timeout",
            "30s",
            "-s",
            script.name,
            f"http://127.0.0.1:{port}{path}",
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    finally:
        Path(script.name).unlink()
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("WRK_RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk failed (rc {proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
    r = json.loads(line.removeprefix("WRK_RESULT "))
    seconds = r["duration_us"] / 1e6
    return LoadResult(
        concurrency=concurrency,
        requests=r["requests"],
        duration_s=seconds,
        rps=r["requests"] / seconds if seconds else 0.0,
        p50_ms=r["p50_us"] / 1000,
        p99_ms=r["p99_us"] / 1000,
        non2xx=r["non2xx"],
        errors=r["errors"],
    )


def run_python(port: int, path: str, body: bytes, concurrency: int, duration: float) -> LoadResult:
    with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as f:
        f.write(body)
    try:
        cmd = [sys.executable, __file__, "--port", str(port), "--path", path, "--body-file", f.name]
        cmd += ["--concurrency", str(concurrency), "--duration", str(duration)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 60)
    finally:
        Path(f.name).unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"python load generator failed (rc {proc.returncode}): {proc.stderr.strip()}")
    return LoadResult(**json.loads(proc.stdout.strip().splitlines()[-1]))


# --- the fallback generator itself (runs in its own process) ---


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    length = 0
    chunked = False
    close = False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif name == b"connection" and b"close" in value.lower():
            close = True
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status, close


async def _client(port: int, request: bytes, deadline: float, latencies: list[float], counts: dict[str, int]) -> None:
    reader = writer = None
    while time.perf_counter() < deadline:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            start = time.perf_counter()
            writer.write(request)
            status, close = await _read_response(reader)  # type: ignore[arg-type]
            latencies.append(time.perf_counter() - start)
            if not 200 <= status <= 299:
                counts["non2xx"] += 1
            if close:
                writer.close()
                writer = None
        except (OSError, asyncio.IncompleteReadError, ValueError):
            counts["errors"] += 1
            if writer is not None:
                writer.close()
            writer = None
            await asyncio.sleep(0.001)
    if writer is not None:
        writer.close()


async def _generate(port: int, path: str, body: bytes, concurrency: int, duration: float) -> LoadResult:
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    counts = {"non2xx": 0, "errors": 0}
    start = time.perf_counter()
    deadline = start + duration
    await asyncio.gather(*(_client(port, request, deadline, latencies, counts) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] * 1000 if latencies else 0.0

    return LoadResult(concurrency, len(latencies), elapsed, len(latencies) / elapsed, pct(50), pct(99), **counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    args = parser.parse_args()
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    body = Path(args.body_file).read_bytes()
    result = run_loop(_generate(args.port, args.path, body, args.concurrency, args.duration))
    print(json.dumps(result.to_dict()))


if __name__ == "__main__":
    main()
