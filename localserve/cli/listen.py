"""The flags of ``serve`` that say how it listens, named as uvicorn names them: ``--root-path``,
``--ssl-keyfile``/``--ssl-certfile``, ``--uds`` and ``--log-config``; checked here, before anything loads.

Example::

    @click.command()
    @listen_options
    def serve(**settings): check_listen(settings)   # ServeOptions(**settings, ...)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from localserve.errors import ConfigError

__all__ = ["check_listen", "listen_options", "server_url"]

F = Callable[..., Any]

# Absolute: the server reads them after it has entered the project (its working directory).
_FILE = click.Path(dir_okay=False, exists=True, path_type=Path, resolve_path=True)
_OPTIONS = [
    click.option(
        "--root-path",
        default="",
        metavar="PREFIX",
        help="The URL prefix a proxy serves localserve under and strips, e.g. /models (uvicorn's --root-path): "
        "requests arrive without it; the pages' links, /openapi.json's servers and the startup URLs carry it.",
    ),
    click.option("--ssl-keyfile", type=_FILE, help="Serve HTTPS with this private key (PEM), with --ssl-certfile."),
    click.option(
        "--ssl-certfile",
        type=_FILE,
        help="Serve HTTPS with this certificate chain (PEM; it may hold the key too, then --ssl-keyfile is optional).",
    ),
    click.option(
        "--uds",
        metavar="PATH",
        help="Listen on this Unix domain socket instead of --host/--port (made readable and writable by all).",
    ),
    click.option(
        "--log-config",
        type=_FILE,
        help="A logging config applied over localserve's (uvicorn's --log-config): .json or .yaml for "
        "logging.config.dictConfig, else an INI file for fileConfig.",
    ),
]


def listen_options(func: F) -> F:
    """Add the options of the module doc; the command receives them by their ServeOptions names."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def check_listen(settings: dict[str, Any]) -> None:
    """Check the listen flags in ``settings`` (the command's keyword arguments), normalising ``root_path``."""
    root = settings["root_path"].strip()
    if root and not root.startswith("/"):
        raise ConfigError(f"Invalid --root-path {root!r}: expected a path starting with '/', e.g. /models.")
    settings["root_path"] = root.rstrip("/")
    keyfile, certfile = settings["ssl_keyfile"], settings["ssl_certfile"]
    if keyfile is not None and certfile is None:
        raise ConfigError("--ssl-keyfile needs --ssl-certfile (the certificate the key belongs to).")
    if certfile is not None:
        import ssl

        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(
                f"--ssl-certfile {certfile}{f' / --ssl-keyfile {keyfile}' if keyfile else ''}: cannot load them "
                f"({exc.strerror or exc}); expected a PEM certificate and its PEM private key."
            ) from None


def server_url(settings: dict[str, Any]) -> str | None:
    """The URL user code reaches this server at (``LOCALSERVE_URL``); None on a Unix socket."""
    if settings["uds"] is not None:
        return None
    host = settings["host"]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    scheme = "https" if settings["ssl_certfile"] is not None else "http"
    return f"{scheme}://{f'[{host}]' if ':' in host else host}:{settings['port']}{settings['root_path']}"
