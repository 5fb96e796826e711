"""`localserve run`: one request through the very app `serve` runs, in-process (no socket)."""

from __future__ import annotations

import json
import logging
import mimetypes
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from localserve.cli.conventions import handler_command
from localserve.cli.exits import exit_past_threads
from localserve.cli.options import (
    ApiFlags,
    cache_dir_of,
    fail_on_errors,
    load,
    logging_configured,
    project_options,
    run_api_options,
    serve_options,
)
from localserve.errors import ConfigError
from localserve.logs import capture_prints
from localserve.logs.user import stdout_to_stderr
from localserve.processes.peers import Peers
from localserve.project.compat.context import Project
from localserve.project.compat.hosts import RUN_PEERS, RUN_URL, install_api_hosts
from localserve.protocols.bodies import too_large

if TYPE_CHECKING:
    from localserve.config import ServeConfig
    from localserve.config.options import ServeOptions


@handler_command()
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
    project: Path, config_file: Path | None, flags: ApiFlags, settings: dict[str, Any], quiet: bool, **request: Any
) -> None:
    """Send one request to the handler in-process and print the response body.

    -h is --handler and -i is --image, as in ABEJA's run-local; help is --help.

    \b
    localserve run -h main:handler -i abeja/all-cpu:19.04 --input cat.jpg --quiet > flipped.jpg
    localserve run --config cortex.yaml --api iris --input sample.json
    """
    # ``request``: --api, --input, --image, --content-type, --method, --header, --query, --output.
    with logging_configured(settings, quiet=quiet, default_format="text"):
        _run(project, config_file, flags, settings, quiet, **request)


def _run(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    settings: dict[str, Any],
    quiet: bool,
    *,
    api_name: str | None,
    input_path: str | None,
    image: str | None,
    content_type: str | None,
    method: str,
    headers: tuple[str, ...],
    query: str,
    output: Path | None,
) -> None:
    if output is not None and not output.parent.is_dir():  # said before user code runs, not after
        raise ConfigError(
            f"--output {output}: the folder {output.parent} does not exist; create it, or write elsewhere."
        )
    options = serve_options(
        os.environ,
        **settings,
        async_jobs=False,  # an AsyncAPI's job runs at once, storeless
        quiet=quiet,
        # LOCALSERVE_URL/<other> reaches the other APIs, as under serve (compat.hosts.RUN_URL: started on first use).
        url=os.environ.get("LOCALSERVE_URL") or RUN_URL,
    )
    body, guessed = read_input(input_path, options.max_body_size)
    header_list = request_headers([_split_header(h) for h in headers], content_type or guessed)
    if image:
        logging.getLogger("localserve").info(
            "--image %s: localserve runs the handler in the current Python environment, not in that image", image
        )
    real_stdout = sys.stdout  # what user code prints is logged, never mixed with the body
    busy: list[str] = []
    with stdout_to_stderr():  # fd 1 too: os.write(1, ...) and C code never reach the body
        status, response_headers, response_body = send_one(
            project,
            config_file,
            flags,
            options,
            api_name=api_name,
            method=method,
            headers=header_list,
            body=body,
            query=query,
            busy=busy,
        )
    code = 0
    if status >= 400:
        click.echo(f"Error: the handler answered {status}:", err=True)
        click.echo(response_body.decode("utf-8", "replace"), err=True)
        code = 1
    else:
        _print_body(response_body, response_headers, output, real_stdout)
    if busy:  # a request past its --timeout still in the model: the interpreter's exit would abort under it
        exit_past_threads(code, busy)
    if code:
        sys.exit(code)


def _print_body(body: bytes, headers: list[tuple[str, str]], output: Path | None, stdout: Any) -> None:
    """The response body into ``output`` (relative to where run was started), or on ``stdout`` (JSON indented on a tty)."""
    if output is not None:
        try:
            output.write_bytes(body)
        except OSError as exc:
            raise ConfigError(f"--output {output}: the response body could not be written: {exc.strerror}.") from None
        return
    response_type = next((v for k, v in headers if k == "content-type"), "")
    if stdout.isatty() and response_type.startswith("application/json"):
        try:
            body = (json.dumps(json.loads(body), indent=4, ensure_ascii=False) + "\n").encode()
        except ValueError:
            pass
    stdout.buffer.write(body)
    stdout.buffer.flush()


def send_one(
    project: Path,
    config_file: Path | None,
    flags: ApiFlags,
    options: ServeOptions,
    *,
    api_name: str | None,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes,
    query: str,
    busy: list[str] | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """``localserve run`` but its printing (``localserve.testing.run`` too): one request to one API, in its project.

    ``busy`` gets the names of the APIs' threads still running once everything stopped (a request past
    its ``--timeout`` still in the model): the command must then end with ``os._exit``."""
    full = load(project, config_file, flags)
    api = full.api(api_name).name
    # Only the API called is loaded; the others start if its code calls them (http://api-<name>:8888).
    with Project(full.only([api]), options.project, cache_dir_of(options.cache_dir)) as config, capture_prints():
        return _send_one(
            config,
            replace(full, workdir=config.workdir, mnt_mode=config.mnt_mode),
            options,
            method=method,
            headers=headers,
            body=body,
            query_string=query,
            busy=busy,
        )


def _send_one(
    config: ServeConfig,
    full: ServeConfig,
    options: ServeOptions,
    *,
    method: str,
    headers: list[tuple[str, str]],
    body: bytes,
    query_string: str,
    busy: list[str] | None = None,
) -> tuple[int, list[tuple[str, str]], bytes]:
    """Inside the project: the one API of ``config`` loaded, one request sent; the peers of ``full`` on call;
    the threads still running after ``THREADS_EXIT_WAIT`` go to ``busy``."""
    # lazy: numpy, imported in the project: it starts threads, and /mnt/project's mount namespace needs none
    from localserve.server.inprocess import peer_starter, run_job_once, run_once
    from localserve.server.runner import THREADS_EXIT_WAIT, Runner

    api = config.apis[0]
    others = [a.name for a in full.apis if a.name != api.name]
    peers = Peers(
        [*(a.name for a in full.apis), *([RUN_PEERS] if others else [])], peer_starter(full, options, run_api=api.name)
    )
    install_api_hosts(peers.port_of)  # undone with the rest of the Project context
    runner = Runner(config, options)
    try:
        if api.is_async:  # an AsyncAPI's job runs now, and its result is printed
            return run_job_once(runner, api=api.name, headers=headers, body=body, query_string=query_string)
        return run_once(runner, api=api.name, method=method, headers=headers, body=body, query_string=query_string)
    finally:
        running = [*runner.app.join_threads(THREADS_EXIT_WAIT), *peers.close()]
        if busy is not None:
            busy += running


def request_headers(headers: list[tuple[str, str]], content_type: str | None) -> list[tuple[str, str]]:
    """``headers`` with a Content-Type of ``content_type`` (given or guessed) when they name none."""
    if content_type and not any(k.lower() == "content-type" for k, _ in headers):
        return [*headers, ("Content-Type", content_type)]
    return list(headers)


def read_input(input_path: str | None, limit: int) -> tuple[bytes, str | None]:
    """The body ``--input`` names, and its guessed Content-Type; past ``limit`` bytes, the server's 413 error
    (read no further: a device such as /dev/zero never ends)."""
    if input_path is None:
        return b"", None
    if input_path == "-":
        return _read_at_most(sys.stdin.buffer, limit), "application/octet-stream"
    path = Path(input_path)
    if path.is_dir():
        raise ConfigError(f"--input {input_path!r} is a directory; expected a file (or - for standard input).")
    try:
        with path.open("rb") as file:
            data = _read_at_most(file, limit)
    except FileNotFoundError:
        raise ConfigError(f"--input {input_path!r}: no such file.") from None
    except OSError as exc:  # unreadable: permissions, a device, an I/O error
        raise ConfigError(f"--input {input_path!r} cannot be read: {exc.strerror or exc}.") from None
    guessed, _ = mimetypes.guess_type(path.name)
    return data, guessed or "application/octet-stream"


def _read_at_most(file: BinaryIO, limit: int) -> bytes:
    data = file.read(limit + 1)
    if len(data) > limit:
        raise too_large(len(data), limit, at_least=True)
    return data


def _split_header(item: str) -> tuple[str, str]:
    key, sep, value = item.partition(":")
    if not sep or not key.strip():
        raise ConfigError(f"Invalid --header {item!r}: expected NAME:VALUE, e.g. 'Accept: application/json'.")
    return key.strip(), value.strip()
