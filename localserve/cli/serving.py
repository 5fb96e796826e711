"""`localserve serve`: the HTTP server (and gRPC with --grpc-port), one process or replicas."""

from __future__ import annotations

import os
import sys
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localserve.cli.options import (
    ApiFlags,
    api_options,
    api_settings,
    environment_settings,
    fail_on_errors,
    load,
    project_options,
    project_settings,
    setup_logging,
)
from localserve.compat.context import Project
from localserve.errors import ConfigError

if TYPE_CHECKING:
    from localserve.config import ServeConfig


@click.command()
@project_options
@api_options
@click.option("--api", "api_names", multiple=True, help="Serve only this API of the config (repeatable).")
# The Docker image sets LOCALSERVE_HOST (and may set LOCALSERVE_PORT): arguments after the image
# name replace its CMD, and must not lose the address that `docker run -p` reaches.
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="LOCALSERVE_HOST",
    help="Address to bind (0.0.0.0 for all).",
)
@click.option("--port", default=8888, show_default=True, envvar="LOCALSERVE_PORT", type=click.IntRange(0, 65535))
@click.option(
    "--grpc-port",
    type=click.IntRange(0, 65535),
    help="Also serve the Open Inference Protocol over gRPC (inference.GRPCInferenceService) on this port, e.g. "
    "8081 (needs the grpc extra: pip install 'localserve[grpc]'). Default: off.",
)
@click.option(
    "--max-body-size",
    default=100 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest request body in bytes (413 beyond).",
)
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    help="Processes on one port (default: the largest init_replicas or min_replicas of the APIs, times "
    "processes_per_replica; a GPU API without one runs a replica per 4 cores, at most 4; else 1).",
)
@click.option(
    "--graceful-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds in-flight requests get to finish on SIGTERM/SIGINT.",
)
@click.option("--keep-going", is_flag=True, help="Keep serving the other APIs when one fails to load (it answers 503).")
@click.option("--access-log/--no-access-log", default=True, show_default=True, help="One log line per request.")
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Prometheus metrics at /metrics (--no-metrics only to measure their cost).",
)
@click.option(
    "--pin-threads/--no-pin-threads",
    default=None,
    help="Run the event loop and the worker threads on one core once the models are loaded. Default: on "
    "when every API is a model with one thread on CPU (request_handler or raw model) whose requests measure under "
    "1 ms of CPU, with 2 cores or more, no AsyncAPI and not on Kubernetes (docs/reference.md, item 22); else off.",
)
@click.option(
    "--max-header-bytes",
    default=64 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request head (request line and headers) in bytes (431 beyond).",
)
@click.option(
    "--max-headers", default=100, show_default=True, type=click.IntRange(min=1), help="Most header fields (431 beyond)."
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for a request head to arrive (408 beyond); idle new connections are closed after it.",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for a request body to arrive once its head is in (408 beyond).",
)
@click.option(
    "--write-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds an answer may wait on a client that reads none of it (the send buffer full); the connection "
    "is closed beyond.",
)
@click.option("--hide-errors", is_flag=True, help="500 bodies carry only the request id, not the error's text.")
@click.option(
    "--api-key",
    envvar="LOCALSERVE_API_KEY",
    help="Require 'Authorization: Bearer <key>' on every route but /healthz and /readyz (401 otherwise).",
)
@click.option(
    "--forwarded-allow-ips",
    envvar=["LOCALSERVE_FORWARDED_ALLOW_IPS", "FORWARDED_ALLOW_IPS"],
    default="127.0.0.1,::1",
    show_default=True,
    help="Comma-separated addresses (or *) of the proxies whose X-Forwarded-For/-Proto the server trusts, as uvicorn's.",
)
@fail_on_errors
def serve(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    api_names: tuple[str, ...],
    **settings: Any,
) -> None:
    """Serve the project's APIs over HTTP (http://127.0.0.1:8888/ by default)."""
    # ``settings``: the other flags, named as the fields of ServeOptions and HttpLimits (--host, --port, ...).
    setup_logging(flags)
    grpc_port, port = settings["grpc_port"], settings["port"]
    if grpc_port is not None and grpc_port == port:
        raise ConfigError(f"--grpc-port {grpc_port} is the HTTP port (--port); give gRPC a port of its own, e.g. 8081.")
    if grpc_port is not None and (find_spec("grpc") is None or find_spec("google.protobuf") is None):
        raise ConfigError(
            "--grpc-port needs grpcio and protobuf, which are not installed: pip install 'localserve[grpc]'."
        )
    config = load(project, config_file, flags)
    if api_names:
        config = config.only(api_names)
    host, port = settings["host"], settings["port"]
    display_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    with Project(config, project_settings(flags, quiet=False, url=f"http://{display_host}:{port}")) as config:
        code = _serve(config, flags, settings)
    if code:
        sys.exit(code)


def _serve(config: ServeConfig, flags: ApiFlags, settings: dict[str, Any]) -> int:
    """Inside the project: the settings tree built, then serve until stopped; the exit code."""
    # Imported in the project: numpy starts threads, and /mnt/project's mount namespace needs none.
    from localserve.server import HttpLimits, ServeOptions
    from localserve.supervisor import default_replicas, serve_forever

    limits = HttpLimits(**{name: settings.pop(name) for name in HttpLimits.__dataclass_fields__})
    api_key, replicas = settings.pop("api_key") or None, settings.pop("replicas") or default_replicas(config)
    options = ServeOptions(
        **settings,
        limits=limits,
        api_key=api_key,
        replicas=replicas,
        freeze_heap=True,
        **api_settings(flags),
        **environment_settings(os.environ),
    )
    return serve_forever(config, options)
