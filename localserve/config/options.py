"""How a replica serves: the settings of ``serve`` and ``run`` that are not the API config's."""

from __future__ import annotations

from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class ServeOptions:
    """How a replica serves (limits, metrics, logs, shutdown, API key): the CLI's flags, passed to the App."""

    max_body_size: int = 100 * MiB
    allow_cpu_fallback: bool = False
    keep_going: bool = False  # a failed API answers 503 instead of stopping the start
    access_log: bool = True  # one log line per request
    metrics: bool = True  # Prometheus metrics (GET /metrics); off only to measure what they cost
    # Event loop and worker threads on one core once the models are loaded; None: where it helps (App.pin_by_default).
    pin_threads: bool | None = False
    port: int = 0  # the port served (with the replica's index, it picks the core to pin to)
    host: str = "127.0.0.1"  # the address served (the gRPC port binds it too)
    grpc_port: int | None = None  # the Open Inference Protocol over gRPC on this port (--grpc-port); None: off
    graceful_timeout: float = 30.0  # seconds queued and running requests get once a shutdown begins
    hide_errors: bool = False  # 500 bodies say only "see the log" (--hide-errors)
    api_key: str | None = None  # every route but the health probes needs "Authorization: Bearer <key>"
    # Once every API is loaded: collect, then gc.freeze() what the process holds (App.freeze_heap).
    # `localserve serve` sets it; an App in a test process leaves the test's heap alone.
    freeze_heap: bool = False
    # Given by the supervisor to each replica (one process: the defaults).
    replica: int = 0  # this replica's index (--pin-threads picks the core by it and the port)
    replicas: int = 1  # replica processes of this serve (runtimes divide the cores among them)
    metrics_dir: str | None = None  # prometheus_client's multiprocess folder of a serve with replicas
    # A replacement replica while a sibling serves: take connections off the shared socket only once
    # every API is loaded, so the port keeps answering 200 instead of "still loading" 503s.
    accept_when_loaded: bool = False
    log_format: str | None = None  # --log-format (None: json unless stderr is a terminal)
    log_level: str = "info"  # --log-level


@dataclass(frozen=True)
class HttpLimits:
    """Limits on what one request may send before the app sees it (``serve`` flags of the same names)."""

    max_header_bytes: int = 64 * KiB  # request line + headers; 431 beyond
    max_headers: int = 100  # header fields; 431 beyond
    header_timeout: float = 10.0  # seconds for a whole request head; 408 beyond
    body_timeout: float = 60.0  # seconds for a whole body once its head is in; 408 beyond
