"""The listening sockets of ``serve``: a port in use named before the project loads, a stale Unix socket
replaced, its file removed at the end."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from localserve.errors import StartError
from localserve.processes.listeners import bind_socket, check_port_free, close_socket


def test_a_port_in_use_is_named_with_the_way_out_and_a_free_one_passes() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(StartError) as in_use:
            check_port_free("127.0.0.1", port)
        with pytest.raises(StartError):
            bind_socket("127.0.0.1", port)
    assert str(in_use.value) == (
        f"Port {port} on 127.0.0.1 is already in use (another server listens there): stop it, or serve on "
        "another port with --port (--port 0 picks a free one)."
    )
    check_port_free("127.0.0.1", port)  # closed: free again


def test_an_address_that_cannot_be_bound_is_named_with_the_reason(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-folder" / "s.sock")
    with pytest.raises(StartError, match=f"Cannot listen on {missing}: No such file or directory"):
        bind_socket("127.0.0.1", 0, missing)


def test_a_stale_unix_socket_is_replaced_and_removed_when_closed(tmp_path: Path) -> None:
    uds = str(tmp_path / "s.sock")
    stale = bind_socket("127.0.0.1", 0, uds)
    stale.close()  # an earlier run's file stays behind
    assert stat.S_ISSOCK(os.stat(uds).st_mode)
    sock = bind_socket("127.0.0.1", 0, uds)
    assert sock.getsockname() == uds and sock.get_inheritable()
    assert stat.S_IMODE(os.stat(uds).st_mode) == 0o666
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(uds)  # it listens
    close_socket(sock, uds)
    assert sock.fileno() == -1 and not os.path.exists(uds)
