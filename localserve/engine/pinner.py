"""When a replica's request threads are pinned to one core: always (``--pin-threads``), or by default once
every API's requests prove short (``PIN_BELOW`` of CPU on their thread); how is ``pinning.py``'s."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
from collections.abc import Mapping

from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime
from localserve.engine.pinning import move_away, pin_this_thread

log = logging.getLogger("localserve")

PIN_BELOW = 0.001  # with no --pin-threads flag: pinned when a request takes less CPU on its API's thread


class Pinner:
    """The pinning of one replica's event loop and API threads."""

    def __init__(self, apis: Mapping[str, ApiRuntime], options: ServeOptions) -> None:
        self.apis = apis
        self.options = options
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop's, set at start-up
        self.loading_threads: set[int] = set()  # threads started while the APIs loaded (thread ids)
        self.request_cpu: dict[str, float] = {}  # CPU seconds a request takes on its API's thread

    def by_default(self) -> bool:
        """Whether pinning may be the default (done once requests prove short): every API a CPU model, one thread.

        Those threads run only our runtimes and pre/post_inference, whose pools (made while loading) can be moved off. A
        handler's later pools (torch's) would inherit the one core, more threads per API are there to use more cores,
        and a Kubernetes pod's node has other pods on that core: those pin only with ``--pin-threads``.
        """
        if self.options.on_kubernetes:
            return False
        try:
            if len(os.sched_getaffinity(0)) < 2:
                return False
        except AttributeError:
            return False
        return all(
            rt.api.kind == "request_handler"
            and rt.api.threads_per_process == 1
            and rt.api.compute.gpu == 0
            and not rt.api.is_async
            for rt in self.apis.values()
        )

    def measured(self, api: str, seconds: float) -> None:
        """An API's thread measured its CPU time per request (on that thread): decide on the loop."""
        loop = self.loop
        if loop is not None:
            try:
                # A fresh context: the decision's log lines are the server's, not the last request's.
                loop.call_soon_threadsafe(self.decide, api, seconds, context=contextvars.Context())
            except RuntimeError:  # the loop is closed: the server is gone
                pass

    def decide(self, api: str, seconds: float) -> None:
        """Pin by default once every API's requests take under ``PIN_BELOW`` of CPU on their thread: pinning saves
        the hand-over between two threads on one core and loses the overlap of GIL-free work (benchmarks/README.md,
        "third pass" and "fourteenth pass")."""
        self.request_cpu[api] = seconds
        if len(self.request_cpu) < len(self.apis):
            return
        slowest = max(self.request_cpu, key=self.request_cpu.__getitem__)
        cost = self.request_cpu[slowest] * 1e6
        if cost < PIN_BELOW * 1e6:
            log.info("requests take %.0f us of CPU on their thread at most (api %r): pinning", cost, slowest)
            self.pin()
        else:
            log.info(
                "api %r: requests take %.0f us of CPU on their thread, over %.0f us: the threads keep every core",
                slowest,
                cost,
                PIN_BELOW * 1e6,
            )

    def pin(self) -> None:
        """Put the event loop and every API's worker threads on one core (``--pin-threads``), and the threads the
        runtimes made while loading on the others (engine/pinning.py). Replica i of the server on port p takes
        allowed core (p + i) mod the number of cores: the replicas of a server, and servers on neighbouring
        ports, take different cores."""
        try:
            allowed = sorted(os.sched_getaffinity(0))
        except AttributeError:
            if self.options.pin_threads:
                log.warning("--pin-threads: this platform cannot pin threads to cores; ignored")
            return
        cpus = {allowed[(self.options.port + self.options.replica) % len(allowed)]}
        pin_this_thread(cpus)  # the event loop
        moved = move_away(self.loading_threads, cpus, allowed)
        for rt in self.apis.values():
            rt.pipeline.pin(cpus)
        log.info("event loop and worker threads pinned to CPU %d, %d threads of the runtimes off it", min(cpus), moved)
