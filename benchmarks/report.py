"""Tables of one run: throughput and latency per cell, ratios to the peers, cold start and memory."""

from __future__ import annotations

from servers import BASE, SERVERS


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(value: float | None, base: float | None) -> str:
    return f"{value / base:.2f}" if value is not None and base else "-"


def _clean_rps(cell: dict) -> float | None:
    """A cell's req/s, or None when some answers were not 2xx (a 503 is quick: counted, it would flatter)."""
    return None if cell["non2xx"] or cell["errors"] else cell["rps"]


def _peer_rps(servers: dict, name: str, concurrency: int) -> float | None:
    """The req/s of ``name`` at ``concurrency`` for a ratio; None when not measured or not all 2xx."""
    cells = servers.get(name, {}).get("cells", [])
    return next((_clean_rps(c) for c in cells if c["concurrency"] == concurrency), None)


def format_raw(raw: list[dict]) -> str:
    parts = [
        f"batch {r['batch']}: {_num(r['calls_per_s'])} calls/s, {_num(r['rows_per_s'])} rows/s "
        f"({r['us_per_call']:.1f} us/call)"
        if "batch" in r
        else f"preprocess on {r['preprocess']}: {_num(r['calls_per_s'])} images/s ({r['us_per_call']:.1f} us/image)"
        for r in raw
    ]
    return "raw session.run, in-process: " + " | ".join(parts)


def format_footer(servers: dict) -> list[str]:
    """Cold start, memory and notes of each server (or why it was skipped)."""
    lines = [f"{'server':<22}{'cold start s':>13}{'RSS MiB':>9}{'PSS MiB':>9}{'procs':>7}  notes"]
    for server, data in servers.items():
        if "skipped" in data:
            lines.append(f"{server:<22}  skipped: {data['skipped']}")
            continue
        mem = data.get("memory", {})
        lines.append(
            f"{server:<22}{_num(data.get('cold_start_s'), 2):>13}{_num(mem.get('rss_mib')):>9}"
            f"{_num(mem.get('pss_mib')):>9}{mem.get('processes', '-'):>7}  {'; '.join(data.get('notes', []))}"
        )
    return lines


def thread_lines(servers: dict) -> list[str]:
    """``--threads``: each cell's CPU a request on each thread of the server (µs, user + system), busiest first."""
    lines = []
    for name, data in servers.items():
        for cell in data.get("cells", []):
            if cell.get("threads"):
                parts = [
                    f"{t['thread']} {t['user_us'] + t['system_us']:.1f} (sys {t['system_us']:.1f})"
                    for t in cell["threads"]
                ]
                lines.append(f"{name} c={cell['concurrency']} CPU us a request: {', '.join(parts)}")
    return ["", *lines] if lines else []


# The ratios the performance goals are stated in (benchmarks/README.md), and the baseline's (--baseline-path).
GOALS = [
    ("localserve", "starlette-thread"),
    ("localserve", "starlette"),
    ("localserve-batched", "localserve"),
    ("localserve-batched", "floor"),
    ("localserve", "localserve" + BASE),
    ("localserve-batched", "localserve-batched" + BASE),
    ("localserve-v2", "localserve-v2" + BASE),
    ("localserve-v2-batched", "localserve-v2-batched" + BASE),
]


def goal_lines(servers: dict) -> list[str]:
    """One line per goal whose two servers ran: the first's req/s over the second's at each concurrency."""
    lines = []
    for name, base in GOALS:
        parts = []
        for cell in servers.get(name, {}).get("cells", []):
            c = cell["concurrency"]
            ratio = _ratio(_clean_rps(cell), _peer_rps(servers, base, c))
            if ratio != "-":
                parts.append(f"c={c} {ratio}x")
        if parts:
            lines.append(f"{name} / {base} (req/s): {', '.join(parts)}")
    return ["", *lines] if lines else []


PEERS = ("litserve", "mlserver", "bentoml", "ray")  # name prefixes of the other servers


def best_peer_lines(servers: dict) -> list[str]:
    """One line per localserve server: its req/s over the best peer's (any peer, batched or not) at each concurrency."""
    peers = {n: d for n, d in servers.items() if n.startswith(PEERS) and "cells" in d}
    lines = []
    for name, data in servers.items():
        if not name.startswith("localserve") or name.endswith(BASE) or "cells" not in data or not peers:
            continue
        parts = []
        for cell in data["cells"]:
            c = cell["concurrency"]
            best = max(peers, key=lambda n: _peer_rps(servers, n, c) or 0.0)
            rps = _peer_rps(servers, best, c)
            if rps:
                parts.append(f"c={c} {cell['rps'] / rps:.1f}x ({best})")
        if parts:
            lines.append(f"{name} / best peer (req/s): {', '.join(parts)}")
    return [""] + lines if lines else []


def format_model(name: str, result: dict) -> str:
    lines = [f"== {name} =="]
    if "raw" in result:
        lines.append(format_raw(result["raw"]))
    elif "raw_error" in result:
        lines.append(f"raw: failed: {result['raw_error']}")
    servers: dict = result.get("servers", {})
    header = (
        f"{'server':<22}{'conc':>5}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}{'non-2xx':>9}{'errors':>8}"
        f"{'x floor':>9}{'x starlette':>13}{'x thread':>10}{'x litserve':>12}"
    )
    rows = []
    for server, data in servers.items():
        if "cells" not in data:
            continue
        peer = "litserve-batched" if SERVERS[server.removesuffix(BASE)].batched else "litserve"
        for cell in data["cells"]:
            c = cell["concurrency"]
            rows.append(
                f"{server:<22}{c:>5}{_num(cell['rps']):>10}{cell['p50_ms']:>9.2f}{cell['p99_ms']:>9.2f}"
                f"{cell.get('p999_ms', 0.0):>10.2f}"
                f"{cell['non2xx']:>9}{cell['errors']:>8}"
                f"{_ratio(_clean_rps(cell), _peer_rps(servers, 'floor', c)):>9}"
                f"{_ratio(_clean_rps(cell), _peer_rps(servers, 'starlette', c)):>13}"
                f"{_ratio(_clean_rps(cell), _peer_rps(servers, 'starlette-thread', c)):>10}"
                f"{_ratio(_clean_rps(cell), _peer_rps(servers, peer, c)):>12}"
            )
    if rows:
        lines += ["", header, "-" * len(header), *rows]
    lines += thread_lines(servers)
    lines += goal_lines(servers)
    lines += best_peer_lines(servers)
    lines += ["", *format_footer(servers)]
    return "\n".join(lines)


def format_report(results: dict) -> str:
    meta = results["meta"]
    head = (
        f"localserve benchmarks: {meta['duration_s']:g} s per cell, load generator {meta['loadgen']}, "
        f"{meta['cpus']} CPUs, concurrency {','.join(map(str, meta['concurrency']))}"
        + (f", median of {meta['rounds']} rounds" if meta["rounds"] > 1 else "")
        + f", load average {meta['loadavg_start'][0]:.2f} before / {meta['loadavg_end'][0]:.2f} after\n"
        "x floor / x starlette / x thread / x litserve: req/s divided by that server's req/s at the same concurrency "
        "in this run (x thread: starlette-thread, the minimal app with its work on one worker thread; batched rows "
        "against litserve-batched)."
    )
    return "\n\n".join([head, *(format_model(name, r) for name, r in results["models"].items())])
