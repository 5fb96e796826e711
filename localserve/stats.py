"""The request stats and trackers of every API of a replica, added up over all replicas.

Example::

    stats = Stats.from_config(config.apis)       # one per replica process
    stats.set_status("iris", "ready")
    stats.record_request("iris", 200, 0.0012)    # every response
    stats.record_prediction("iris", {"class_label": "setosa"})  # 2xx, after post_inference
    stats.api_json("iris")                       # the body of GET /iris/stats; stats_json() for GET /stats
    stats.close()                                # at shutdown

With ``LOCALSERVE_METRICS_DIR`` set, each replica writes ``stats-<pid>.json`` there (atomically, at
most every ``FLUSH_INTERVAL`` seconds, from a background thread) and ``stats_json`` adds up every
replica's figures, its own taken live.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from glob import glob
from typing import Any, Protocol

from localserve.errors import NotFound
from localserve.tracker import ApiStats, Tracker, add_buckets, histogram

METRICS_DIR_ENV = "LOCALSERVE_METRICS_DIR"
FLUSH_INTERVAL = 0.5

logger = logging.getLogger("localserve")


class _TrackerSpec(Protocol):
    @property
    def model_type(self) -> str: ...
    @property
    def key(self) -> str | None: ...


class _ApiSpec(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def tracker(self) -> _TrackerSpec | None: ...


class Stats:
    """The request stats and trackers of every API of this replica, merged with the other replicas' on read."""

    def __init__(self, apis: Iterable[str], trackers: Mapping[str, _TrackerSpec | None] | None = None) -> None:
        self.directory = os.environ.get(METRICS_DIR_ENV) or None
        self.apis: dict[str, ApiStats] = {}
        self.trackers: dict[str, Tracker] = {}
        self._status: dict[str, str] = {}
        for api in apis:
            self.apis[api] = ApiStats()
            self._status[api] = "loading"
        for api, spec in (trackers or {}).items():
            if spec is not None:
                self.trackers[api] = Tracker(api, spec.model_type, spec.key)
        self._flushed_changes = -1
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.directory is not None:
            self._thread = threading.Thread(target=self._flush_loop, name="localserve-stats", daemon=True)
            self._thread.start()

    @classmethod
    def from_config(cls, apis: Iterable[_ApiSpec]) -> Stats:
        """Stats for the ``ApiConfig``s of a config, each with its ``tracker``."""
        apis = list(apis)
        return cls([api.name for api in apis], {api.name: api.tracker for api in apis})

    def set_status(self, api: str, status: str) -> None:
        """What ``get`` shows as the API's status: "loading" (the default), "ready", "error" ..."""
        self._status[api] = status

    def record_request(self, api: str, status_code: int, seconds: float) -> None:
        """Every response of ``api``, whatever its status (an API not given to the constructor is ignored)."""
        api_stats = self.apis.get(api)
        if api_stats is not None:
            api_stats.record(status_code, seconds)

    def record_prediction(self, api: str, value: Any) -> None:
        """The value a 2xx response of ``api`` returned (after post_inference); nothing without a tracker."""
        tracker = self.trackers.get(api)
        if tracker is not None:
            tracker.record(value)

    def stats_json(self) -> list[dict[str, Any]]:
        """The body of ``GET /stats``: every API's figures, added up over all replicas."""
        merged = self._merged_states()
        return [_api_json(name, self._status.get(name, "loading"), merged.get(name)) for name in self.apis]

    def api_json(self, api: str) -> dict[str, Any]:
        """The body of ``GET /<api>/stats``: one API's figures, added up over all replicas."""
        if api not in self.apis:
            raise NotFound(f"No API named '{api}'; the server has: {', '.join(self.apis) or 'no APIs'}.")
        return _api_json(api, self._status.get(api, "loading"), self._merged_states().get(api))

    def _own_states(self) -> dict[str, dict[str, Any]]:
        states = {name: api_stats.state() for name, api_stats in self.apis.items()}
        for name, tracker in self.trackers.items():
            states.setdefault(name, ApiStats().state())["tracker"] = tracker.state()
        return states

    def _merged_states(self) -> dict[str, dict[str, Any]]:
        merged = self._own_states()
        if self.directory is None:
            return merged
        own = f"stats-{os.getpid()}.json"
        for path in sorted(glob(os.path.join(self.directory, "stats-*.json"))):
            if os.path.basename(path) == own:
                continue
            try:
                with open(path, encoding="utf-8") as f:
                    other = json.load(f)["apis"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # a replica's file being replaced, or not ours
            for name, state in other.items():
                if name in merged:
                    merge_api(merged[name], state)
                else:
                    merged[name] = state
        return merged

    def flush(self) -> None:
        """Write this process's figures to ``stats-<pid>.json`` now (multiprocess mode only)."""
        if self.directory is None:
            return
        with self._flush_lock:
            changes = self._changes()
            if changes == self._flushed_changes:
                return
            data = json.dumps({"pid": os.getpid(), "apis": self._own_states()}, separators=(",", ":"))
            fd, tmp = tempfile.mkstemp(prefix=".stats-", suffix=".tmp", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(data)
                os.replace(tmp, os.path.join(self.directory, f"stats-{os.getpid()}.json"))
            except BaseException:
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                raise
            self._flushed_changes = changes

    def _changes(self) -> int:
        return sum(s.changes for s in self.apis.values()) + sum(t.changes for t in self.trackers.values())

    def _flush_loop(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            try:
                self.flush()
            except OSError as exc:
                logger.warning("could not write request stats to %s: %s", self.directory, exc)

    def close(self) -> None:
        """Stop the background writer and write a last time."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        try:
            self.flush()
        except OSError as exc:
            logger.warning("could not write request stats to %s: %s", self.directory, exc)


def merge_api(into: dict[str, Any], other: dict[str, Any]) -> None:
    for status_class, n in other.get("requests", {}).items():
        into["requests"][status_class] = into["requests"].get(status_class, 0) + n
    mine, theirs = into["latency"], other["latency"]
    mine["count"] += theirs["count"]
    mine["sum"] += theirs["sum"]
    mine["min"] = _pick(min, mine["min"], theirs["min"])
    mine["max"] = _pick(max, mine["max"], theirs["max"])
    for index, (n, total) in theirs["buckets"].items():
        n0, total0 = mine["buckets"].get(index, (0, 0.0))
        mine["buckets"][index] = [n0 + n, total0 + total]
    if "tracker" in other:
        if "tracker" not in into:
            into["tracker"] = other["tracker"]
        else:
            merge_tracker(into["tracker"], other["tracker"])


def merge_tracker(into: dict[str, Any], other: dict[str, Any]) -> None:
    if into["model_type"] != other["model_type"]:
        return
    if into["model_type"] == "classification":
        for label, n in other["classes"].items():
            into["classes"][label] = into["classes"].get(label, 0) + n
        return
    into["count"] += other["count"]
    into["sum"] += other["sum"]
    into["min"] = _pick(min, into["min"], other["min"])
    into["max"] = _pick(max, into["max"], other["max"])
    add_buckets(into, other)


def _pick(choose: Any, a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return float(choose(a, b))


def _quantile(buckets: Mapping[str, list[float]], count: int, q: float) -> float:
    """The mean of the bucket holding the value of rank ``q * count``."""
    rank = max(1, math.ceil(q * count))
    seen = 0.0
    for index in sorted(buckets, key=int):
        n, total = buckets[index]
        seen += n
        if seen >= rank:
            return float(total / n)
    raise ValueError("quantile of an empty histogram")


def _api_json(name: str, status: str, state: dict[str, Any] | None) -> dict[str, Any]:
    state = state or ApiStats().state()
    latency = state["latency"]
    count = latency["count"]
    if count:
        figures: dict[str, float | None] = {
            "mean": round(latency["sum"] / count, 9),
            "p50": round(_quantile(latency["buckets"], count, 0.5), 9),
            "p99": round(_quantile(latency["buckets"], count, 0.99), 9),
        }
    else:
        figures = {"mean": None, "p50": None, "p99": None}
    requests = state["requests"]
    return {
        "api": name,
        "status": status,
        "requests": {c: requests.get(c, 0) for c in ("2xx", "4xx", "5xx")},
        "latency": figures,
        "tracker": _tracker_json(state.get("tracker")),
    }


def _tracker_json(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if state is None:
        return None
    if state["model_type"] == "classification":
        return {"model_type": "classification", "key": state["key"], "classes": dict(state["classes"])}
    count = state["count"]
    return {
        "model_type": "regression",
        "key": state["key"],
        "count": count,
        "min": state["min"],
        "max": state["max"],
        "mean": state["sum"] / count if count else None,
        "histogram": histogram(state.get("buckets", {})),
    }
