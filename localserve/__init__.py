"""localserve: run ABEJA Platform and Cortex model handlers on your own machine."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
