"""The fixtures of the runtimes' tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.runtimes.site import Site, serving


@pytest.fixture
def serve_site() -> Iterator[Callable[[Site], str]]:
    """``serve_site(site)`` -> the URL of a real HTTP server on loopback that serves ``site``."""
    with serving() as start:
        yield start
