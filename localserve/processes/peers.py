"""``localserve run --api X``: the other APIs of the config, started only when X's code calls them.

``run`` loads only its API, so a broken API elsewhere cannot stop it. When that API calls
``http://api-<other>:8888/...``, the resolver (``compat.hosts``) asks here for ``<other>``'s port: the first time,
``start`` serves that API on a loopback port, and the call waits until it loaded (or answers 503 with the reason).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

log = logging.getLogger("localserve")


class Peers:
    """Loopback servers for the APIs ``names``, each started by ``start(name)`` on first use.

    ``start`` returns the port the API answers on and the function that stops it (it returns the names of
    the threads of that server's APIs still running).
    """

    def __init__(self, names: Iterable[str], start: Callable[[str], tuple[int, Callable[[], list[str]]]]) -> None:
        self.names = set(names)
        self.start = start
        self._lock = threading.Lock()
        self._ports: dict[str, int] = {}
        self._stops: list[Callable[[], list[str]]] = []

    def port_of(self, name: str) -> int | None:
        """The loopback port of the API ``name`` (its server started on first use); None for a name that is no API."""
        if name not in self.names:
            return None
        with self._lock:
            if name not in self._ports:
                log.info("api %r is called by the api being run: starting it on a loopback port", name)
                port, stop = self.start(name)
                self._stops.append(stop)
                self._ports[name] = port
            return self._ports[name]

    def close(self) -> list[str]:
        """Stop the servers started for the peers; the names of their APIs' threads still running."""
        return [name for stop in self._stops for name in stop()]
