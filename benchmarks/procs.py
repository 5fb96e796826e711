"""Server processes: start on a free port, time the first 200, measure memory, stop the whole tree."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Until ``url``'s /readyz answers 200 (60 s at most); SystemExit if ``proc`` exits first."""
    import httpx  # only the benchmarks that start a server this way need it

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit("the server did not become ready in 60 s")


def post(
    port: int, path: str, body: bytes, timeout: float = 5.0, content_type: str = "application/json"
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body, {"Content-Type": content_type})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@dataclass
class ServerProcess:
    """A server started in its own session, so that stopping it stops every process it forked."""

    cmd: list[str]
    port: int
    log_path: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    started_at: float = field(default=0.0, init=False)

    def start(self) -> None:
        _stop_servers_on_sigterm()
        log = self.log_path.open("wb")
        self.started_at = time.perf_counter()
        self.proc = subprocess.Popen(
            self.cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.cwd, start_new_session=True
        )
        log.close()

    def wait_ready(
        self, path: str, body: bytes, timeout: float, content_type: str = "application/json"
    ) -> tuple[float, int, bytes]:
        """Poll with a real predict request; return (seconds from start to the first 200, status, body)."""
        assert self.proc is not None
        deadline = self.started_at + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited with code {self.proc.returncode}: {self.log_summary()}")
            try:
                status, content = post(self.port, path, body, timeout=2.0, content_type=content_type)
            except OSError:
                time.sleep(0.02)
                continue
            if status == 200:
                return time.perf_counter() - self.started_at, status, content
            time.sleep(0.02)
        raise RuntimeError(f"no 200 on POST {path} within {timeout:.0f} s: {self.log_summary()}")

    def log_tail(self, lines: int = 8) -> str:
        return " | ".join(self._log_lines()[-lines:]) or "(empty log)"

    def log_summary(self) -> str:
        """The line of the server's log that best says why it failed: the last error, else the last line."""
        lines = self._log_lines()
        errors = [ln for ln in lines if "Error" in ln or "error" in ln.lower().split(":")[0]]
        return (errors or lines or ["(empty log)"])[-1][:300]

    def _log_lines(self) -> list[str]:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return []
        return [ln.strip() for ln in text.splitlines() if ln.strip()]

    def memory(self) -> dict:
        assert self.proc is not None
        return tree_memory(self.proc.pid)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = self.proc.pid  # start_new_session: the group id is the server's own pid
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # children that outlived their parent still carry the group id
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _stop_servers_on_sigterm() -> None:
    """A SIGTERM to the harness (``timeout``, a CI's limit) becomes SystemExit, so the ``finally`` that stops
    a server runs: started in a session of its own, the server would otherwise outlive the harness (seen:
    eight uvicorn workers restarting for 24 minutes after ``timeout`` ended images.py)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit)


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _kib(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree(pid: int) -> list[int]:
    """A process and all its descendants."""
    children = _children()
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(children.get(p, []))
    return pids


def tree_memory(pid: int) -> dict:
    """RSS and PSS summed over a process and all its descendants (RSS counts shared pages once per process)."""
    pids = _tree(pid)
    rss = sum(_kib(f"/proc/{p}/status", "VmRSS:") for p in pids)
    pss = sum(_kib(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
    return {"processes": len(pids), "rss_mib": rss / 1024, "pss_mib": pss / 1024}


def tree_threads(pid: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(process, thread) -> (user, system) CPU ticks of every thread of a process and its descendants."""
    pids = _tree(pid)
    ticks: dict[tuple[int, int], tuple[int, int]] = {}
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                fields = Path(f"/proc/{p}/task/{tid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            ticks[(p, int(tid))] = (int(fields[11]), int(fields[12]))  # utime, stime
    return ticks


def thread_costs(
    before: dict[tuple[int, int], tuple[int, int]], after: dict[tuple[int, int], tuple[int, int]], requests: int
) -> list[dict]:
    """The CPU a request took on each thread between two ``tree_threads`` readings (µs, busiest first; threads
    under 0.5 µs left out). ``main`` is a process's first thread (the event loop of the servers here)."""
    hz = os.sysconf("SC_CLK_TCK")
    costs = []
    for (p, tid), (user, system) in after.items():
        user0, system0 = before.get((p, tid), (0, 0))
        user_us = (user - user0) / hz * 1e6 / max(requests, 1)
        system_us = (system - system0) / hz * 1e6 / max(requests, 1)
        if user_us + system_us >= 0.5:
            costs.append(
                {
                    "thread": "main" if tid == p else f"thread {tid}",
                    "process": p,
                    "user_us": user_us,
                    "system_us": system_us,
                }
            )
    return sorted(costs, key=lambda c: -(c["user_us"] + c["system_us"]))


def check_output(content: bytes, n_outputs: int, key: str = "output") -> str | None:
    """None when the body holds n numbers, else what is wrong with it.

    Where they are: ``{key: [...]}``; a V2 response's first output's ``data``; a batch of one, ``[[...]]``
    (BentoML's batchable API)."""
    try:
        body = json.loads(content)
        if isinstance(body, dict) and "outputs" in body:
            output = body["outputs"][0]["data"]
        elif isinstance(body, list) and len(body) == 1:
            output = body[0]
        else:
            output = body[key]
    except (ValueError, KeyError, TypeError, IndexError):
        return f"unexpected response body: {content[:120]!r}"
    if not isinstance(output, list) or len(output) != n_outputs:
        return f"expected {key!r} to be {n_outputs} numbers, got {str(output)[:120]}"
    return None
