"""The engine: the one owner of a request, transport-neutral (no HTTP, no ASGI).

- ``Engine`` (``core.py``): the APIs of a replica, loading and shutdown, every request counted once;
- ``Lifecycle`` (the event loop's side of one API): admission, deadline, client leaving, shutdown;
- ``Pipeline`` (the API's threads) runs the per-request stages of user code;
- ``Batcher`` (one per model) stacks concurrent feeds, pads them to a bucket size, runs, splits;
- ``ports.py``: what the engine needs from a front door (``Client``, ``ReplyWriter``), as Protocols.

See DESIGN.md, "Execution model".
"""

from __future__ import annotations

from localserve.engine.api import ApiRuntime
from localserve.engine.batcher import Batcher
from localserve.engine.core import Engine
from localserve.engine.feeds import bucket_sizes
from localserve.engine.lifecycle import Lifecycle
from localserve.engine.pipeline import Pipeline
from localserve.engine.ports import Client, Exchange, Hooks, Received, ReplyWriter, Stages

__all__ = [
    "ApiRuntime",
    "Batcher",
    "Client",
    "Engine",
    "Exchange",
    "Hooks",
    "Lifecycle",
    "Pipeline",
    "Received",
    "ReplyWriter",
    "Stages",
    "bucket_sizes",
]
