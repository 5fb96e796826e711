"""localserve: run ABEJA Platform and Cortex model handlers on your own machine."""

from __future__ import annotations

from localserve.logs import logger
from localserve.messages.multipart import Content
from localserve.messages.request import Request

__version__ = "0.1.0"

__all__ = ["Content", "Request", "__version__", "logger"]
