"""localserve: run ABEJA Platform and Cortex model handlers on your own machine."""

from __future__ import annotations

from localserve.logs import logger

__version__ = "0.1.0"

__all__ = ["__version__", "logger"]
