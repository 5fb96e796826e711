"""What the engine needs from a front door, as typed interfaces the engine owns and front doors implement.

The engine knows no wire format: a front door (HTTP native routes, Open Inference Protocol over
REST or gRPC, AsyncAPI) hands it a ``Request`` and, where its transport has them, a ``Client``
(how to learn that the client left, how to send a stream) and a ``ReplyWriter`` (how the API's
thread that finished a request writes the answer itself). Nothing here imports ``server/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

Headers = list[tuple[bytes, bytes]]


class Client(Protocol):
    """The client of one request, as its front door sees it."""

    async def left(self) -> None:
        """Return once the client has gone away (never returns while it stays)."""

    async def stream_start(self, status: int, headers: Headers) -> None:
        """Send the head of a streamed answer."""

    async def stream_chunk(self, data: bytes, more: bool) -> None:
        """Send one piece of a streamed answer's body (``more``: pieces follow)."""


class ReplyWriter(Protocol):
    """Writes a whole answer from the API's thread, where the transport allows it (our HTTP/1.1 connection).

    At concurrency 1 this spares the wake-up of the event loop's thread between the model's result
    and the client's first byte (docs/explanation/architecture.md, "The answer leaves from the API's thread").
    """

    def write(self, status: int, headers: Headers, body: bytes) -> bytes | None:
        """On the API's thread: write the answer; the bytes the loop must still write, or None if not written."""

    def complete(self, rest: bytes) -> None:
        """On the event loop: write ``rest`` and end the response."""


class Hooks:
    """What the pipeline reports to metrics; every hook is optional."""

    def __init__(
        self,
        depth: Callable[[int], None] | None = None,
        batch: Callable[[int], None] | None = None,
        stage: Callable[[str, float], None] | None = None,
        phases: Callable[[list[float]], None] | None = None,
        after_failed: Callable[[], None] | None = None,
    ) -> None:
        self.depth = depth
        self.batch = batch
        self.stage = stage
        self.phases = phases  # once per job answered 2xx, with its ``Job.times``
        self.after_failed = after_failed  # an after-reply stage (post_predict) raised
