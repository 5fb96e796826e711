"""A replica process's entry point: ``python -m localserve.cli.replica SETTINGS_FD SOCKET_FD READY_FD``.

The supervisor spawns it (``localserve.processes.replicas``): it reads ``sys.path`` and then a
``ReplicaStart`` from the settings pipe, serves on the inherited listening socket, and writes one
byte to the ready pipe once every API is loaded; its exit code tells the supervisor how it ended.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import sys

from localserve.cli.exits import exit_past_threads
from localserve.metrics import check_multiprocess_dir
from localserve.processes.supervisor import run_replica

log = logging.getLogger("localserve")


def main(argv: list[str]) -> int:
    """Read the settings from the supervisor's pipe, serve on the inherited socket; the exit code."""
    settings_fd, socket_fd, ready_fd = (int(arg) for arg in argv)
    with os.fdopen(settings_fd, "rb") as settings:
        sys.path[:] = pickle.load(settings)
        start = pickle.load(settings)
    if start.options.metrics_dir is not None:  # the process's edge: its environment is read here, not below
        check_multiprocess_dir(start.options.metrics_dir, os.environ)
    sock = socket.socket(fileno=socket_fd)
    ready = os.fdopen(ready_fd, "wb", buffering=0)
    stopped = run_replica(start, sock, ready)
    if stopped.failure is not None:  # the supervisor reports the exit, and refers to this log for why
        log.error("%s", stopped.failure)
    exit_past_threads(stopped.code, stopped.busy)
    return stopped.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
