"""The startup banner: where the server listens, with the port really bound, and the URL of each API and page.

Example::

    for line in banner_lines("cortex.yaml", ["iris"], options, port=54321, grpc_port=None):
        log.info("%s", line)

``serving cortex.yaml at http://127.0.0.1:54321 (/iris)``, then a line per URL (each API, ``/docs``, ``/dashboard``,
``/metrics``, the gRPC address, where spans go), with ``--root-path`` and ``https`` as a browser opens them, and a
wildcard address (``0.0.0.0``, ``::``) shown as the loopback address.
"""

from __future__ import annotations

from collections.abc import Sequence

from localserve.config.options import ServeOptions

__all__ = ["banner_lines", "base_url"]

_LOOPBACK = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def base_url(options: ServeOptions, port: int | None, *, reachable: bool = True) -> str:
    """``http(s)://host:port`` of the server (``reachable``: a wildcard address as the loopback one)."""
    scheme = "https" if options.ssl_certfile is not None else "http"
    if options.uds is not None:
        return f"{scheme}://localhost"
    host = _LOOPBACK.get(options.host, options.host) if reachable else options.host
    return f"{scheme}://{_url_host(host)}:{port}"


def banner_lines(
    source: object, api_names: Sequence[str], options: ServeOptions, *, port: int | None, grpc_port: int | None
) -> list[str]:
    """The banner's lines (see the module doc); ``port``/``grpc_port``: those bound (None: not known/off)."""
    paths = ", ".join(f"/{name}" for name in api_names)
    if options.uds is not None:
        where = f"on the Unix socket {options.uds} (curl --unix-socket {options.uds} {base_url(options, port)}/...)"
    else:
        where = f"at {base_url(options, port, reachable=False)}{options.root_path}"
    lines = [f"serving {source} {where} ({paths})"]
    root = base_url(options, port) + options.root_path
    lines += [f"  API {name}: {root}/{name}" for name in api_names]
    lines += [f"  docs: {root}/docs", f"  dashboard: {root}/dashboard"]
    if options.metrics:
        lines.append(f"  metrics: {root}/metrics")
    if grpc_port is not None:
        host = _LOOPBACK.get(options.host, options.host)
        lines.append(f"  gRPC (inference.GRPCInferenceService): {_url_host(host)}:{grpc_port}")
    tracing = options.tracing
    if tracing is not None:  # OTEL_* (cli/otel.py)
        where = (
            "stderr (console)" if tracing.exporter == "console" else f"OTLP {tracing.protocol} to {tracing.endpoint}"
        )
        lines.append(f"  traces: {where}")
    return lines
