"""The phases of each request answered 2xx: queue, prepare, model and finish, observed together (one count), as the
figures read them and as a scrape shows them; a request answered in its prepare stage has no model or finish time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from localserve.metrics import PHASES, Metrics
from localserve.metrics.phases import Phases


def test_phases_are_observed_together_once_per_request() -> None:
    metrics = Metrics(apis=["iris"])
    observe = metrics.phase_observer("iris")
    observe([10.0, 10.5, 11.0, 13.0, 13.25])  # queued, started, prepared, model's output, finished
    observe([20.0, 21.0, 23.0])  # answered in its prepare stage (an ABEJA handler): no model, no finish
    phases = metrics.figures()["iris"].phases
    assert {name: (d.count, d.sum) for name, d in phases.items()} == {
        "queue": (2, 1.5),
        "prepare": (2, 2.5),
        "model": (2, 2.0),
        "finish": (2, 0.25),
    }
    assert list(phases) == list(PHASES)


def test_a_scrape_shows_each_phase_as_a_summary() -> None:
    registry = CollectorRegistry()
    observe = Phases(registry, multiprocess=False).observer("iris")
    observe([1.0, 1.25, 2.0, 4.0, 4.5])
    value = registry.get_sample_value
    assert [value("localserve_request_phase_seconds_count", {"api": "iris", "phase": p}) for p in PHASES] == [1.0] * 4
    assert [value("localserve_request_phase_seconds_sum", {"api": "iris", "phase": p}) for p in PHASES] == [
        0.25,
        0.75,
        2.0,
        0.5,
    ]
    assert value("localserve_request_phase_seconds_count", {"api": "other", "phase": "queue"}) is None
