"""``ReplicaProcess``, the supervisor's handle on one replica process.

Spawned (``localserve.processes.replicas``) as ``python -m localserve.cli.replica SETTINGS_FD SOCKET_FD READY_FD``, it
reads ``sys.path`` and a ``ReplicaStart`` from the settings pipe, serves on the inherited socket, and writes one byte to
the ready pipe once every API is loaded.
"""

from __future__ import annotations

import os
import subprocess


class ReplicaProcess:
    """One running replica: its process and the pipe on which it says it is ready."""

    def __init__(self, process: subprocess.Popen[bytes], ready_fd: int) -> None:
        self.process = process
        self.pid: int | None = process.pid
        self._ready_fd = ready_fd
        self._ready = False
        os.set_blocking(ready_fd, False)

    @property
    def exitcode(self) -> int | None:
        """None while it runs; its exit code, or minus the signal that killed it."""
        return self.process.poll()

    def is_alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def is_ready(self) -> bool:
        """Whether it has said it is ready (every API loaded), now or before."""
        if not self._ready and self._ready_fd >= 0:
            try:
                self._ready = bool(os.read(self._ready_fd, 1))
            except BlockingIOError:
                return False
            self.close()
        return self._ready

    def close(self) -> None:
        """Close the readiness pipe (once it has been read, or when the replica is gone)."""
        if self._ready_fd >= 0:
            os.close(self._ready_fd)
            self._ready_fd = -1

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the process to end."""
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def kill(self) -> None:
        """SIGKILL the process."""
        self.process.kill()
