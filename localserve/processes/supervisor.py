"""Serve on one port with one process, or with N replica processes on it (a listening socket each, on Linux).

``serve_forever`` picks: one process serves itself (``_serve``: the App through the ``Runner``,
print capture, the exit code, threads left running); with replicas the ``Supervisor``
(``replicas.py``) spawns them, and each runs ``run_replica``. A replica that dies is started again
while the others keep answering on the same port; SIGTERM/SIGINT stop every replica gracefully.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import IO

from localserve.config import ServeConfig
from localserve.errors import StartError
from localserve.logs import capture_prints
from localserve.processes.replicas import EXIT_LOAD_FAILED, ReplicaStart, Supervisor
from localserve.project.compat import enter_replica
from localserve.project.compat.hosts import serve_api_hosts
from localserve.server import ServeOptions
from localserve.server.reload import ProjectReload
from localserve.server.runner import THREADS_EXIT_WAIT, Runner

log = logging.getLogger("localserve")
# anyio's name for the threads of its pool, which watchfiles (serve --reload) and Starlette's file responses use
ANYIO_WORKER = "AnyIO worker thread"


def serve_forever(
    config: ServeConfig,
    options: ServeOptions,
    project: ProjectReload | None = None,
    *,
    sock: socket.socket | None = None,
) -> int:
    """Serve until SIGTERM/SIGINT with ``options.replicas`` processes; returns the process exit code.

    ``project``: the Project context the server runs in, entered again by ``--reload`` (one process only).
    ``sock``: the listening socket, already bound on ``options.port`` (``serve --port 0`` binds it before
    user code runs, so that ``LOCALSERVE_URL`` names the port); None: bound here.
    """
    if options.replicas == 1:
        fatal: list[str] = []
        code = _serve(config, options, sock=sock, fatal=fatal, project=project, banner=True)
        if fatal:
            raise StartError(f"The server stopped: {fatal[0]}")
        return code
    return Supervisor(config, options, sock).run()


GPU_CORES_PER_REPLICA = 4
GPU_MAX_REPLICAS = 4


def default_replicas(config: ServeConfig) -> int:
    """Replicas when ``--replicas`` is not given: the config's, or for GPU APIs one per 4 cores (at most 4).

    One process tops out near 850 req/s of a JPEG pipeline on an H100 (its decoding binds on the
    GIL); 4 processes with fixed batch sizes fed the same GPU at 2,850 req/s (ResNet-50, one H100 with
    16 cores, 2026-11-23; ``benchmarks/image_servers.py`` measures it). Each
    replica still runs one request's user code at a time unless ``threads_per_process`` says otherwise.
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
    fatal: list[str] | None = None,
    on_ready: Callable[[], None] | None = None,
    project: ProjectReload | None = None,
    banner: bool = False,
) -> int:
    """Serve ``config`` in this process until stopped (on ``sock`` when bound already); the exit code.

    ``banner``: log the startup banner once listening (a replica's is the supervisor's).
    """
    fatal = [] if fatal is None else fatal
    runner = Runner(config, options, project)
    app = runner.app
    server = runner.http_server(
        on_loaded=(lambda: on_ready() if app.ready else None) if on_ready else None,
        on_listening=(lambda: _log_lines(runner.banner())) if banner else None,
    )
    if options.uds is None:  # api-<name> hosts resolve to a TCP port
        # Cortex 0.25-0.33 docs, *Predictors*: other APIs at http://api-<name>:8888
        app.host_names = serve_api_hosts(config, options.port, sock, lambda: server)
    stopped: int | None = None
    try:
        with capture_prints():  # what handlers print becomes log lines with their request id
            server.run(sockets=[sock] if sock is not None else None)
    except SystemExit as exc:  # uvicorn's own exit: the address could not be bound (STARTUP_FAILURE, 3)
        stopped = exc.code if isinstance(exc.code, int) else 1
    if runner.failure is not None:
        fatal.append(str(runner.failure))
    code = stopped if stopped is not None else EXIT_LOAD_FAILED if fatal else 0
    exit_past_threads(code, app.join_threads(THREADS_EXIT_WAIT))
    if stopped is not None:
        sys.exit(stopped)
    return code


def exit_past_threads(code: int, busy: list[str]) -> None:
    """End the process with ``code`` at once if API threads (``busy``) or user code's non-daemon threads still run.

    A load or a request still running, maybe in a runtime's native code, would lose what it runs on
    to the interpreter's exit (onnxruntime aborts: "terminate called without an active exception",
    exit 134); a non-daemon thread would make Python wait for it forever. Else this returns.
    """
    for thread in threading.enumerate():
        if thread.name == ANYIO_WORKER:  # told to stop as the server's loop ended: ours, not user code's
            thread.join(THREADS_EXIT_WAIT)
            busy = [*busy, thread.name] if thread.is_alive() else busy
    leftover = [
        t.name
        for t in threading.enumerate()
        if not t.daemon and t is not threading.main_thread() and t.name != ANYIO_WORKER
    ]
    if busy:
        log.info("exiting while these threads still run: %s", ", ".join(busy))
    if leftover:
        log.warning("exiting although user code left threads running: %s", ", ".join(leftover))
    if busy or leftover:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _log_lines(lines: list[str]) -> None:
    for line in lines:
        log.info("%s", line)


def run_replica(start: ReplicaStart, sock: socket.socket, ready: IO[bytes]) -> None:
    """The body of a replica process: serve on ``sock``; write one byte to ``ready`` once every API is loaded."""
    config, options = start.config, start.options
    enter_replica(config.project, config.workdir, config.mnt_mode)
    from localserve.logs import configure_logging

    configure_logging(options.log_format, options.log_level, config_file=options.log_config)

    def on_ready() -> None:
        try:
            ready.write(b"r")
            ready.close()
        except OSError:  # the supervisor is gone
            pass

    fatal: list[str] = []
    code = _serve(config, options, sock=sock, on_ready=on_ready, fatal=fatal)
    for reason in fatal:  # the supervisor reports the exit, and refers to this log for why
        log.error("%s", reason)
    sys.exit(code)
