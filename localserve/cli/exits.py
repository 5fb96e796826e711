"""Where a localserve process ends: with its exit code, or at once past the threads still running."""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger("localserve")
# anyio's name for the threads of its pool, which watchfiles (serve --reload) and Starlette's file responses use
ANYIO_WORKER = "AnyIO worker thread"
ANYIO_WAIT = 1.0  # seconds anyio's pool threads, told to stop as the server's loop ended, are waited for


def exit_past_threads(code: int, busy: list[str]) -> None:
    """End the process with ``code`` at once if API threads (``busy``) or user code's non-daemon threads still run.

    A load or a request still running, maybe in a runtime's native code, would lose what it runs on
    to the interpreter's exit (onnxruntime aborts: "terminate called without an active exception",
    exit 134); a non-daemon thread would make Python wait for it forever. Else this returns.
    """
    for thread in threading.enumerate():
        if thread.name == ANYIO_WORKER:  # ours, not user code's
            thread.join(ANYIO_WAIT)
            busy = [*busy, thread.name] if thread.is_alive() else busy
    leftover = [
        t.name
        for t in threading.enumerate()
        if not t.daemon and t is not threading.main_thread() and t.name != ANYIO_WORKER
    ]
    if busy:
        log.info("exiting while these threads still run: %s", ", ".join(busy))
    if leftover:
        log.warning("exiting although user code left threads running: %s", ", ".join(leftover))
    if busy or leftover:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
