"""The names of localserve's metric families (what ``GET /metrics`` shows and ``figures`` reads)."""

from __future__ import annotations

REQUESTS = "localserve_requests"
DURATION = "localserve_request_duration_seconds"
STAGE = "localserve_stage_duration_seconds"
PHASE = "localserve_request_phase_seconds"
IN_FLIGHT = "localserve_requests_in_flight"
QUEUE_DEPTH = "localserve_queue_depth"
BATCH_SIZE = "localserve_batch_size"
ROWS = "localserve_request_rows"  # labelled api, model, version (a multi-model API's model version, else "")
MODEL_LOAD = "localserve_model_load_seconds"
TRACKER_CLASS = "localserve_tracker_class"
TRACKER_VALUE = "localserve_tracker_value"
TRACKER_MIN = "localserve_tracker_value_min"
TRACKER_MAX = "localserve_tracker_value_max"
# The histogram has negative bounds, so prometheus_client (as OpenMetrics asks) writes no `_sum` for it; the sum
# is this gauge, whose name may end neither in `_sum` (the histogram's) nor in `_total` (counters', promtool says).
TRACKER_TOTAL = "localserve_tracker_sum_of_values"
POST_PREDICT_FAILURES = "localserve_post_predict_failures"
SPLITTER_REQUESTS = "localserve_splitter_requests"
SPLITTER_SHADOW = "localserve_splitter_shadow_requests"
GRPC_REFUSALS = "localserve_grpc_refusals"  # gRPC calls refused before their message was read, by reason
# The models of an API with several models (Cortex's models: {paths | dir}), labelled api, model, version.
MODEL_LOADS = "localserve_model_loads"
MODEL_EVICTIONS = "localserve_model_evictions"  # also labelled reason: cache | removed | replaced
MODEL_LOAD_DURATION = "localserve_model_load_duration_seconds"
MODEL_DURATION = "localserve_model_duration_seconds"
