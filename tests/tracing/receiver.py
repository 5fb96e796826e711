"""A real OTLP/HTTP receiver for the tests: an ``http.server`` on a free port decoding ``ExportTraceServiceRequest``."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

WAIT = 60.0  # seconds before a wait for spans fails: only a hang reaches it


@dataclass
class Span:
    """One received span, its ids as hex and its attributes as Python values."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status: int  # 0 unset, 1 ok, 2 error
    events: list[str]
    links: list[tuple[str, str]]  # (trace_id, span_id)


def _values(attributes: Any) -> dict[str, Any]:
    found = {}
    for kv in attributes:
        which = kv.value.WhichOneof("value")
        found[kv.key] = getattr(kv.value, which) if which else None
    return found


class Receiver:
    """The spans received so far, and a way to wait until those a test needs are in."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.changed = threading.Condition()
        self.port = 0
        self.posts = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        with self.changed:
            self.posts += 1
            for resource_spans in request.resource_spans:
                resource = _values(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    for s in scope.spans:
                        self.spans.append(
                            Span(
                                s.name,
                                s.kind,
                                s.trace_id.hex(),
                                s.span_id.hex(),
                                s.parent_span_id.hex(),
                                _values(s.attributes),
                                resource,
                                s.status.code,
                                [e.name for e in s.events],
                                [(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                            )
                        )
            self.changed.notify_all()

    def wait_for(self, found: Callable[[list[Span]], Any], what: str) -> Any:
        """What ``found`` returns once it is truthy for the spans received (it is asked again at each export)."""
        with self.changed:
            result = found(self.spans)
            if not self.changed.wait_for(lambda: found(self.spans), WAIT):
                raise AssertionError(f"no {what} among {len(self.spans)} spans received: {self.spans}")
            return found(self.spans) or result

    def children(self, parent: Span) -> list[Span]:
        with self.changed:
            return [s for s in self.spans if s.parent == parent.span_id and s.trace_id == parent.trace_id]


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """A receiver listening on a free loopback port for ``POST /v1/traces`` until the block ends."""
    receiver = Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            receiver.add(ExportTraceServiceRequest.FromString(body))
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def otlp_grpc_receiver() -> Iterator[Receiver]:
    """A receiver of OTLP over gRPC (the collector's TraceService) on a free loopback port."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    receiver = Receiver()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: ExportTraceServiceRequest, context: Any) -> ExportTraceServiceResponse:
            receiver.add(request)
            return ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    receiver.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield receiver
    finally:
        server.stop(None).wait()
