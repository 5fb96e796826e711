"""Load generators: wrk with a Lua script (preferred), or a small asyncio generator as a fallback.

Both run in their own process(es), keep connections alive, POST one body (JSON, or a JPEG with
``content_type="image/jpeg"``) for a fixed duration and report the same figures: requests, req/s,
p50/p99 latency, non-2xx responses, socket errors.

The fallback is also a script, run as one or more processes by run_python():

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
    p999_ms: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


# Counting statuses in response() costs wrk a Lua call per response; it is the only way to count
# non-2xx exactly (wrk's own errors.status counts only >= 400), and it costs every server the same.
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "%(content_type)s"
%(extra_headers)s
local file = assert(io.open([==[%(body_path)s]==], "rb"))
wrk.body = file:read("*a")
file:close()

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
    "\\"p999_us\\": %%d, \\"non2xx\\": %%d, \\"errors\\": %%d}\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), bad, e.connect + e.read + e.write + e.timeout))
end
"""


def wrk_available() -> bool:
    return shutil.which("wrk") is not None


def run_wrk(
    port: int,
    path: str,
    body: bytes,
    concurrency: int,
    duration: float,
    threads: int = 1,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """``headers``: more request headers (the Open Inference Protocol's Inference-Header-Content-Length)."""
    with tempfile.NamedTemporaryFile("wb", suffix=".body", delete=False) as body_file:
        body_file.write(body)  # read by the script: a JPEG cannot sit inside Lua source
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        extra = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in (headers or {}).items())
        script.write(WRK_SCRIPT % {"body_path": body_file.name, "content_type": content_type, "extra_headers": extra})
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
        Path(body_file.name).unlink()
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
        p999_ms=r["p999_us"] / 1000,
        non2xx=r["non2xx"],
        errors=r["errors"],
    )


def run_python(
    port: int,
    path: str,
    body: bytes,
    concurrency: int,
    duration: float,
    content_type: str = "application/json",
    processes: int = 1,
    headers: dict[str, str] | None = None,
) -> LoadResult:
    """``concurrency`` connections shared by ``processes`` generator processes (one core each at most)."""
    processes = max(1, min(processes, concurrency))
    shares = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    with tempfile.NamedTemporaryFile("wb", suffix=".body", delete=False) as f:
        f.write(body)
    cmd = [sys.executable, __file__, "--port", str(port), "--path", path, "--body-file", f.name]
    cmd += ["--content-type", content_type, "--duration", str(duration)]
    for key, value in (headers or {}).items():
        cmd += ["--header", f"{key}: {value}"]
    children = [
        subprocess.Popen([*cmd, "--concurrency", str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in shares
    ]
    try:
        outputs = [child.communicate(timeout=duration + 60) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        Path(f.name).unlink()
    parts = []
    for child, (stdout, stderr) in zip(children, outputs, strict=True):
        if child.returncode != 0:
            raise RuntimeError(f"python load generator failed (rc {child.returncode}): {stderr.strip()}")
        parts.append(json.loads(stdout.strip().splitlines()[-1]))
    return summarize(
        concurrency,
        [ms for part in parts for ms in part["latencies_ms"]],
        max(part["duration_s"] for part in parts),
        non2xx=sum(part["non2xx"] for part in parts),
        errors=sum(part["errors"] for part in parts),
    )


def summarize(concurrency: int, latencies_ms: list[float], duration_s: float, non2xx: int, errors: int) -> LoadResult:
    latencies_ms = sorted(latencies_ms)

    def pct(p: float) -> float:
        return latencies_ms[min(len(latencies_ms) - 1, int(p / 100 * len(latencies_ms)))] if latencies_ms else 0.0

    n = len(latencies_ms)
    return LoadResult(
        concurrency, n, duration_s, n / duration_s if duration_s else 0.0, pct(50), pct(99), non2xx, errors, pct(99.9)
    )


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


async def _generate(
    port: int,
    path: str,
    body: bytes,
    content_type: str,
    concurrency: int,
    duration: float,
    headers: tuple[str, ...] = (),
) -> dict[str, object]:
    extra = "".join(f"{line}\r\n" for line in headers)
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {content_type}\r\n{extra}"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    counts = {"non2xx": 0, "errors": 0}
    start = time.perf_counter()
    deadline = start + duration
    await asyncio.gather(*(_client(port, request, deadline, latencies, counts) for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    return {"latencies_ms": [round(s * 1000, 3) for s in latencies], "duration_s": elapsed, **counts}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--body-file", required=True)
    parser.add_argument("--content-type", default="application/json")
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--header", action="append", default=[], help="'Name: value', repeatable")
    args = parser.parse_args()
    try:
        from uvloop import run as run_loop
    except ImportError:
        run_loop = asyncio.run
    body = Path(args.body_file).read_bytes()
    result = run_loop(
        _generate(args.port, args.path, body, args.content_type, args.concurrency, args.duration, tuple(args.header))
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
