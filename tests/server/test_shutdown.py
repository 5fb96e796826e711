"""The deadlines of a stop, all derived from ``--graceful-timeout`` in ``server/shutdown.py``, in their order."""

from __future__ import annotations

import pytest

from localserve.config.options import ServeOptions
from localserve.server.connection.server import uvicorn_server
from localserve.server.shutdown import GRPC_MARGIN, replica_deadline, uvicorn_cutoff


@pytest.mark.parametrize("graceful_timeout", [0.1, 1.0, 2.5, 30.0])
def test_each_deadline_comes_after_the_one_it_waits_for(graceful_timeout: float) -> None:
    # The engine answers at T; gRPC's calls are cut after those answers left; uvicorn's cut-off (plain-text 500s)
    # comes later still; the supervisor kills a replica only after that.
    grpc_cut = graceful_timeout + GRPC_MARGIN
    assert graceful_timeout < grpc_cut < uvicorn_cutoff(graceful_timeout) < replica_deadline(graceful_timeout)


def test_uvicorn_is_configured_with_the_cutoff() -> None:
    server = uvicorn_server(object(), ServeOptions(graceful_timeout=2.5), on_signal=lambda: None)
    assert server.config.timeout_graceful_shutdown == uvicorn_cutoff(2.5) == 5
