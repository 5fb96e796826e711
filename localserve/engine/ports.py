"""What the engine needs from a front door, as typed interfaces the engine owns and front doors implement.

The engine knows no wire format. A front door hands ``Engine.submit`` one ``Exchange`` per request: how to read it
(under admission), send its answer and render an error in its wire, and, where its transport has them, a ``Client`` (the
client leaving, a stream's messages) and a ``ReplyWriter`` (the API's thread writes the answer).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from localserve.errors import LocalServeError
from localserve.messages.request import Request
from localserve.messages.response import Reply
from localserve.tracing import Traced

Headers = list[tuple[bytes, bytes]]


class Stages(Protocol):
    """A request's own first and last stages, in place of the endpoint's, run on the API's threads.

    For a protocol that feeds the model directly (V2: no pre_inference): ``prepare`` makes the model's feed,
    ``finish`` the Reply. Once prepared, ``rows`` (the batch dimension, else 1) and ``ran`` (the multi-model
    API's ``(model, version)`` that ran it, else None) are what the engine records when it answers 2xx.
    """

    rows: int
    ran: tuple[str, str] | None

    def prepare(self, request: Request) -> Any:
        """The model's feed for ``request``."""

    def finish(self, request: Request, output: Any) -> Any:
        """The Reply for the model's ``output``."""


Received = tuple[Request, Stages | None] | Reply
"""What a door read: the request to run (with its own stages, or None for the endpoint's), or the
whole answer when nothing runs on the API's threads (an AsyncAPI's submit, stored)."""


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


class Exchange(Protocol):
    """One request as its front door sees it, for as long as the engine owns it (``Engine.submit``).

    The engine calls ``receive`` once the request is admitted, then ``send`` with the answer (or
    with ``render`` of the error that ended it), exactly once each, and records the request with
    ``method``, ``path`` and ``request_id``.
    """

    @property
    def method(self) -> str:
        """The method the access log names (``POST``; ``RUN`` for an AsyncAPI job)."""

    @property
    def path(self) -> str:
        """The path the access log names."""

    @property
    def request_id(self) -> str:
        """The request's id (the client's ``X-Request-ID``, or one made)."""

    @property
    def client(self) -> Client | None:
        """How to learn the client left, how to stream to it (None: it never leaves)."""

    @property
    def writer(self) -> ReplyWriter | None:
        """Where the API's thread may write the answer itself (our HTTP/1.1 connection), else None."""

    @property
    def deadline(self) -> float | None:
        """Seconds the client gives the request (gRPC's deadline), or None: the API's timeout."""

    @property
    def tracked(self) -> bool:
        """Whether the API's tracker records this request's value (its own routes, not V2's)."""

    async def receive(self) -> Received:
        """Read the request (its body, with the door's own limits)."""

    async def send(self, reply: Reply) -> None:
        """Send ``reply`` in the door's wire (raise ``ClientGone`` when the client left meanwhile)."""

    def render(self, error: LocalServeError) -> Reply:
        """``error`` as this door's answer (its one renderer)."""

    def traced(self) -> Traced:
        """What tracing needs of the request (asked only with tracing on): the trace context the client sent,
        the span's name, the wire's attributes."""


class Hooks:
    """What the pipeline reports to metrics and tracing; every hook is optional."""

    def __init__(
        self,
        depth: Callable[[int], None] | None = None,
        batch: Callable[[int], None] | None = None,
        stage: Callable[[str, float], None] | None = None,
        phases: Callable[[list[float]], None] | None = None,
        after_failed: Callable[[], None] | None = None,
        batch_run: Callable[[list[Any], float, float], None] | None = None,
    ) -> None:
        self.depth = depth
        self.batch = batch
        self.stage = stage
        self.phases = phases  # once per job answered 2xx, with its ``Job.times``
        self.after_failed = after_failed  # an after-reply stage (post_predict) raised
        self.batch_run = batch_run  # a model run of several jobs, with its perf_counter start and end (tracing)
