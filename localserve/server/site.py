"""What the pages and the dashboard read of the replica they belong to, as a Protocol ``server.app.App`` meets."""

from __future__ import annotations

from typing import Protocol

from starlette.applications import Starlette

from localserve.config import ServeConfig
from localserve.config.options import ServeOptions
from localserve.engine.api import ApiRuntime
from localserve.metrics import Metrics
from localserve.metrics.summary import StatsSummary
from localserve.protocols.splitter import SplitterRoutes
from localserve.server.reload import Reloader


class Site(Protocol):
    """What the pages read of the replica they belong to (``server.app.App``)."""

    starlette: Starlette
    config: ServeConfig
    options: ServeOptions
    apis: dict[str, ApiRuntime]
    metrics: Metrics | None
    stats: StatsSummary
    reloader: Reloader | None
    splitters: SplitterRoutes
