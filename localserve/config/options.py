"""The settings of a server, in three objects: what the CLI builds, what an API gets, the HTTP limits.

Example::

    options = ServeOptions(port=9000, graceful_timeout=5.0, limits=HttpLimits(max_headers=50))
    serve_forever(config, options)          # the supervisor, the replicas and the App all read it

``ServeOptions`` is the one frozen tree the CLI builds (``cli/options.py``) from the flags (each also a
``LOCALSERVE_*`` variable) and the few variables only the environment gives; nothing below the CLI reads
the environment for these. ``HttpLimits`` (the HTTP limits), ``ProjectSettings`` (what the Project context
gets) and ``TraceExport`` are nested in it. A setting lives here once: the supervisor hands each replica a
copy with its place among them (``replica``, ``replicas``, ``metrics_dir``, ``accept_when_loaded``), and
each API gets an ``ApiOptions`` derived from the tree and its config (``ApiOptions.of``) when it is built.
``ApiOptions`` is here, at the bottom, because the handlers and the runtimes both read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from localserve.config import ApiConfig

__all__ = ["ApiOptions", "HttpLimits", "ProjectSettings", "ServeOptions", "TraceExport"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class HttpLimits:
    """Limits on what one request may send before the app sees it (``serve`` flags of the same names)."""

    max_header_bytes: int = 64 * KiB  # request line + headers; 431 beyond
    max_headers: int = 100  # header fields; 431 beyond
    header_timeout: float = 10.0  # seconds for a whole request head; 408 beyond
    body_timeout: float = 60.0  # seconds for a whole body once its head is in; 408 beyond
    write_timeout: float = 60.0  # seconds an answer's writing may stay blocked on a client that reads nothing


@dataclass(frozen=True)
class TraceExport:
    """Where this server's spans go, as the CLI read it from OpenTelemetry's own ``OTEL_*`` variables.

    The SDK reads the rest of them itself (the endpoint, headers, timeouts, the resource, the sampler,
    ``OTEL_BSP_*``); ``endpoint`` is only what the banner shows.
    """

    exporter: str = "otlp"  # "otlp" or "console" (OTEL_TRACES_EXPORTER)
    protocol: str = "http/protobuf"  # "http/protobuf" or "grpc" (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL)
    endpoint: str = ""  # where an OTLP exporter sends, for the banner


@dataclass(frozen=True)
class ProjectSettings:
    """How the Project context recreates the platform around user code: the flags of ``run`` and ``serve`` that shape it."""

    environment: Mapping[str, str] = field(default_factory=dict)  # --environment KEY:VALUE, parsed
    raw_project: bool = False  # --raw-project: user code sees the folder as it is, not as packaged
    system_deps: bool = False  # --system-deps: run dependencies.sh
    install: bool = True  # not --no-install
    quiet: bool = False  # pip's output and TensorFlow's C++ log lines below errors hidden (run --quiet)
    url: str | None = None  # LOCALSERVE_URL for user code: where this server answers


@dataclass(frozen=True)
class ServeOptions:
    """How this server serves: where, with which limits, metrics, logs, shutdown and API key."""

    host: str = "127.0.0.1"  # --host
    port: int = 0  # --port (0: any free port); with the replica's index, it picks the core to pin to
    grpc_port: int | None = None  # --grpc-port: the Open Inference Protocol over gRPC on this port; None: off
    grpc_idle_timeout: float = 30.0  # --grpc-idle-timeout: seconds a gRPC connection with no call open is kept
    grpc_max_streams: int = 1000  # --grpc-max-streams: calls at once on one gRPC connection (HTTP/2 streams)
    limits: HttpLimits = field(default_factory=HttpLimits)  # --max-header-bytes, --max-headers, --*-timeout
    max_body_size: int = 100 * MiB  # --max-body-size; 413 beyond
    allow_cpu_fallback: bool = False  # --allow-cpu-fallback
    keep_going: bool = False  # a failed API answers 503 instead of stopping the start
    access_log: bool = True  # one log line per request
    metrics: bool = True  # Prometheus metrics (GET /metrics); off only to measure what they cost
    # Event loop and worker threads on one core once the models are loaded; None: where it helps (engine/pinner.py).
    pin_threads: bool | None = False
    graceful_timeout: float = 30.0  # seconds queued and running requests get once a shutdown begins
    hide_errors: bool = False  # 500 bodies say only "see the log" (--hide-errors)
    api_key: str | None = None  # every route but the health probes needs "Authorization: Bearer <key>"
    # Once every API is loaded: collect, then gc.freeze() what the process holds (engine/memory.py, freeze_heap).
    # `localserve serve` sets it; an App in a test process leaves the test's heap alone.
    freeze_heap: bool = False
    # glibc's malloc thresholds: held at their defaults while the APIs load, then raised so that what requests
    # free is kept for the next ones (engine/memory.py). `localserve serve` sets it unless the environment sets
    # glibc's malloc thresholds itself.
    tune_malloc: bool = False
    # AsyncAPIs open their job store and run what it holds; off for `run`, which runs its one job itself.
    async_jobs: bool = True
    # --no-async-workers: AsyncAPIs take submits and answer polls but run no job and load no code (the
    # front of a cluster whose workers, scaled on the queue, run the jobs: `export kubernetes`).
    async_workers: bool = True
    log_format: str | None = None  # --log-format (None: json unless stderr is a terminal)
    log_level: str = "info"  # --log-level
    forwarded_allow_ips: str = "127.0.0.1,::1"  # --forwarded-allow-ips: proxies whose X-Forwarded-* are applied
    # --root-path: the prefix a proxy serves us under and strips (uvicorn's); links and OpenAPI servers carry it.
    root_path: str = ""
    ssl_keyfile: Path | None = None  # --ssl-keyfile: with --ssl-certfile, HTTPS (uvicorn's names)
    ssl_certfile: Path | None = None  # --ssl-certfile
    uds: str | None = None  # --uds: serve on this Unix domain socket instead of host:port
    log_config: Path | None = None  # --log-config: a logging config file (JSON, YAML or INI) applied over ours
    cache_dir: Path | None = None  # the CLI's cache_dir_of (--cache-dir, else XDG's); None: a temporary one
    project: ProjectSettings = field(default_factory=ProjectSettings)  # what the Project context gets, with cache_dir
    # --reload: watch the project, reload what changed; a failed load (at start too) keeps serving, no pinning default.
    reload: bool = False
    # Read from the environment by the CLI (cli.options.environment_settings), never below it.
    on_kubernetes: bool = False  # KUBERNETES_SERVICE_HOST is set: a node's pods share its cores (no pinning default)
    s3_endpoint: str | None = None  # LOCALSERVE_S3_ENDPOINT (deprecated); None: botocore's own (AWS_ENDPOINT_URL_S3)
    cuda_visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES: the GPUs to spread replicas over (None: nvidia-smi)
    tracing: TraceExport | None = (
        None  # OTEL_TRACES_EXPORTER / OTEL_EXPORTER_OTLP_*ENDPOINT: a span per request; None: off
    )
    # The replicas: their count (--replicas, or the config's), then each one's place, given by the supervisor.
    replicas: int = 1  # replica processes of this serve (runtimes divide the cores among them)
    replica: int = 0  # this replica's index (--pin-threads picks the core by it and the port)
    metrics_dir: str | None = None  # prometheus_client's multiprocess folder of a serve with replicas
    # A replacement replica while a sibling serves: take connections off the shared socket only once
    # every API is loaded, so the port keeps answering 200 instead of "still loading" 503s.
    accept_when_loaded: bool = False


@dataclass(frozen=True)
class ApiOptions:
    """What one API's endpoint and model get besides its ApiConfig: where its files are, how its model runs.

    Derived from the tree once per load of an API (``ApiOptions.of``); the handlers read the first three,
    the runtimes the rest. Defaults are a model alone on this machine (a test builds one with a field or two).
    """

    project: Path = field(default_factory=Path)  # user code and relative model paths are found from here
    cache_dir: Path | None = None  # downloaded models go under it (ServeOptions.cache_dir; None: the default folder)
    s3_endpoint: str | None = None  # the S3 endpoint of s3:// models (None: botocore's own choice)
    signature_key: str | None = None  # TensorFlow: tf_signature_key
    threads: int | None = None  # intra-op threads; None = chosen from the cores of this replica
    gpu: bool = False  # compute.gpu > 0
    allow_cpu_fallback: bool = False  # --allow-cpu-fallback
    cuda_options: Mapping[str, str] = field(default_factory=dict)  # onnxruntime CUDA provider options
    replicas: int = 1  # replica processes sharing this machine's cores (ServeOptions.replicas)
    api_threads: int = 1  # the API's threads_per_process: threads that call into the model's pool
    batch_interval: float = 0.0  # seconds the engine may wait between model calls to fill a batch (0: no batching)
    batching: bool = False  # the engine stacks concurrent requests into one call (the API has `batching`)

    @classmethod
    def of(cls, api: ApiConfig, options: ServeOptions, project: Path) -> ApiOptions:
        """The options of ``api`` (in ``project``) under this server's settings."""
        return cls(
            project=project,
            cache_dir=options.cache_dir,
            s3_endpoint=options.s3_endpoint,
            signature_key=api.tf_signature_key,
            threads=api.model_threads,
            gpu=api.compute.gpu > 0,
            allow_cpu_fallback=options.allow_cpu_fallback,
            cuda_options=api.cuda_options,
            replicas=options.replicas,
            api_threads=api.threads_per_process,
            batch_interval=api.batching.batch_interval if api.batching else 0.0,
            batching=api.batching is not None,
        )
