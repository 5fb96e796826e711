"""The trace context among a request's headers: ``traceparent``, ``tracestate`` and ``baggage``, and nothing else."""

from __future__ import annotations

from localserve.tracing.traced import carrier_of


def test_the_trace_context_is_taken_from_bytes_or_str_headers() -> None:
    headers = [
        (b"traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        (b"content-type", b"application/json"),
        ("tracestate", "vendor=1"),
        (b"baggage", b"user=alice"),
    ]
    assert carrier_of(headers) == {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "vendor=1",
        "baggage": "user=alice",
    }


def test_no_trace_context_is_an_empty_carrier() -> None:
    assert carrier_of([(b"host", b"x"), (b"traceparentx", b"1")]) == {}
    assert carrier_of([]) == {}
