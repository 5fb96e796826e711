"""Tables of one run: throughput and latency per cell, ratios to the peers, cold start and memory."""

from __future__ import annotations

from servers import SERVERS


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def _ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}" if base else "-"


def _peer_rps(servers: dict, name: str, concurrency: int) -> float | None:
    cells = servers.get(name, {}).get("cells", [])
    return next((c["rps"] for c in cells if c["concurrency"] == concurrency), None)


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
    lines = [f"{'server':<20}{'cold start s':>13}{'RSS MiB':>9}{'PSS MiB':>9}{'procs':>7}  notes"]
    for server, data in servers.items():
        if "skipped" in data:
            lines.append(f"{server:<20}  skipped: {data['skipped']}")
            continue
        mem = data.get("memory", {})
        lines.append(
            f"{server:<20}{_num(data.get('cold_start_s'), 2):>13}{_num(mem.get('rss_mib')):>9}"
            f"{_num(mem.get('pss_mib')):>9}{mem.get('processes', '-'):>7}  {'; '.join(data.get('notes', []))}"
        )
    return lines


def format_model(name: str, result: dict) -> str:
    lines = [f"== {name} =="]
    if "raw" in result:
        lines.append(format_raw(result["raw"]))
    elif "raw_error" in result:
        lines.append(f"raw: failed: {result['raw_error']}")
    servers: dict = result.get("servers", {})
    header = (
        f"{'server':<20}{'conc':>5}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}{'errors':>8}"
        f"{'x starlette':>13}{'x litserve':>12}"
    )
    rows = []
    for server, data in servers.items():
        if "cells" not in data:
            continue
        peer = "litserve-batched" if SERVERS[server].batched else "litserve"
        for cell in data["cells"]:
            c = cell["concurrency"]
            rows.append(
                f"{server:<20}{c:>5}{_num(cell['rps']):>10}{cell['p50_ms']:>9.2f}{cell['p99_ms']:>9.2f}"
                f"{cell['non2xx']:>9}{cell['errors']:>8}"
                f"{_ratio(cell['rps'], _peer_rps(servers, 'starlette', c)):>13}"
                f"{_ratio(cell['rps'], _peer_rps(servers, peer, c)):>12}"
            )
    if rows:
        lines += ["", header, "-" * len(header), *rows]
    lines += ["", *format_footer(servers)]
    return "\n".join(lines)


def format_report(results: dict) -> str:
    meta = results["meta"]
    head = (
        f"localserve benchmarks: {meta['duration_s']:g} s per cell, load generator {meta['loadgen']}, "
        f"{meta['cpus']} CPUs, concurrency {','.join(map(str, meta['concurrency']))}"
        + (f", median of {meta['rounds']} rounds" if meta["rounds"] > 1 else "")
        + f", load average {meta['loadavg_start'][0]:.2f} before / {meta['loadavg_end'][0]:.2f} after\n"
        "x starlette / x litserve: req/s divided by the peer's req/s at the same concurrency in this run "
        "(batched rows against litserve-batched)."
    )
    return "\n\n".join([head, *(format_model(name, r) for name, r in results["models"].items())])
