"""N replica processes on one port: started, watched, restarted with backoff, stopped together.

The parent binds the port and hands each replica its listening socket (an ``SO_REUSEPORT`` group on Linux). A replica is
a fresh ``python -m localserve.cli.replica``, never forked (no half-initialised runtime inherited); its settings travel
pickled through a pipe, and its environment gains only ``PROMETHEUS_MULTIPROC_DIR`` and, with GPUs,
``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from localserve.config import ServeConfig
from localserve.config.options import ServeOptions
from localserve.errors import StartError
from localserve.metrics import MULTIPROC_ENV, mark_process_dead, prepare_metrics_dir
from localserve.processes.listeners import bind_socket, close_socket, spreads_connections
from localserve.processes.replica import ReplicaProcess
from localserve.server.banner import banner_lines
from localserve.server.shutdown import replica_deadline

log = logging.getLogger("localserve")
EXIT_LOAD_FAILED = 3  # a replica's exit code when its APIs could not load (it stops the start)
FIRST_BACKOFF = 0.5  # seconds before the first restart of a replica; doubled at each death in a row
MAX_BACKOFF = 30.0
STABLE_AFTER = 30.0  # seconds ready after which a death is counted as the first of a new series
START_ATTEMPTS = 3  # deaths in a row before ever being ready that stop the start


@dataclass(frozen=True)
class ReplicaStart:
    """Everything a replica process needs, sent to it through a pipe (see ``localserve.cli.replica``)."""

    config: ServeConfig
    options: ServeOptions  # the serve's, with the replica's index and count and the metrics folder


def visible_gpus(visible: str | None) -> list[str]:
    """GPU ids replicas may be spread over: ``visible`` (the CLI's CUDA_VISIBLE_DEVICES), else what nvidia-smi lists."""
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU ")]


class Supervisor:
    """N replica processes on one socket; a replica that dies is restarted with exponential backoff.

    A replica that dies ``START_ATTEMPTS`` times in a row without ever becoming ready (it
    crashes while importing or loading) stops the start with the reason, rather than
    restarting forever while the port answers nothing.
    """

    def __init__(self, config: ServeConfig, options: ServeOptions, sock: socket.socket | None = None) -> None:
        self.config = config
        self.options = options
        self.sock = sock  # the socket when bound already (serve --port 0); else run() binds it
        self.sockets: list[socket.socket] = []  # each replica's listening socket (one shared, or one each)
        self.address = (options.host, options.port)  # the port taken, once bound (``listening_sockets``)
        self.own_sockets = options.replicas > 1 and spreads_connections(options.uds)
        self.replicas = replicas = options.replicas
        self.processes: list[ReplicaProcess | None] = [None] * replicas
        self.ready_since: list[float | None] = [None] * replicas
        self.deaths = [0] * replicas  # deaths in a row (reset once a replica stays ready STABLE_AFTER)
        self.unready_deaths = [0] * replicas  # deaths in a row before ever being ready
        self.restarts = [0] * replicas
        self.stopping = False
        self.failure: str | None = None
        self.gpus = (
            visible_gpus(options.cuda_visible_devices) if any(api.compute.gpu > 0 for api in config.apis) else []
        )
        self.metrics_dir = ""  # made by run(): one fresh folder per serve

    def replica_options(self, index: int) -> ServeOptions:
        """The options of replica ``index``: the serve's, with its place among the replicas.

        A replacement started while another replica is ready accepts connections only once loaded:
        the kernel would otherwise hand it connections that it could only answer "still loading".
        """
        sibling_ready = any(
            since is not None and (process := self.processes[i]) is not None and process.is_alive()
            for i, since in enumerate(self.ready_since)
            if i != index
        )
        return dataclasses.replace(
            self.options,
            replica=index,
            metrics_dir=self.metrics_dir or None,
            accept_when_loaded=sibling_ready,
        )

    def replica_env(self, index: int) -> dict[str, str]:
        """What replica ``index``'s environment adds to this process's (the only variables localserve sets)."""
        env = {}
        if self.metrics_dir:
            env[MULTIPROC_ENV] = self.metrics_dir
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[index % len(self.gpus)]
        return env

    def start(self, index: int) -> None:
        """Start replica ``index`` on its listening socket, its settings sent through a pipe."""
        sock = self.sockets[index]
        start = ReplicaStart(self.config, self.replica_options(index))
        settings_r, settings_w = os.pipe()
        ready_r, ready_w = os.pipe()
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "localserve.cli.replica",
                    str(settings_r),
                    str(sock.fileno()),
                    str(ready_w),
                ],
                env={**os.environ, **self.replica_env(index)},
                pass_fds=(settings_r, sock.fileno(), ready_w),
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(settings_r)
            os.close(ready_w)
        try:
            with os.fdopen(settings_w, "wb") as settings:
                pickle.dump(sys.path, settings)  # read first: the project's folders, to unpickle the rest
                pickle.dump(start, settings)
        except BrokenPipeError:  # it died at once; the run loop sees it
            pass
        previous = self.processes[index]
        if previous is not None:
            previous.close()
        self.processes[index] = ReplicaProcess(process, ready_r)
        self.ready_since[index] = None
        gpu = f" on GPU {self.replica_env(index)['CUDA_VISIBLE_DEVICES']}" if self.gpus else ""
        log.info("replica %d started (pid %s)%s", index, process.pid, gpu)

    def backoff(self, index: int) -> float:
        """Seconds before restarting replica ``index``: 0.5, 1, 2, 4 ... up to 30 for deaths in a row."""
        return float(min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** max(0, self.deaths[index] - 1)))

    def record_death(self, index: int, exitcode: int | None, now: float) -> str | None:
        """Count a death of replica ``index``; the reason to stop the start, or None to restart it."""
        since = self.ready_since[index]
        if since is not None and now - since >= STABLE_AFTER:
            self.deaths[index] = 0
        self.deaths[index] += 1
        if exitcode == EXIT_LOAD_FAILED:
            return f"replica {index} could not load its APIs (see the log above)"
        if since is not None:
            self.unready_deaths[index] = 0
            return None
        self.unready_deaths[index] += 1
        if self.unready_deaths[index] >= START_ATTEMPTS:
            return (
                f"replica {index} {_exit_text(exitcode)} before it was ready, {START_ATTEMPTS} times in a row "
                "(see the log above: the handler, its imports or the model crash the process)"
            )
        return None

    def run(self) -> int:
        """Serve until stopped: start the replicas, restart those that die (with backoff), stop them all at the end; the exit code."""
        self.metrics_dir = tempfile.mkdtemp(prefix="localserve-metrics-")
        prepare_metrics_dir(self.metrics_dir)
        sock = self.sock or bind_socket(self.options.host, self.options.port, self.options.uds)
        self.log_banner(sock)
        self.sockets = self.listening_sockets(sock)

        def stop(signum: int, frame: Any) -> None:
            self.stopping = True

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for index in range(self.replicas):
                self.start(index)
            next_start: dict[int, float] = {}
            while not self.stopping:
                time.sleep(0.2)
                for index, process in enumerate(self.processes):
                    if process is not None and not self.stopping:
                        self._watch(index, process, next_start)
        finally:
            self.shutdown()
            self._release()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.failure is not None:
            raise StartError(f"The server stopped: {self.failure}.")
        return 0

    def _release(self) -> None:
        """After ``shutdown``: the replicas' pipes, the listening sockets and the metrics folder."""
        for process in self.processes:
            if process is not None:
                process.close()
        for sock in set(self.sockets):
            close_socket(sock, self.options.uds)
        shutil.rmtree(self.metrics_dir, ignore_errors=True)

    def listening_sockets(self, sock: socket.socket) -> list[socket.socket]:
        """Each replica's listening socket: ``sock`` for all, or (``own_sockets``) one each on its port.

        ``sock`` was bound without ``SO_REUSEPORT``, which proves the port free; it is closed, and the
        replicas' sockets, bound with it, listen at once (connections wait there for the replicas' loops).
        """
        if not self.own_sockets:
            return [sock] * self.replicas
        self.address = (self.options.host, int(sock.getsockname()[1]))
        sock.close()
        return [bind_socket(*self.address, group=True) for _ in range(self.replicas)]

    def log_banner(self, sock: socket.socket) -> None:
        """The startup banner (``server.banner``), with the port the shared socket is bound to."""
        port = None if self.options.uds is not None else int(sock.getsockname()[1])
        names, grpc = [api.name for api in self.config.apis], self.options.grpc_port
        for i, line in enumerate(banner_lines(self.config.source, names, self.options, port=port, grpc_port=grpc)):
            log.info("%s%s", line, f" with {self.replicas} replicas" if i == 0 else "")

    def _watch(self, index: int, process: ReplicaProcess, next_start: dict[int, float]) -> None:
        """One look at replica ``index``: ready, dead (restart after a backoff, or stop the start), or restarted."""
        now = time.monotonic()
        if process.is_alive():
            if self.ready_since[index] is None and process.is_ready():
                self.ready_since[index] = now
            return
        if index in next_start:
            if now >= next_start[index]:
                del next_start[index]
                self.restarts[index] += 1
                if self.own_sockets:  # bound only: it joins the group when the replacement listens, once loaded
                    self.sockets[index] = bind_socket(*self.address, group=True, listen=False)
                self.start(index)
            return
        if self.ready_since[index] is None and process.is_ready():
            self.ready_since[index] = now  # became ready just before dying
        self._forget(process)
        if self.own_sockets:  # the kernel sends new connections to the siblings; those waiting in it are reset
            self.sockets[index].close()
        reason = self.record_death(index, process.exitcode, now)
        if reason is not None:
            log.error("%s; stopping", reason)
            self.failure, self.stopping = reason, True
            return
        delay = self.backoff(index)
        log.warning(
            "replica %d (pid %s) %s; restarting in %.1f s", index, process.pid, _exit_text(process.exitcode), delay
        )
        next_start[index] = now + delay

    def _forget(self, process: ReplicaProcess) -> None:
        if process.pid is None:
            return
        mark_process_dead(process.pid, self.metrics_dir)

    def shutdown(self) -> None:
        """SIGTERM every replica, wait for the graceful timeout, then kill those left."""
        alive = [p for p in self.processes if p is not None and p.is_alive()]
        for process in alive:
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + replica_deadline(self.options.graceful_timeout)
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("replica pid %s did not stop in time; killing it", process.pid)
                process.kill()
                process.join(5)


def _exit_text(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
