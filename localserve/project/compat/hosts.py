"""``http://api-<name>:8888/...`` from user code reaches API ``<name>`` (Cortex 0.25-0.33 docs, *Predictors*), whatever
port we listen on.

Cortex gave every API a cluster DNS name ``api-<name>`` on port 8888. Here the resolver (``socket.getaddrinfo``, which
every HTTP client uses) answers ``api-<known api>`` with 127.0.0.1 and, for port 8888, that API's server's port; the
server routes a request whose ``Host`` is ``api-<name>`` to ``/<name>/predict``.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["API_PORT", "api_name_of", "install_api_hosts", "route_by_host", "serve_api_hosts"]

API_PORT = 8888
# Under `run`, LOCALSERVE_URL is RUN_URL: its first call starts one loopback server of every other API.
RUN_PEERS = "localserve-peers"
RUN_URL = f"http://api-{RUN_PEERS}:{API_PORT}"
_HOST_RE = re.compile(r"^api-([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)\.?$")
_original_getaddrinfo = socket.getaddrinfo
_lock = threading.Lock()
_resolver: Callable[[str], int | None] | None = None


def api_name_of(host: str | bytes | None) -> str | None:
    """``api-iris`` (or ``api-iris:8888``) -> ``iris``; None for any other host."""
    if host is None:
        return None
    text = host.decode("latin-1") if isinstance(host, bytes) else host
    match = _HOST_RE.match(text.rsplit(":", 1)[0].lower() if text.count(":") == 1 else text.lower())
    return match.group(1) if match else None


def install_api_hosts(port_of: Callable[[str], int | None]) -> None:
    """Resolve ``api-<name>`` for which ``port_of(name)`` gives a port; the last call wins."""
    global _resolver
    with _lock:
        _resolver = port_of
        socket.getaddrinfo = _getaddrinfo


def _getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
    name = api_name_of(host) if isinstance(host, str | bytes) else None
    resolver = _resolver
    if name is not None and resolver is not None:
        local_port = resolver(name)
        if local_port is not None:
            wanted = int(port) if isinstance(port, int | str | bytes) and str(port).isdigit() else None
            target = local_port if wanted in (None, API_PORT) else wanted
            return _original_getaddrinfo("127.0.0.1", target, family, type, proto, flags)
    return _original_getaddrinfo(host, port, family, type, proto, flags)


def route_by_host(scope: Any, names: frozenset[str]) -> Any:
    """``scope`` itself, or a copy whose path is ``/<name>/predict`` when its ``Host`` is ``api-<name>``.

    Only for a request to ``/`` or ``/predict`` whose ``Host`` names an API in ``names``; the App
    calls it for those two paths alone, so other requests pay nothing.
    """
    for key, value in scope["headers"]:
        if key == b"host":
            name = api_name_of(value)
            if name in names:
                path = f"/{name}/predict"
                return dict(scope, path=path, raw_path=path.encode())
            break
    return scope


def serve_api_hosts(config: Any, port: int, sock: socket.socket | None, server: Callable[[], Any]) -> frozenset[str]:
    """For ``serve``: resolve ``api-<served api>`` to this server; returns the names the App routes by ``Host``.

    ``server()`` gives the uvicorn server, whose socket tells the port when ``port`` is 0.
    """
    names = tuple(api.name for api in config.apis) + tuple(s.name for s in config.splitters)  # TrafficSplitters too

    def port_of(name: str) -> int | None:
        if name not in names:
            return None
        if sock is not None:
            return int(sock.getsockname()[1])
        if port:
            return port
        running = server()
        servers = getattr(running, "servers", None) or []
        return int(servers[0].sockets[0].getsockname()[1]) if servers else None

    install_api_hosts(port_of)
    return frozenset(names)
