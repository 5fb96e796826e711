"""``localserve get``: the figures of ``GET /stats`` as readable tables, like ``cortex get <api>``.

Example::

    print(render_get(httpx.get(f"{url}/stats").json(), api="iris"))

    api   status  2xx  4xx  5xx     mean      p50      p99
    iris  ready     3    1    0  1.20 ms  1.12 ms  4.47 ms

    iris: classification of 'class_label', 3 predictions
    class       count  percent
    setosa          2    66.7%
    versicolor      1    33.3%
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from localserve.errors import NotFound


def render_get(stats: Sequence[Mapping[str, Any]] | Mapping[str, Any], api: str | None = None) -> str:
    """The text of ``localserve get [API]`` from the JSON of ``GET /stats`` (a list) or ``GET /<api>/stats``."""
    entries = [stats] if isinstance(stats, Mapping) else list(stats)
    if api is not None:
        entries = [entry for entry in entries if entry.get("api") == api]
        if not entries:
            names = ", ".join(str(entry.get("api")) for entry in ([stats] if isinstance(stats, Mapping) else stats))
            raise NotFound(f"No API named '{api}'; the server has: {names or 'no APIs'}.")
    if not entries:
        return "no APIs"
    rows = []
    for entry in entries:
        requests, latency = entry.get("requests") or {}, entry.get("latency") or {}
        rows.append(
            [
                str(entry.get("api")),
                str(entry.get("status")),
                *(str(requests.get(c, 0)) for c in ("2xx", "4xx", "5xx")),
                *(_ms(latency.get(q)) for q in ("mean", "p50", "p99")),
            ]
        )
    blocks = [_table(["api", "status", "2xx", "4xx", "5xx", "mean", "p50", "p99"], rows, numeric_from=2)]
    for entry in entries:
        tracker = entry.get("tracker")
        if tracker:
            blocks.append(_render_tracker(str(entry.get("api")), tracker))
        targets = entry.get("targets")  # a TrafficSplitter's requests per API
        if targets:
            blocks.append(_render_targets(str(entry.get("api")), targets, entry.get("shadow")))
        models = entry.get("models")  # a multi-model API's model versions
        if models:
            blocks.append(_render_models(str(entry.get("api")), models))
        jobs = entry.get("jobs")  # an AsyncAPI's jobs (the POSTs above are its submits)
        if jobs:
            blocks.append(_render_jobs(str(entry.get("api")), jobs))
    return "\n\n".join(blocks)


def _render_tracker(api: str, tracker: Mapping[str, Any]) -> str:
    model_type = tracker.get("model_type")
    of = f" of '{tracker['key']}'" if tracker.get("key") else ""
    if model_type == "classification":
        classes: Mapping[str, int] = tracker.get("classes") or {}
        total = sum(classes.values())
        title = f"{api}: classification{of}, {_plural(total, 'prediction')}"
        if not total:
            return title
        ordered = sorted(classes.items(), key=lambda item: (-item[1], item[0]))
        rows = [[label, str(n), f"{100 * n / total:.1f}%"] for label, n in ordered]
        return title + "\n" + _table(["class", "count", "percent"], rows, numeric_from=1)
    count = tracker.get("count") or 0
    title = f"{api}: regression{of}, {_plural(count, 'prediction')}"
    if not count:
        return title
    row = [_number(tracker.get(k)) for k in ("min", "max", "mean")]
    return title + "\n" + _table(["min", "max", "mean"], [row], numeric_from=0)


def _render_targets(splitter: str, targets: Mapping[str, Any], shadow: Mapping[str, Any] | None) -> str:
    total = sum(sum((t.get("requests") or {}).values()) for t in targets.values())
    rows = []
    for name, target in targets.items():
        requests = target.get("requests") or {}
        count = sum(requests.values())
        share = f"{100 * count / total:.1f}%" if total else "-"
        rows.append([name, str(target.get("weight")), *(str(requests.get(c, 0)) for c in ("2xx", "4xx", "5xx")), share])
    text = f"{splitter}: TrafficSplitter\n" + _table(["target", "weight", "2xx", "4xx", "5xx", "share"], rows, 1)
    if shadow:
        outcomes = ", ".join(f"{o} {shadow.get(o, 0)}" for o in ("answered", "failed", "dropped"))
        text += f"\nshadow {shadow.get('api')} ({shadow.get('weight')}% copied): {outcomes}"
    return text


def _render_models(api: str, models: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        [
            str(m.get("model")),
            str(m.get("version")),
            str(m.get("loads", 0)),
            str(sum((m.get("evictions") or {}).values())),
            _ms(m.get("load_mean")),
            str(m.get("calls", 0)),
            _ms(m.get("latency_mean")),
        ]
        for m in models
    ]
    headers = ["model", "version", "loads", "evictions", "load", "calls", "mean"]
    return f"{api}: models\n" + _table(headers, rows, numeric_from=1)


def _render_jobs(api: str, jobs: Mapping[str, Any]) -> str:
    if "error" in jobs:
        return f"{api}: jobs: {jobs['error']}"
    names = ["in_queue", "in_progress", "completed", "failed"]
    row = [str(jobs.get(name, 0)) for name in names] + [_ms(jobs.get("mean_seconds"))]
    return f"{api}: jobs\n" + _table([*names, "mean"], [row], numeric_from=0)


def _table(headers: list[str], rows: list[list[str]], numeric_from: int) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=False)]
    lines = []
    for cells in [headers, *rows]:
        parts = [
            cell.rjust(width) if i >= numeric_from else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def _ms(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "-"
    ms = seconds * 1000
    return f"{ms:.2f} ms" if ms < 1000 else f"{ms:,.0f} ms"


def _number(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, (int, float)) else "-"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
