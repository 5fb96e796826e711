"""The Open Inference Protocol (KServe V2, Triton's HTTP API) beside the native routes.

- ``codec``: V2 tensors (JSON and the binary tensor data extension) to and from numpy;
- ``models``: which APIs are V2 models, their metadata and Triton model configuration;
- ``routes``: the routes, inference going through each API's own engine;
- ``stats``: Triton's statistics extension from the server's metrics.
"""

from __future__ import annotations

from localserve.v2.routes import INFER_ROUTE, V2Routes, infer_params

__all__ = ["INFER_ROUTE", "V2Routes", "infer_params"]
