"""The listening sockets of ``serve``: one for a lone process, and for replicas one each, in a group.

Replicas sharing one listening socket do not share its connections: the first event loop to wake accepts every
connection waiting, a whole burst. On Linux, sockets bound to one port with ``SO_REUSEPORT`` form a group over which the
kernel spreads new connections by a hash of the client's address, so each replica gets its own socket and about its
share of the clients.

When a replica dies its socket closes (connections not yet accepted are reset) and the kernel sends new ones to its
siblings; its replacement's fresh socket joins the group once loaded and listening. Elsewhere (macOS, Windows) and on a
Unix socket, the replicas share one socket.
"""

from __future__ import annotations

import errno
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from localserve.errors import StartError

BACKLOG = 2048  # connections waiting to be accepted, per listening socket (uvicorn's default)


def bind_socket(
    host: str, port: int, uds: str | None = None, *, group: bool = False, listen: bool = True
) -> socket.socket:
    """A listening socket on ``host:port`` (``uds``: a Unix socket at that path, as uvicorn makes one); a StartError
    names the address when it cannot bind.

    ``group``: a replica's socket in the port's ``SO_REUSEPORT`` group. Without ``listen`` it is only bound, and gets no
    connection until its replica listens on it (uvicorn does when it starts serving).
    """
    if uds is not None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if os.path.exists(uds) and stat.S_ISSOCK(os.stat(uds).st_mode):
            os.unlink(uds)  # a stale socket of an earlier run, as uvicorn removes it
        address: Any = uds
    else:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if group:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        address = (host, port)
    try:
        sock.bind(address)
        if uds is not None:
            os.chmod(uds, 0o666)
    except OSError as exc:
        sock.close()
        raise StartError(cannot_listen(host, port, uds, exc)) from None
    if listen:
        sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock


def check_port_free(host: str, port: int) -> None:
    """A StartError when ``host:port`` cannot be bound, found before the project loads: bound and closed at once,
    as asyncio binds for uvicorn (every address ``host`` names, ``SO_REUSEADDR``, IPv6 only on IPv6)."""
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in found:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
    except OSError as exc:
        raise StartError(cannot_listen(host, port, None, exc)) from None


def cannot_listen(host: str, port: int, uds: str | None, exc: OSError) -> str:
    """Why ``serve`` cannot listen, in words: a port in use is named, with the way out."""
    if uds is None and exc.errno == errno.EADDRINUSE:
        return (
            f"Port {port} on {host} is already in use (another server listens there): stop it, or serve on "
            "another port with --port (--port 0 picks a free one)."
        )
    return f"Cannot listen on {uds if uds is not None else f'{host}:{port}'}: {exc.strerror or exc}."


def close_socket(sock: socket.socket, uds: str | None) -> None:
    """Close what ``bind_socket`` opened (and remove its Unix socket's file)."""
    sock.close()
    if uds is not None:
        Path(uds).unlink(missing_ok=True)


def spreads_connections(uds: str | None) -> bool:
    """Whether replicas get a socket each (Linux, TCP): the kernel then spreads connections over them."""
    return uds is None and sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
