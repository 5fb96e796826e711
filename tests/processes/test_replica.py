"""ReplicaProcess: ready only once the replica writes its byte to the ready pipe, and its exit code as the
supervisor reads it. The replica is a real child process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from localserve.processes.replica import ReplicaProcess
from tests.conftest import wait_until

CHILD = "import os, sys\nsys.stdin.readline()\nos.write(int(sys.argv[1]), b'1')\nsys.stdin.readline()\n"


def test_a_replica_is_ready_once_it_writes_to_the_ready_pipe_and_its_exit_code_is_the_signal() -> None:
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(write_fd)], stdin=subprocess.PIPE, pass_fds=(write_fd,))
    os.close(write_fd)
    stdin = child.stdin
    assert stdin is not None
    replica = ReplicaProcess(child, read_fd)
    try:
        assert replica.is_alive() and replica.exitcode is None
        assert not replica.is_ready()  # nothing written yet: not ready, and the read does not block
        stdin.write(b"loaded\n")
        stdin.flush()
        wait_until(replica.is_ready, "the replica said it is ready")
        assert replica._ready_fd == -1  # the pipe is closed once read
        assert replica.is_ready()  # and stays ready
        replica.kill()
        replica.join(60)
        assert not replica.is_alive()
        assert replica.exitcode == -signal.SIGKILL
    finally:
        child.kill()
        child.wait(60)
        stdin.close()
        replica.close()
