"""The entry point of a replica process: ``python -m localserve.replica SETTINGS_FD SOCKET_FD READY_FD``.

The supervisor spawns it (``localserve.supervisor``): it reads ``sys.path`` and then a
``ReplicaStart`` from the settings pipe, serves on the inherited listening socket, and writes one
byte to the ready pipe once every API is loaded.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys


def main(argv: list[str]) -> None:
    """A replica process: read its settings from the supervisor's pipe, serve on the inherited socket."""
    settings_fd, socket_fd, ready_fd = (int(arg) for arg in argv)
    with os.fdopen(settings_fd, "rb") as settings:
        sys.path[:] = pickle.load(settings)
        start = pickle.load(settings)
    if start.options.metrics_dir is not None:  # the process's edge: its environment is read here, not below
        from localserve.metrics import check_multiprocess_dir

        check_multiprocess_dir(start.options.metrics_dir, os.environ)
    sock = socket.socket(fileno=socket_fd)
    ready = os.fdopen(ready_fd, "wb", buffering=0)
    from localserve.supervisor import run_replica

    run_replica(start, sock, ready)


if __name__ == "__main__":
    main(sys.argv[1:])
