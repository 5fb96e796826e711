"""Serve on one port with one process, or with N replica processes on it (a listening socket each, on Linux).

``serve_forever`` picks: one process serves itself (``_serve``: the App through the ``Runner``,
print capture, the exit code, threads left running); with replicas the ``Supervisor``
(``replicas.py``) spawns them, and each runs ``run_replica``. A replica that dies is started again
while the others keep answering on the same port; SIGTERM/SIGINT stop every replica gracefully.
Both return a ``Stopped``: the process ends in the CLI (``cli/exits.py``), never here.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from localserve.config import ServeConfig
from localserve.logs import capture_prints, configure_logging
from localserve.processes.replicas import EXIT_LOAD_FAILED, ReplicaStart, Supervisor
from localserve.project.compat import enter_replica
from localserve.project.compat.hosts import serve_api_hosts
from localserve.server import ServeOptions
from localserve.server.reload import ProjectReload
from localserve.server.runner import THREADS_EXIT_WAIT, Runner

log = logging.getLogger("localserve")


@dataclass(frozen=True)
class Stopped:
    """How serving ended: the process's exit code, the names of API threads still running (a load or a
    request in native code that the interpreter's exit would abort under), and why the start failed."""

    code: int
    busy: list[str] = field(default_factory=list)
    failure: str | None = None


def serve_forever(
    config: ServeConfig,
    options: ServeOptions,
    project: ProjectReload | None = None,
    *,
    sock: socket.socket | None = None,
) -> Stopped:
    """Serve until SIGTERM/SIGINT with ``options.replicas`` processes; how it ended.

    ``project``: the Project context the server runs in, entered again by ``--reload`` (one process only).
    ``sock``: the listening socket, already bound on ``options.port`` (``serve --port 0`` binds it before
    user code runs, so that ``LOCALSERVE_URL`` names the port); None: bound here.
    """
    if options.replicas == 1:
        return _serve(config, options, sock=sock, project=project, banner=True)
    return Stopped(Supervisor(config, options, sock).run())


GPU_CORES_PER_REPLICA = 4
GPU_MAX_REPLICAS = 4


def default_replicas(config: ServeConfig) -> int:
    """Replicas when ``--replicas`` is not given: the config's, or for GPU APIs one per 4 cores (at most 4).

    One process cannot feed a GPU (its JPEG decoding binds on the GIL), while a few with fixed batch sizes can
    (benchmarks/README.md). Each replica still runs one request's user code at a time unless ``threads_per_process``
    says otherwise.
    """
    configured = max(api.processes for api in config.apis)
    explicit = any(api.compute.init_replicas is not None or api.compute.min_replicas != 1 for api in config.apis)
    if explicit or not any(api.compute.gpu > 0 for api in config.apis):
        return configured
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        cores = os.cpu_count() or 1
    return max(configured, min(GPU_MAX_REPLICAS, cores // GPU_CORES_PER_REPLICA))


def _serve(
    config: ServeConfig,
    options: ServeOptions,
    *,
    sock: socket.socket | None,
    on_ready: Callable[[], None] | None = None,
    project: ProjectReload | None = None,
    banner: bool = False,
) -> Stopped:
    """Serve ``config`` in this process until stopped (on ``sock`` when bound already); how it ended.

    ``banner``: log the startup banner once listening (a replica's is the supervisor's).
    """
    runner = Runner(config, options, project)
    app = runner.app
    server = runner.http_server(
        on_loaded=(lambda: on_ready() if app.ready else None) if on_ready else None,
        on_listening=(lambda: _log_lines(runner.banner())) if banner else None,
    )
    if options.uds is None:  # api-<name> hosts resolve to a TCP port
        app.host_names = serve_api_hosts(config, options.port, sock, lambda: server)
    stopped: int | None = None
    try:
        with capture_prints():  # what handlers print becomes log lines with their request id
            server.run(sockets=[sock] if sock is not None else None)
    except SystemExit as exc:  # uvicorn's own exit: the address could not be bound (STARTUP_FAILURE, 3)
        stopped = exc.code if isinstance(exc.code, int) else 1
    busy = app.join_threads(THREADS_EXIT_WAIT)
    if stopped is not None:  # uvicorn's code, whatever the APIs did
        return Stopped(stopped, busy)
    if runner.failure is not None:
        return Stopped(EXIT_LOAD_FAILED, busy, f"The server stopped: {runner.failure}")
    return Stopped(0, busy)


def _log_lines(lines: list[str]) -> None:
    for line in lines:
        log.info("%s", line)


def run_replica(start: ReplicaStart, sock: socket.socket, ready: IO[bytes]) -> Stopped:
    """The body of a replica process: serve on ``sock``; write one byte to ``ready`` once every API is loaded."""
    config, options = start.config, start.options
    enter_replica(config.project, config.workdir, config.mnt_mode)
    configure_logging(options.log_format, options.log_level, config_file=options.log_config)

    def on_ready() -> None:
        try:
            ready.write(b"r")
            ready.close()
        except OSError:  # the supervisor is gone
            pass

    return _serve(config, options, sock=sock, on_ready=on_ready)
