"""The table of an image workload: req/s and latency per cell, ratios to the workload's peers and to the limit."""

from __future__ import annotations

from report import _clean_rps, _num, _peer_rps, _ratio, format_footer, format_raw


def _limit(raw: list[dict]) -> float | None:
    """The model's best rows/s in-process (batch 32 on the GPU): what no server can pass."""
    rows = [r["rows_per_s"] for r in raw if "batch" in r]
    return max(rows) if rows else None


def format_headline(servers: dict, server: str, base: str) -> str | None:
    cells = servers.get(server, {}).get("cells", [])
    ratios = [(c["concurrency"], _ratio(_clean_rps(c), _peer_rps(servers, base, c["concurrency"]))) for c in cells]
    parts = [f"c={concurrency} {ratio}{'' if ratio == '-' else 'x'}" for concurrency, ratio in ratios]
    return f"{server} / {base} (req/s): " + ", ".join(parts) if parts else None


TARGET_RPS, TARGET_P99_MS, TARGET_CONC = 2800, 100.0, 128  # the engine issue's, for ResNet-50 on one H100


def format_targets(meta: dict, servers: dict) -> str | None:
    """The gpu workload's targets, met or not: localserve-batched at c=128 and batching never slower than none."""
    if meta.get("workload") != "gpu":
        return None
    where = f"{meta['model']} on {meta['device']}"
    lines = [f"targets (ResNet-50 on one H100; this run: {where}):"]
    cell = next(
        (c for c in servers.get("localserve-batched", {}).get("cells", []) if c["concurrency"] == TARGET_CONC), None
    )
    if cell is None:
        lines.append(f"  localserve-batched c={TARGET_CONC}: not measured")
    else:
        met = cell["rps"] >= TARGET_RPS and cell["p99_ms"] <= TARGET_P99_MS and not cell["non2xx"]
        lines.append(
            f"  localserve-batched c={TARGET_CONC} >= {TARGET_RPS:,} req/s with p99 <= {TARGET_P99_MS:g} ms: "
            f"{_num(cell['rps'])} req/s, p99 {cell['p99_ms']:.1f} ms: {'met' if met else 'NOT met'}"
        )
    slower = [
        f"c={c['concurrency']}"
        for c in servers.get("localserve-batched", {}).get("cells", [])
        if (base := _peer_rps(servers, "localserve", c["concurrency"])) and (_clean_rps(c) or 0) < base
    ]
    if "cells" in servers.get("localserve-batched", {}) and "cells" in servers.get("localserve", {}):
        verdict = "met" if not slower else f"NOT met at {', '.join(slower)}"
        lines.append(f"  batching never slower than none (localserve-batched >= localserve): {verdict}")
    return "\n".join(lines)


def format_images(results: dict) -> str:
    meta = results["meta"]
    servers: dict = results.get("servers", {})
    limit = _limit(results.get("raw", []))
    head = [
        f"localserve image benchmark '{meta['workload']}': model {meta['model']} on {meta['device']}, clients POST "
        f"handlers_examples/image_flip/cat.jpg; {meta['duration_s']:g} s per cell, load generator "
        + (f"wrk -t{meta['wrk_threads']}" if meta["loadgen"] == "wrk" else f"python x{meta['loadgen_processes']}")
        + f", {meta['cpus']} CPUs"
        + (f", median of {meta['rounds']} rounds" if meta["rounds"] > 1 else ""),
        f"load average {meta['loadavg_start'][0]:.2f} before / {meta['loadavg_end'][0]:.2f} after",
        "x PEER: req/s divided by PEER's req/s at the same concurrency in this run; "
        "/ limit: req/s divided by raw session.run's best rows/s (no HTTP, no decode); "
        "a row with non-2xx answers or errors has no ratios, and none are taken against it.",
    ]
    lines = ["\n".join(head)]
    if "raw" in results:
        lines.append(format_raw(results["raw"]))
    elif "raw_error" in results:
        lines.append(f"raw: failed: {results['raw_error']}")
    peers = meta["peers"]
    header = (
        f"{'server':<20}{'conc':>5}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}{'errors':>8}"
        + "".join(f"{'x ' + p:>{max(12, len(p) + 4)}}" for p in peers)
        + f"{'/ limit':>9}"
    )
    rows = []
    for server, data in servers.items():
        for cell in data.get("cells", []):
            c = cell["concurrency"]
            rows.append(
                f"{server:<20}{c:>5}{_num(cell['rps']):>10}{cell['p50_ms']:>9.2f}{cell['p99_ms']:>9.2f}"
                f"{cell['non2xx']:>9}{cell['errors']:>8}"
                + "".join(f"{_ratio(_clean_rps(cell), _peer_rps(servers, p, c)):>{max(12, len(p) + 4)}}" for p in peers)
                + f"{_ratio(_clean_rps(cell), limit):>9}"
            )
    if rows:
        lines.append("\n".join([header, "-" * len(header), *rows]))
    headlines = [format_headline(servers, server, base) for server, base in meta["headlines"]]
    if any(headlines):
        lines.append("\n".join(h for h in headlines if h))
    targets = format_targets(meta, servers)
    if targets:
        lines.append(targets)
    described = [f"{name:<20}{text}" for name, text in results.get("descriptions", {}).items()]
    lines.append("\n".join([*format_footer(servers), "", *described]))
    return "\n\n".join(lines)
