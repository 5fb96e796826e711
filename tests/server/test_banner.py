"""The startup banner's lines for each way of listening (the real server's are in tests/cli/test_listen.py)."""

from __future__ import annotations

from pathlib import Path

from localserve.server import ServeOptions
from localserve.server.banner import banner_lines


def test_a_wildcard_address_is_shown_as_given_and_reached_on_loopback() -> None:
    options = ServeOptions(host="::", metrics=False, ssl_certfile=Path("cert.pem"), root_path="/m")
    assert banner_lines("cortex.yaml", ["iris", "tax"], options, port=8443, grpc_port=8081) == [
        "serving cortex.yaml at https://[::]:8443/m (/iris, /tax)",
        "  API iris: https://[::1]:8443/m/iris",
        "  API tax: https://[::1]:8443/m/tax",
        "  docs: https://[::1]:8443/m/docs",
        "  dashboard: https://[::1]:8443/m/dashboard",
        "  gRPC (inference.GRPCInferenceService): [::1]:8081",
    ]


def test_a_unix_socket_says_how_to_reach_it() -> None:
    options = ServeOptions(uds="/run/ls.sock")
    assert banner_lines("command line", ["json-tax"], options, port=None, grpc_port=None) == [
        "serving command line on the Unix socket /run/ls.sock (curl --unix-socket /run/ls.sock http://localhost/...) "
        "(/json-tax)",
        "  API json-tax: http://localhost/json-tax",
        "  docs: http://localhost/docs",
        "  dashboard: http://localhost/dashboard",
        "  metrics: http://localhost/metrics",
    ]
