"""The pytest plugin of localserve (entry point ``pytest11``): the ``localserve_client`` fixture.

Example::

    def test_tax(localserve_client):
        client = localserve_client("handlers_examples/json_tax", handler="main:handler")
        assert client.post("/", json={"total_without_tax": 100}).json() == {"total": 108.0}

Loading the plugin imports nothing but pytest: every pytest session of a machine with localserve
installed loads it, so ``localserve.testing`` (and what it imports) waits for the fixture's first use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

__all__ = ["localserve_client"]


@pytest.fixture
def localserve_client() -> Iterator[Callable[..., Any]]:
    """A factory of ``localserve.testing.client``\\ s: call it with a project folder and settings; closed at teardown."""
    with contextlib.ExitStack() as stack:

        def make(project_dir: Any, handler: str | None = None, config: Any = None, **settings: Any) -> Any:
            # lazy: numpy, starlette, the server: not in every pytest session of a user, only in those that call it
            from localserve.testing import client

            return stack.enter_context(client(project_dir, handler, config, **settings))

        yield make
