"""`localserve run` (one request, in-process) and `localserve serve` (HTTP)."""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from localserve.cli.options import (
    ApiFlags,
    api_options,
    fail_on_errors,
    load,
    prepare,
    project_options,
    run_api_options,
    setup_logging,
)
from localserve.errors import ConfigError


@click.command(context_settings={"help_option_names": ["--help"]})
@project_options
@run_api_options
@click.option("--api", "api_name", help="Which API of the config receives the request (only it is loaded).")
@click.option("--input", "input_path", help="File to send as the request body ('-' for stdin).")
@click.option(
    "--image",
    "-i",
    metavar="IMAGE",
    help="ABEJA's runtime image, e.g. abeja/all-cpu:19.04; accepted, and the current environment is used instead.",
)
@click.option("--content-type", help="Content-Type of the body (default: guessed from the file's extension).")
@click.option("--method", "-X", default="POST", show_default=True)
@click.option("--header", "-H", "headers", multiple=True, metavar="K:V", help="Request header (repeatable).")
@click.option("--query", default="", help="Query string, e.g. debug=true.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="Write the response body here instead of stdout.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print nothing but the response body.")
@fail_on_errors
def run(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    api_name: str | None,
    input_path: str | None,
    image: str | None,
    content_type: str | None,
    method: str,
    headers: tuple[str, ...],
    query: str,
    output: Path | None,
    quiet: bool,
) -> None:
    """Send one request to the handler in-process and print the response body.

    -h is --handler and -i is --image, as in ABEJA's run-local; help is --help.

    \b
    localserve run -h main:handler -i abeja/all-cpu:19.04 --input cat.jpg --quiet > flipped.jpg
    localserve run --config cortex.yaml --api iris --input sample.json
    """
    from localserve.logs import capture_prints

    setup_logging(flags, quiet=quiet, default_format="text")
    body, guessed = _read_input(input_path)
    header_list = [_split_header(h) for h in headers]
    if not any(k.lower() == "content-type" for k, _ in header_list) and (content_type or guessed):
        header_list.append(("Content-Type", content_type or guessed or ""))
    if image:
        logging.getLogger("localserve").info(
            "--image %s: localserve runs the handler in the current Python environment, not in that image", image
        )
    full = load(project, config_file, flags)
    api = full.api(api_name).name
    # Only the API called is loaded; the others start if its code calls them (http://api-<name>:8888).
    config = prepare(full.only([api]), flags, quiet=quiet, url=os.environ.get("LOCALSERVE_URL"))
    # Imported after prepare: numpy starts threads, and /mnt/project's mount namespace needs none.
    from localserve.client import run_once
    from localserve.compat.hosts import install_api_hosts
    from localserve.compat.peers import Peers
    from localserve.server import ServeOptions, create_app

    peers = Peers(replace(full, workdir=config.workdir, mnt_mode=config.mnt_mode), flags.allow_cpu_fallback)
    install_api_hosts(peers.port_of)
    app = create_app(config, ServeOptions(allow_cpu_fallback=flags.allow_cpu_fallback))
    try:
        with capture_prints() as real_stdout:  # what user code prints is logged, never mixed with the body
            if config.apis[0].is_async:  # an AsyncAPI's job runs now, and its result is printed
                from localserve.protocols.asyncapi import run_job_once

                status, response_headers, response_body = run_job_once(
                    app, api=api, headers=header_list, body=body, query_string=query
                )
            else:
                status, response_headers, response_body = run_once(
                    app, api=api, method=method, headers=header_list, body=body, query_string=query
                )
    finally:
        peers.close()
    if status >= 400:
        click.echo(f"Error: the handler answered {status}:", err=True)
        click.echo(response_body.decode("utf-8", "replace"), err=True)
        sys.exit(1)
    if output is not None:
        output.write_bytes(response_body)
        return
    response_type = next((v for k, v in response_headers if k == "content-type"), "")
    if real_stdout.isatty() and response_type.startswith("application/json"):
        try:
            response_body = (json.dumps(json.loads(response_body), indent=4, ensure_ascii=False) + "\n").encode()
        except ValueError:
            pass
    real_stdout.buffer.write(response_body)
    real_stdout.buffer.flush()


def _read_input(input_path: str | None) -> tuple[bytes, str | None]:
    if input_path is None:
        return b"", None
    if input_path == "-":
        return sys.stdin.buffer.read(), "application/octet-stream"
    path = Path(input_path)
    if not path.is_file():
        raise ConfigError(f"--input {input_path!r}: no such file.")
    guessed, _ = mimetypes.guess_type(path.name)
    return path.read_bytes(), guessed or "application/octet-stream"


def _split_header(item: str) -> tuple[str, str]:
    key, sep, value = item.partition(":")
    if not sep or not key.strip():
        raise ConfigError(f"Invalid --header {item!r}: expected NAME:VALUE, e.g. 'Accept: application/json'.")
    return key.strip(), value.strip()


@click.command()
@project_options
@api_options
@click.option("--api", "api_names", multiple=True, help="Serve only this API of the config (repeatable).")
# The Docker image sets LOCALSERVE_HOST (and may set LOCALSERVE_PORT): arguments after the image
# name replace its CMD, and must not lose the address that `docker run -p` reaches.
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="LOCALSERVE_HOST",
    help="Address to bind (0.0.0.0 for all).",
)
@click.option("--port", default=8888, show_default=True, envvar="LOCALSERVE_PORT", type=click.IntRange(0, 65535))
@click.option(
    "--max-body-size",
    default=100 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Largest request body in bytes (413 beyond).",
)
@click.option(
    "--replicas",
    type=click.IntRange(min=1),
    help="Processes on one port (default: the largest init_replicas or min_replicas of the APIs, times "
    "processes_per_replica; a GPU API without one runs a replica per 4 cores, at most 4; else 1).",
)
@click.option(
    "--graceful-timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds in-flight requests get to finish on SIGTERM/SIGINT.",
)
@click.option("--keep-going", is_flag=True, help="Keep serving the other APIs when one fails to load (it answers 503).")
@click.option("--access-log/--no-access-log", default=True, show_default=True, help="One log line per request.")
@click.option(
    "--metrics/--no-metrics",
    default=True,
    show_default=True,
    help="Prometheus metrics at /metrics (--no-metrics only to measure their cost).",
)
@click.option(
    "--pin-threads/--no-pin-threads",
    default=None,
    help="Run the event loop and the worker threads on one core once the models are loaded. Default: on "
    "when every API is a model with one thread on CPU (request_handler or raw model) whose requests measure under "
    "1 ms of CPU, with 2 cores or more, no AsyncAPI and not on Kubernetes (docs/reference.md, item 22); else off.",
)
@click.option(
    "--max-header-bytes",
    default=64 * 1024,
    show_default=True,
    type=click.IntRange(min=1024),
    help="Largest request head (request line and headers) in bytes (431 beyond).",
)
@click.option(
    "--max-headers", default=100, show_default=True, type=click.IntRange(min=1), help="Most header fields (431 beyond)."
)
@click.option(
    "--header-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for a request head to arrive (408 beyond); idle new connections are closed after it.",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds for a request body to arrive once its head is in (408 beyond).",
)
@click.option("--hide-errors", is_flag=True, help="500 bodies carry only the request id, not the error's text.")
@click.option(
    "--api-key",
    envvar="LOCALSERVE_API_KEY",
    help="Require 'Authorization: Bearer <key>' on every route but /healthz and /readyz (401 otherwise).",
)
@fail_on_errors
def serve(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    api_names: tuple[str, ...],
    host: str,
    port: int,
    max_body_size: int,
    replicas: int | None,
    graceful_timeout: float,
    keep_going: bool,
    access_log: bool,
    metrics: bool,
    pin_threads: bool | None,
    max_header_bytes: int,
    max_headers: int,
    header_timeout: float,
    body_timeout: float,
    hide_errors: bool,
    api_key: str | None,
) -> None:
    """Serve the project's APIs over HTTP (http://127.0.0.1:8888/ by default)."""
    setup_logging(flags)
    config = load(project, config_file, flags)
    if api_names:
        config = config.only(api_names)
    display_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    config = prepare(config, flags, quiet=False, url=f"http://{display_host}:{port}")
    # Imported after prepare: numpy starts threads, and /mnt/project's mount namespace needs none.
    from localserve.server import ServeOptions
    from localserve.server.protocol import HttpLimits
    from localserve.supervisor import serve_forever

    options = ServeOptions(
        max_body_size=max_body_size,
        allow_cpu_fallback=flags.allow_cpu_fallback,
        keep_going=keep_going,
        access_log=access_log,
        metrics=metrics,
        pin_threads=pin_threads,
        port=port,
        hide_errors=hide_errors,
        api_key=api_key or None,
        freeze_heap=True,
        log_format=flags.log_format,
        log_level=flags.log_level,
    )
    limits = HttpLimits(
        max_header_bytes=max_header_bytes,
        max_headers=max_headers,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
    )
    code = serve_forever(
        config,
        options,
        host=host,
        port=port,
        replicas=replicas,
        graceful_timeout=graceful_timeout,
        limits=limits,
    )
    if code:
        sys.exit(code)
