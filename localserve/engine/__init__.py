"""The execution engine of one API: admission, deadlines, cancellation, the staged pipeline, streams.

- ``Lifecycle`` (the event loop's side) owns a request from admission to its last byte;
- ``Pipeline`` (the API's threads) runs the per-request stages of user code;
- ``Batcher`` (one per model) stacks concurrent feeds, pads them to a bucket size, runs, splits.

See DESIGN.md, "Execution model".
"""

from __future__ import annotations

from localserve.engine.batcher import Batcher, bucket_sizes
from localserve.engine.lifecycle import Lifecycle, answer_other_method, error_reply, json_reply, read_body, send_reply
from localserve.engine.pipeline import Hooks, Pipeline

__all__ = [
    "Batcher",
    "Hooks",
    "Lifecycle",
    "Pipeline",
    "answer_other_method",
    "bucket_sizes",
    "error_reply",
    "json_reply",
    "read_body",
    "send_reply",
]
