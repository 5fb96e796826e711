"""Triton's statistics extension (``GET /v2/models/{m}/stats``) from the figures ``GET /metrics`` shows.

One function reads the Prometheus text the server already renders (every replica's figures), so
the two can never disagree:

- ``inference_stats.success`` / ``fail``: requests answered 2xx / otherwise
  (``localserve_requests_total``); their ``ns`` share out the summed request latency
  (``localserve_request_duration_seconds``, which has no status label) by count;
- ``compute_input`` / ``compute_infer`` / ``compute_output``: the ``pre_inference`` /
  ``inference`` / ``post_inference`` stages (``localserve_stage_duration_seconds``);
- ``execution_count``: model calls (the ``inference`` stage's count); ``inference_count``: rows
  the model ran for requests (``localserve_batch_size``'s sum, padding excluded; model calls when
  the API does not batch);
- ``queue``, ``last_inference``, cache hits and misses: localserve keeps no such figures; 0.
"""

from __future__ import annotations

from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families

NS = 1e9
STAGES = {"compute_input": "pre_inference", "compute_infer": "inference", "compute_output": "post_inference"}


class Renders(Protocol):
    """What the statistics are read from: the server's metrics (their /metrics text)."""

    def render(self) -> tuple[bytes, str]:
        """The /metrics text and its content type."""
        ...


def model_stats(metrics: Renders, name: str, version: str) -> dict[str, Any]:
    """Triton's ``model_stats`` entry of API ``name``, read from ``metrics.render()``."""
    codes: dict[str, float] = {}
    sums: dict[str, float] = {}  # histogram sums and counts: "duration_sum", "stage:inference_count", ...
    body, _ = metrics.render()
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            if sample.labels.get("api") != name:
                continue
            if family.name == "localserve_requests" and sample.name.endswith("_total"):
                code = sample.labels["code"]
                codes[code] = codes.get(code, 0.0) + sample.value
            elif sample.name.endswith(("_sum", "_count")):
                kind = sample.name.rsplit("_", 1)[1]
                key = {
                    "localserve_request_duration_seconds": "duration",
                    "localserve_batch_size": "rows",
                    "localserve_stage_duration_seconds": f"stage:{sample.labels.get('stage')}",
                }.get(family.name)
                if key is not None:
                    sums[f"{key}_{kind}"] = sums.get(f"{key}_{kind}", 0.0) + sample.value
    success = sum(n for code, n in codes.items() if code.startswith("2"))
    fail = sum(codes.values()) - success
    total = success + fail
    latency = sums.get("duration_sum", 0.0)

    def share(count: float) -> dict[str, int]:
        return {"count": int(count), "ns": int(latency * NS * count / total) if total else 0}

    def stage(label: str) -> dict[str, int]:
        return {
            "count": int(sums.get(f"stage:{label}_count", 0.0)),
            "ns": int(sums.get(f"stage:{label}_sum", 0.0) * NS),
        }

    executions = int(sums.get("stage:inference_count", 0.0))
    rows = int(sums.get("rows_sum", 0.0)) if sums.get("rows_count") else executions
    zero = {"count": 0, "ns": 0}
    return {
        "name": name,
        "version": version,
        "last_inference": 0,
        "inference_count": rows,
        "execution_count": executions,
        "inference_stats": {
            "success": share(success),
            "fail": share(fail),
            "queue": dict(zero),
            **{key: stage(label) for key, label in STAGES.items()},
            "cache_hit": dict(zero),
            "cache_miss": dict(zero),
        },
        "batch_stats": [],
    }
