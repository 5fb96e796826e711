"""The names of localserve's metric families (what ``GET /metrics`` shows and ``figures`` reads)."""

from __future__ import annotations

REQUESTS = "localserve_requests"
DURATION = "localserve_request_duration_seconds"
STAGE = "localserve_stage_duration_seconds"
PHASE = "localserve_request_phase_seconds"
IN_FLIGHT = "localserve_requests_in_flight"
QUEUE_DEPTH = "localserve_queue_depth"
BATCH_SIZE = "localserve_batch_size"
MODEL_LOAD = "localserve_model_load_seconds"
TRACKER_CLASS = "localserve_tracker_class"
TRACKER_VALUE = "localserve_tracker_value"
TRACKER_MIN = "localserve_tracker_value_min"
TRACKER_MAX = "localserve_tracker_value_max"
# The histogram has negative bounds, so prometheus_client (as OpenMetrics asks) writes no `_sum` for it.
TRACKER_TOTAL = "localserve_tracker_value_total"
# The models of an API with several models (Cortex's models: {paths | dir}), labelled api, model, version.
MODEL_LOADS = "localserve_model_loads"
MODEL_EVICTIONS = "localserve_model_evictions"  # also labelled reason: cache | removed | replaced
MODEL_LOAD_DURATION = "localserve_model_load_duration_seconds"
MODEL_DURATION = "localserve_model_duration_seconds"
