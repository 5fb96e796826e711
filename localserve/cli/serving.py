"""`localserve serve`: the HTTP server (and gRPC with --grpc-port), one process or replicas."""

from __future__ import annotations

import gc
import os
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from localserve.cli.conventions import handler_command
from localserve.cli.exits import exit_past_threads
from localserve.cli.listen import check_listen, listen_options, server_url
from localserve.cli.options import (
    ApiFlags,
    cache_dir_of,
    fail_on_errors,
    load,
    project_options,
    project_settings,
    run_api_options,
    serve_options,
    setup_logging,
)
from localserve.errors import ConfigError, StartError
from localserve.processes.listeners import bind_socket, check_port_free
from localserve.project.compat.context import Project
from localserve.protocols.v2.grpc.versions import grpc_problem, installed_versions

if TYPE_CHECKING:
    from localserve.config import ServeConfig
    from localserve.processes.supervisor import Stopped


@handler_command()
@project_options
@run_api_options
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
    "8081 (needs the grpc extra: pip install 'localserve[grpc]', protobuf 5.26.1 to 7.x). Default: off.",
)
@click.option(
    "--grpc-idle-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds a gRPC connection with no call open is kept before the server closes it (clients reconnect).",
)
@click.option(
    "--grpc-max-streams",
    default=1000,
    show_default=True,
    type=click.IntRange(min=1),
    help="Calls at once on one gRPC connection (HTTP/2 streams); clients queue the others.",
)
@click.option(
    "--max-body-size",
    default=100 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest request body in bytes (413 beyond); over gRPC, the largest message, and the most bytes the "
    "messages of one connection's unanswered calls may hold (RESOURCE_EXHAUSTED beyond).",
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
@click.option(
    "--reload",
    is_flag=True,
    help="Watch the project and reload what changed (code, config, .env, requirements, model files); a bad edit "
    "keeps the last good version serving. One process: not with --replicas.",
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
    "1 ms of CPU, with 2 cores or more, no AsyncAPI and not on Kubernetes (see the docs' execution model, Pinning); else off.",
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
    help="Seconds for a request head to arrive (408 beyond); idle new connections are closed after it (gRPC "
    "ones that have not sent HTTP/2's preface too).",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for a request body to arrive once its head is in (408 beyond); a gRPC call's message, from the "
    "call's start (DEADLINE_EXCEEDED beyond).",
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
    "--async-workers/--no-async-workers",
    default=True,
    show_default=True,
    help="Run AsyncAPI jobs here. --no-async-workers: take submits and answer polls only, without loading the "
    "API's code (a cluster's front, with workers scaled on the shared queue: export kubernetes).",
)
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
@listen_options
@fail_on_errors
def serve(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    settings: dict[str, Any],
    api_names: tuple[str, ...],
    **serving: Any,
) -> None:
    """Serve the project's APIs over HTTP (http://127.0.0.1:8888/ by default).

    -h is --handler, as in ABEJA's run-local; help is --help.
    """
    # ``settings``: the other flags, named as the fields of ServeOptions and HttpLimits (--host, --port, ...).
    settings.update(serving)
    check_listen(settings)
    setup_logging(settings, config_file=settings["log_config"])
    grpc_port, port = settings["grpc_port"], settings["port"]
    if grpc_port is not None and grpc_port == port and port != 0:  # 0: each its own free port
        raise ConfigError(f"--grpc-port {grpc_port} is the HTTP port (--port); give gRPC a port of its own, e.g. 8081.")
    problem = grpc_problem(installed_versions()) if grpc_port is not None else None
    if problem:  # protobuf's generated code would load on a protobuf older than itself, and fail later
        raise ConfigError(problem)
    if settings["reload"] and settings["replicas"] not in (None, 1):  # as uvicorn refuses --reload with --workers
        raise ConfigError(
            f"--reload serves from one process, which it reloads in place; drop --replicas {settings['replicas']}."
        )

    # Absolute: --reload reads them again from inside the project, whose folder is then the working directory.
    project, config_file = project.absolute(), config_file.absolute() if config_file is not None else None

    def read() -> ServeConfig:
        config = load(project, config_file, flags)
        return config.only(api_names) if api_names else config

    config = read()
    # --port 0: bound here, before user code runs, so that LOCALSERVE_URL carries the port that serves.
    sock = _bind_free_port(settings)
    # The tree's pieces the Project needs, decided before it is entered; the rest is read inside (serve_options).
    settings["project"] = project_settings(settings, url=server_url(settings))
    settings["cache_dir"] = cache_dir_of(settings["cache_dir"])
    context = Project(
        config,
        settings["project"],
        settings["cache_dir"],
        reread=read if settings["reload"] else None,  # --reload reads the config again, with these flags
    )
    try:
        with context as entered:
            stopped = _serve(entered, settings, context, sock)
            exit_past_threads(stopped.code, stopped.busy)  # in the project still, as the threads run in it
    finally:
        if sock is not None:
            sock.close()
    if stopped.failure is not None:
        raise StartError(stopped.failure)
    if stopped.code:
        sys.exit(stopped.code)


def _bind_free_port(settings: dict[str, Any]) -> socket.socket | None:
    """With ``--port 0`` (and no ``--uds``): a free port bound and listening, ``settings["port"]`` set to it.
    Another port is found free or not here, before user code loads (uvicorn would say it after, in errno's words)."""
    if settings["uds"] is not None:
        return None
    if settings["port"] != 0:
        check_port_free(settings["host"], settings["port"])
        return None
    sock = bind_socket(settings["host"], 0)
    settings["port"] = int(sock.getsockname()[1])
    return sock


def _serve(config: ServeConfig, settings: dict[str, Any], context: Project, sock: socket.socket | None) -> Stopped:
    """Inside the project: the settings tree built, then serve until stopped; how it ended.

    The garbage collector is off while the process starts: what start-up imports and loads lives as long as the
    process, so collecting only lengthens the start. The engine turns it on once every API is loaded (``freeze_heap``);
    a supervisor of replicas, which loads nothing, once it has its settings; ``--reload`` (no freeze) never turns it off.
    """
    if not settings["reload"]:
        gc.disable()
    try:
        # lazy: numpy, imported in the project: it starts threads, and /mnt/project's mount namespace needs none
        from localserve.engine.memory import set_by_environment
        from localserve.processes.supervisor import default_replicas, serve_forever

        api_key, replicas = settings.pop("api_key") or None, settings.pop("replicas")
        replicas = 1 if settings["reload"] else replicas or default_replicas(config)
        options = serve_options(
            os.environ,
            **settings,
            api_key=api_key,
            replicas=replicas,
            freeze_heap=not settings["reload"],  # --reload: a frozen heap would keep every replaced version
            tune_malloc=not set_by_environment(os.environ),
        )
        if options.replicas > 1:
            gc.enable()
        return serve_forever(config, options, context if options.reload else None, sock=sock)
    finally:
        gc.enable()  # however serving ended (a start that failed never reached freeze_heap)
