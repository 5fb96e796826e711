"""``from cortex_internal.lib.log import logger`` (Cortex 0.25-0.33 docs, *Predictors*): Cortex's JSON logger, localserve's user logger.

``logger.info("received payload", extra={"payload": payload})`` writes one JSON line with
``extra`` flattened by one level and the request id, as ``from localserve import logger`` does.
"""

from __future__ import annotations

from localserve.logs import logger

__all__ = ["logger"]
