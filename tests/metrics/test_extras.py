"""Figures beyond one API's requests, read back by their readers: a splitter's targets and shadow copies, the
failures of after-reply stages."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from localserve.metrics.extras import ExtraMetrics, post_predict_failures, read_splitters


def test_a_splitters_requests_and_shadow_copies_are_read_back_per_target() -> None:
    registry = CollectorRegistry()
    extras = ExtraMetrics(registry)
    extras.routed("iris", "iris-onnx", 200)
    extras.routed("iris", "iris-onnx", 200)
    extras.routed("iris", "iris-onnx", 503)
    extras.routed("iris", "iris-rules", 200)
    extras.routed("other", "b", 400)
    extras.shadowed("iris", "iris-candidate", "answered")
    extras.shadowed("iris", "iris-candidate", "failed")
    extras.grpc_refused("message_timeout")  # not a splitter's: left out of their figures

    splitters = read_splitters(registry.collect())
    assert set(splitters) == {"iris", "other"}
    assert splitters["iris"].targets == {"iris-onnx": {"200": 2.0, "503": 1.0}, "iris-rules": {"200": 1.0}}
    assert splitters["iris"].shadow == {"iris-candidate": {"answered": 1.0, "failed": 1.0}}
    assert (splitters["other"].targets, splitters["other"].shadow) == ({"b": {"400": 1.0}}, {})


def test_post_predict_failures_are_counted_per_api() -> None:
    registry = CollectorRegistry()
    extras = ExtraMetrics(registry)
    assert post_predict_failures(registry.collect()) == {}
    extras.post_predict_failed("pred")
    extras.post_predict_failed("pred")
    extras.post_predict_failed("other")
    assert post_predict_failures(registry.collect()) == {"pred": 2.0, "other": 1.0}
